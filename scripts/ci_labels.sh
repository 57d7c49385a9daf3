# The CI budget's rule for the ctest labels that run after the suite (sourced by scripts/test.sh;
# tests/python/test_ci_labels.py drives it with a stub ctest). The caller sets:
#   start    when the CI run began (epoch seconds)
#   suite_s  how many seconds the suite took on this machine
# then plans each label with ci_label and runs the planned ones with ci_run_labels.
# Each label's cost is given at the pace of the 2-core machine it was measured on, whose suite took
# PARITY_SUITE_REF_S (default 420 s); on a machine whose suite took longer each label is expected to
# take longer in proportion (measured: a VM whose suite took 605 s against 469 s an hour before took
# 62% longer to install), never shorter.

ci_labels=()  # the labels planned, in order
ci_jobs=0     # their entries at once, summed
ci_cost=0     # their costs at this machine's pace, summed

# Plans ctest label $1 when $2 (1, 0 or auto) and the budget (PARITY_CI_BUDGET_S, default 1680 s:
# CI's 30 minutes less 2 kept for a label that runs past its estimate, as one install did, 62%
# longer on a machine whose pace said 29%) allow its cost, $3 seconds at the reference pace, on top
# of the labels planned before it, counted as if they ran one after the other; with $4 entries at
# once. Else says why not.
ci_label() {
  local name=$1 want=$2 ref=${PARITY_SUITE_REF_S:-420} budget=${PARITY_CI_BUDGET_S:-1680} jobs=$4
  local pace=$(( suite_s > ref ? suite_s : ref ))
  local cost=$(( $3 * pace / ref )) elapsed=$(( $(date +%s) - start ))
  if [ "$want" = 1 ] || { [ "$want" = auto ] && [ $(( elapsed + ci_cost + cost )) -le "$budget" ]; }; then
    ci_labels+=("$name")
    ci_jobs=$(( ci_jobs + jobs ))
    ci_cost=$(( ci_cost + cost ))
  else
    echo "ci: ctest -L $name left out: ${elapsed} s spent and ${ci_cost} s planned, it takes about ${cost} s of the ${budget} s budget (the suite took ${suite_s} s)"
  fi
}

# Runs the planned labels in one ctest, their entries at once: each label alone leaves a core idle
# for part of its time (pip unpacking the wheels into the install label's venv, the interpreter
# that verifies there, the last fuzz target, each build's link), which the other's work fills.
ci_run_labels() {
  ((${#ci_labels[@]})) || return 0
  local names
  names=$(IFS='|'; echo "${ci_labels[*]}")
  ctest --test-dir build --output-on-failure -j"$ci_jobs" -L "^(${names})\$"
}
