# The CI budget's rule for the ctest labels that run after the suite (sourced by scripts/test.sh;
# tests/python/test_ci_labels.py drives it with a stub ctest). The caller sets:
#   start    when the CI run began (epoch seconds)
#   suite_s  how many seconds the suite took on this machine
# Each label's cost is given at the pace of the 2-core machine it was measured on, whose suite took
# PARITY_SUITE_REF_S (default 420 s); on a machine whose suite took longer each label is expected to
# take longer in proportion (measured: a VM whose suite took 605 s against 469 s an hour before took
# 62% longer to install), never shorter.

# Runs ctest label $1 when $2 (1, 0 or auto) and the budget (PARITY_CI_BUDGET_S, default 1680 s:
# CI's 30 minutes less 2 kept for a label that runs past its estimate, as one install did, 62%
# longer on a machine whose pace said 29%) allow its cost, $3 seconds at the reference pace, with
# $4 entries at once; else says why not.
ci_label() {
  local name=$1 want=$2 ref=${PARITY_SUITE_REF_S:-420} budget=${PARITY_CI_BUDGET_S:-1680} jobs=$4
  local pace=$(( suite_s > ref ? suite_s : ref ))
  local cost=$(( $3 * pace / ref )) elapsed=$(( $(date +%s) - start ))
  if [ "$want" = 1 ] || { [ "$want" = auto ] && [ $(( elapsed + cost )) -le "$budget" ]; }; then
    ctest --test-dir build --output-on-failure -j"$jobs" -L "$name"
  else
    echo "ci: ctest -L $name left out: ${elapsed} s spent, it takes about ${cost} s of the ${budget} s budget (the suite took ${suite_s} s)"
  fi
}
