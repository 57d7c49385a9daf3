#!/usr/bin/env bash
# The README's test command (set-up, then every test; .ci/run calls it), inside a 30-minute budget
# on a fresh 2-core machine. The sanitizer build and the fuzz runs (ctest label `sanitize`, a
# second build of the base rooms) come last and run when the budget still holds them
# (PARITY_CI_BUDGET_S, default 1800 s; they take about PARITY_SANITIZE_COST_S, default 300 s:
# 105 s of unity build and 66 s of fuzzing on a 2-core machine, 174 s in all, with room to spare); otherwise the log
# says they were left out and why. PARITY_CI_SANITIZE=1 runs them regardless,
# =0 never.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
start=$(date +%s)
./setup.sh
# Three entries at once on two cores: about a third of the suite's time is its tests waiting
# (timeouts they provoke, processes starting), which a third entry fills (7:51 against 8:48 at -j2).
ctest --test-dir build --output-on-failure -j3 -LE sanitize
elapsed=$(( $(date +%s) - start ))
budget=${PARITY_CI_BUDGET_S:-1800} cost=${PARITY_SANITIZE_COST_S:-300}
want=${PARITY_CI_SANITIZE:-auto}
if [ "$want" = 1 ] || { [ "$want" = auto ] && [ $(( elapsed + cost )) -le "$budget" ]; }; then
  ctest --test-dir build --output-on-failure -j2 -L sanitize
else
  echo "ci: the sanitizer build and fuzz runs (ctest -L sanitize) left out: ${elapsed} s spent, they take about ${cost} s of the ${budget} s budget (PARITY_CI_SANITIZE=1 runs them)"
fi
