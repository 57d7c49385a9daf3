#include "experiment/calibration.h"

#include <ATen/Parallel.h>

namespace parity::experiment {

int OtherThreadCount(int current) { return current > 1 ? 1 : 2; }

Expected<std::vector<CalibrationRun>> CalibrationRuns(const interp::Program& program, const ReproDir& repro, const GraphEntry& g,
                                                      const std::string& mode, const ReferenceOptions& eager) {
  std::vector<CalibrationRun> runs;
  for (int seed = 1; seed <= kUlpSeeds; ++seed) {
    ReferenceOptions o = eager;
    o.ulp_seed = static_cast<uint64_t>(seed);
    PARITY_ASSIGN_OR_RETURN(NamedTensors r, RunReference(program, repro, g, mode, o));
    runs.push_back({"ulp seed " + std::to_string(seed), std::move(r)});
  }
  // GPU kernels do not follow the CPU's intra-op threads: there the ulp runs are the calibration.
  if (eager.device.is_cpu()) {
    const int threads = at::get_num_threads(), other = OtherThreadCount(threads);
    at::set_num_threads(other);
    auto r = RunReference(program, repro, g, mode, eager);
    at::set_num_threads(threads);
    if (!r.ok()) return r.error();
    runs.push_back({"threads " + std::to_string(other), std::move(*r)});
  }
  return runs;
}

}  // namespace parity::experiment
