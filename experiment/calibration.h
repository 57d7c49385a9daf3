// The calibration of noise budgets (compare/budget.h): eager reruns of a graph that keep its
// math and move its rounding. kUlpSeeds runs with every floating input, parameter, buffer and
// recorded gradient moved one ulp in random directions (a different seed each), and on the CPU
// one run at another intra-op thread count (the threaded kernels reduce in another order). They
// are interpreter runs, no backend compile: their time is the record's calibration_time_s.
#pragma once

#include <string>
#include <vector>

#include "experiment/reference.h"

namespace parity::experiment {

inline constexpr int kUlpSeeds = 3;

struct CalibrationRun {
  std::string label;  // "ulp seed 1" ... "threads 1"
  NamedTensors results;
};

// The runs, each with `eager`'s options (device, hook) plus its own move of the rounding.
[[nodiscard]] Expected<std::vector<CalibrationRun>> CalibrationRuns(const interp::Program& program, const ReproDir& repro,
                                                                    const GraphEntry& g, const std::string& mode,
                                                                    const ReferenceOptions& eager);

// The thread count the thread run uses given the current one: 1, or 2 when already at 1.
int OtherThreadCount(int current);

}  // namespace parity::experiment
