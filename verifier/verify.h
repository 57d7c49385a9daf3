// `parity verify`: the experiment matrix (models or repro dirs x backends x tests x dtypes),
// each experiment in an isolated child process with a timeout, results appended atomically to
// results.jsonl, resumable by experiment fingerprint, a repro dir written for every FAIL and
// EXCEPTION_RAISED.
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "util/status.h"

namespace parity::verifier {

struct VerifyOptions {
  std::vector<std::string> models;      // suite names ("all" = every model)
  std::vector<std::string> repro_dirs;  // captured repro dirs
  std::vector<std::string> backends{"inductor"};
  nlohmann::json backend_options = nlohmann::json::object();
  std::vector<std::string> tests{"eval"};
  std::vector<std::string> dtypes{"float32"};
  std::string device = "cpu";
  int batch_size = 0;  // 0: the model's default
  int repeat = 1;
  int iterations_per_run = 1;
  std::string filter, exclude;  // regexes over model names
  std::optional<double> tol;
  bool cosine = false;
  int timeout_s = 1800;
  std::filesystem::path output_dir = "parity-results";
  std::filesystem::path cache_dir;  // default DefaultCacheDir()
  bool progress = false;            // live status line (a TTY)
  std::vector<std::string> imports;  // approved host-op modules (--import + config; verifier/host_ops.h)
};

struct VerifySummary {
  int total = 0, passed = 0, failed = 0, skipped = 0, resumed = 0;
  std::vector<nlohmann::json> lines;  // the records written by this run
  std::filesystem::path results_file;
};

[[nodiscard]] Expected<VerifySummary> Verify(const VerifyOptions& options, std::ostream& out);

}  // namespace parity::verifier
