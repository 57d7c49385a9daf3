#!/usr/bin/env bash
# The README's test command (set-up, then every test; .ci/run calls it), inside a 30-minute budget
# on a fresh 2-core machine. After the suite come two labels that each build parity a second time,
# each planned when the budget (PARITY_CI_BUDGET_S, default 1680 s: 2 of CI's 30 minutes kept spare)
# still holds its cost on top of the other's (each scaled by how long this machine took for the
# suite: scripts/ci_labels.sh), else the log says it was left out and why; the planned ones run in
# one ctest, their entries at once (372-375 s for both against 396 s one after the other, measured
# on a 2-core VM, 2026-12-01: each leaves a core idle at times, which the other's work fills):
#   sanitize  the sanitizer build and the fuzz runs (PARITY_SANITIZE_COST_S, default 300 s: 105 s of
#             unity build and 66 s of fuzzing on a 2-core machine, 174 s in all, with room to spare);
#             PARITY_CI_SANITIZE=1 runs them regardless, =0 never;
#   install   `pip install .` into a clean venv (PARITY_INSTALL_COST_S, default 300 s: the wheels
#             from pip's cache, a build without tests at -O0, a verify; 180 s beside the
#             sanitizer label on a 2-core VM whose suite took 284 s, 2026-12-01);
#             PARITY_CI_INSTALL=1 runs it regardless, =0 never.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
start=$(date +%s)
./setup.sh
# Three entries at once on two cores: about a third of the suite's time is its tests waiting
# (timeouts they provoke, processes starting), which a third entry fills (7:51 against 8:48 at -j2).
suite_start=$(date +%s)
ctest --test-dir build --output-on-failure -j3 -LE 'sanitize|install'
suite_s=$(( $(date +%s) - suite_start ))
source scripts/ci_labels.sh  # ci_label, ci_run_labels: the budget rule
ci_label sanitize "${PARITY_CI_SANITIZE:-auto}" "${PARITY_SANITIZE_COST_S:-300}" 2
ci_label install "${PARITY_CI_INSTALL:-auto}" "${PARITY_INSTALL_COST_S:-300}" 2
ci_run_labels
