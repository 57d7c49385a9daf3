// What `parity minify` leaves behind, written from the reduction state in memory: OUT/minified/
// (data only, the failure recorded with its tolerance), OUT/minified/repro.py (made by the
// Python package, torch and safetensors only), OUT/summary.json, and the closing log lines.
#pragma once

#include <chrono>
#include <filesystem>
#include <iosfwd>

#include "minifier/interesting.h"
#include "minifier/reduction.h"

namespace parity::minifier {

struct OutputContext {
  const ReproDir& repro;
  const MinifyOptions& options;
  const CandidateWriter& writer;  // of the graph reduced
  std::filesystem::path out;
  int test_runs = 0, cache_hits = 0;
  std::chrono::steady_clock::time_point started;
  int runners_started = 0;  // job servers started (one per slot, plus one per replacement); 0: a child per run
  int workers_adopted = 0;  // slots whose Python worker an earlier run kept warm (--keep-workers)
};

// The failure a minified dir records: the signature plus the tolerance it was judged at.
nlohmann::json FailureRecord(const ReductionState& state);

// Writes everything; returns the summary. Every write is checked.
[[nodiscard]] Expected<nlohmann::json> WriteOutputs(const OutputContext& ctx, const ReductionState& state, std::ostream& log);

}  // namespace parity::minifier
