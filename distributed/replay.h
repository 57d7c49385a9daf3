// `parity repro run` of a multi-rank dir, simulated: every rank's graphs run in this process, a
// thread per rank, each as `repro run` runs one repro dir (its eager run against the outputs its
// rank stored, its fp64 reference), the collectives computed by a SimulatedWorld. A verdict per
// rank and one for the run (every rank passes).
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "distributed/real.h"
#include "distributed/world.h"
#include "experiment/options.h"
#include "verify/run_repro.h"

namespace parity::distributed {

struct RankReport {
  int rank = 0;
  verify::ReproRunReport report;
};

struct WorldReport {
  bool pass = true;
  int world_size = 0;
  std::string mode = "simulated";  // "real": the backend's runs in a process per rank
  std::string backend = "eager";
  std::string error;  // the real run's failure (a rank's process crashed or timed out); then no rank report
  std::vector<RankReport> ranks;
  nlohmann::json ToJson() const;
  std::string ToText() const;
};

// The real run of `backend` (distributed/real.h) through its torch.compile form, `options` its
// options (null: none); BadInput when the backend is unknown, Unsupported when it has no
// torch.compile form (a C++ backend). The scratch dir is the caller's to set.
[[nodiscard]] Expected<RealRun> RealRunOf(const std::string& backend, const nlohmann::json& options, const std::string& device,
                                          std::chrono::milliseconds timeout);

// The interpreter's options every rank's judge runs with: the dir's device unless the options'
// device, the suite's tolerance unless their tol (as verify's experiments). BadInput naming rank
// 0's manifest when the device is not available here.
[[nodiscard]] Expected<verify::RunReproOptions> JudgeOptions(const World& world, const experiment::ExperimentOptions& options);

// BadInput when a rank's dir cannot be run at all (as verify::RunRepro); a collective that fails
// (a rank that never joins, a timeout) is a runtime failure in the ranks' reports. `options`
// apply to every rank (its `collectives` are set here); `timeout`: how long a collective waits
// for its members.
[[nodiscard]] Expected<WorldReport> RunSimulated(const World& world, const verify::RunReproOptions& options,
                                                 std::chrono::milliseconds timeout);

// `parity repro run DIR --backend X` of a multi-rank dir: the backend's run of every rank for real
// (real.h), each rank's outputs then judged against the outputs its program stored, with the fp64
// reference of a simulated run (same() as verify applies it). A rank's process that crashed or
// timed out fails the run, named in `error`.
[[nodiscard]] Expected<WorldReport> RunWithBackend(const World& world, const verify::RunReproOptions& options,
                                                   const RealRun& run);

}  // namespace parity::distributed
