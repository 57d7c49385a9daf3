// `parity minify`: shrinks a failing repro dir to the smallest graph that still fails the same
// way. Pipeline (steps/): confirm the original fails (N runs; flaky ones stop unless
// --majority), stage bisection (eager -> aot_eager -> aot_eager_decomp_partition -> the
// backend), graph bisection (first failing graph, on its real inputs), node bisection (the
// shortest failing prefix, in O(log n) backend runs: its last node is the culprit), then delta
// passes (passes/) to a fixed point. Progress is checkpointed after every accepted step; an
// interrupted run resumes. Outputs (outputs.h): minified/, repro.py, summary.json. A multi-rank
// dir (distributed/world.h) goes to MinifyRanks (ranks.h): one rank, isolated, minified so.
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "util/status.h"
#include "experiment/options.h"

namespace parity::minifier {

struct MinifyOptions {
  std::filesystem::path repro_dir;
  std::filesystem::path out_dir;       // default DefaultOutDir(repro_dir)
  std::optional<std::string> backend;  // default: the manifest's
  // How candidates run (backend options, device, tolerance default to the repro dir's); minify's
  // own defaults: MinifyDefaults().
  experiment::ExperimentOptions experiment = MinifyDefaults();
  int confirm_runs = 3;   // runs of the original before reducing
  bool majority = false;  // accept a flaky original that fails in most runs
  bool stage_bisect = true;
  bool scan = true;           // the divergence scan before node bisection (--no-scan: bisection only)
  int scan_max = 1024;        // values the scan exposes at most (an evenly spaced sample beyond)
  std::string check_command;  // --check
  bool compiler_bisect = true;  // name the compiler's part at the end (--no-compiler-bisect: skip it)
  bool fresh_runners = false;   // a fresh child per candidate (--fresh-runners) instead of each slot's job server

  // A candidate gets 600 s (not verify's 1800), and integer/bool outputs that differ do not count
  // (--strict counts them).
  static experiment::ExperimentOptions MinifyDefaults() {
    experiment::ExperimentOptions o;
    o.timeout_s = 600;
    o.ignore_non_fp = true;
    return o;
  }
};

// The exception_type of Minify's error when the original does not fail (nothing to minify).
inline constexpr const char* kDoesNotFail = "parity.DoesNotFail";

struct MinifyResult {
  nlohmann::json summary;  // also written to OUT/summary.json
};

[[nodiscard]] Expected<MinifyResult> Minify(const MinifyOptions& options, std::ostream& log);

// <repro_dir>-minify, beside the repro dir (also when it is given as "DIR/").
std::filesystem::path DefaultOutDir(const std::filesystem::path& repro_dir);

}  // namespace parity::minifier
