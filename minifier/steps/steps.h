// The minify pipeline's steps, one file each, over the shared ReductionState. Each states what
// it reads and what it sets; a step that cannot go on returns an error (Runtime: nothing to
// minify, or the failure needs what was cut).
#pragma once

#include "minifier/reduction.h"

namespace parity::minifier {

// The original must fail, the same way, reliably: options.confirm_runs runs (or the --check
// command once). Sets original, confirm. Flaky originals stop unless --majority.
[[nodiscard]] Status Confirm(StepContext& ctx, ReductionState& state);

// eager -> aot_eager -> aot_eager_decomp_partition -> the backend on the original: the first
// stage that fails the same way names the layer at fault. Sets stages, first_failing_stage.
[[nodiscard]] Status StageBisect(StepContext& ctx, ReductionState& state);

// The first graph that fails alone on its captured inputs (the only one if there is one).
// Sets graph_index and current.
[[nodiscard]] Status GraphBisect(StepContext& ctx, ReductionState& state);

// The shortest failing prefix of `current` (k-ary search, options.jobs probes at a time): its
// last op is the culprit. Sets culprit and cuts `current` to the prefix; leaves both when the
// graph returning all its live values does not fail the same way.
[[nodiscard]] Status NodeBisect(StepContext& ctx, ReductionState& state, Interestingness& test);

}  // namespace parity::minifier
