// The phases an experiment's wall time is split into (a record's metrics.phase_seconds), in the
// order an experiment meets them: the one list the flow accounts by (experiment/flow.cpp), the
// driver adds its own to (verify/), and the console and the HTML report show.
#pragma once

#include <string>

namespace parity::results {

struct PhaseInfo {
  const char* name;
  const char* meaning;
};

inline constexpr PhaseInfo kPhases[] = {
    {"capture", "a suite model captured into a repro dir (a repro dir given is not)"},
    {"process", "the experiment's process started and its result read back"},
    {"load", "the repro dir read and its graphs made ready for the interpreter"},
    {"eager", "the eager reference, twice"},
    {"fp64", "the fp64 reference"},
    {"ahead", "the next experiment's reference, run while this one waited for its worker (the next one's record leaves it out)"},
    {"worker_start", "waiting for the Python worker to start (beyond what the reference hid)"},
    {"compile", "waiting for the backend's compile and first run (beyond what the reference hid)"},
    {"backend_runs", "the backend's timed runs, and its results read back"},
    {"calibration", "the noise budgets' eager reruns, where the rule or a failure needs them"},
    {"compare", "same() and the statistics of every output"},
    {"reports", "the record written, and a failure's repro dir"},
};

// Whether `name` is one of kPhases.
inline bool KnownPhase(const std::string& name) {
  for (const auto& p : kPhases)
    if (name == p.name) return true;
  return false;
}

}  // namespace parity::results
