// `parity minify`: shrinks a failing repro dir to the smallest graph that still fails the same
// way. Pipeline (steps/): confirm the original fails (N runs; flaky ones stop unless
// --majority), stage bisection (eager -> aot_eager -> aot_eager_decomp_partition -> the
// backend), graph bisection (first failing graph, on its real inputs), node bisection (the
// shortest failing prefix, in O(log n) backend runs: its last node is the culprit), then delta
// passes (passes/) to a fixed point. Progress is checkpointed after every accepted step; an
// interrupted run resumes. Outputs (outputs.h): minified/, repro.py, summary.json.
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "util/status.h"

namespace parity::minifier {

struct MinifyOptions {
  std::filesystem::path repro_dir;
  std::filesystem::path out_dir;       // default DefaultOutDir(repro_dir)
  std::optional<std::string> backend;  // default: the manifest's
  std::optional<nlohmann::json> backend_options;
  std::string device;         // default: the manifest's
  std::optional<double> tol;  // default: the manifest's failure tol, else the suite's
  bool strict = false;        // accuracy: count bool/int divergence too
  int jobs = 1;
  int timeout_s = 600;
  int confirm_runs = 3;   // runs of the original before reducing
  bool majority = false;  // accept a flaky original that fails in most runs
  bool stage_bisect = true;
  bool scan = true;           // the divergence scan before node bisection (--no-scan: bisection only)
  int scan_max = 1024;        // values the scan exposes at most (an evenly spaced sample beyond)
  std::string check_command;  // --check
  std::filesystem::path cache_dir;
  std::vector<std::string> imports;  // approved host-op modules (verifier/host_ops.h)
};

struct MinifyResult {
  nlohmann::json summary;  // also written to OUT/summary.json
};

[[nodiscard]] Expected<MinifyResult> Minify(const MinifyOptions& options, std::ostream& log);

// <repro_dir>-minify, beside the repro dir (also when it is given as "DIR/").
std::filesystem::path DefaultOutDir(const std::filesystem::path& repro_dir);

}  // namespace parity::minifier
