// Captures of suite models, made by the worker and cached on disk per (model, test, dtype,
// device, batch size, torch version), so a matrix captures each model once and a later run not
// at all.
#pragma once

#include <filesystem>
#include <functional>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "util/status.h"
#include "experiment/experiment.h"

namespace parity::matrix {

class CaptureCache {
 public:
  using Ask = std::function<Expected<nlohmann::json>(const nlohmann::json& request)>;
  CaptureCache(std::filesystem::path cache_dir, Ask ask) : dir_(std::move(cache_dir)), ask_(std::move(ask)) {}
  // The repro dir holding the capture `spec` needs (spec.model, test, dtype, device, batch size).
  [[nodiscard]] Expected<std::string> Get(const experiment::ExperimentSpec& spec);
  // Whether Get(spec) finds the capture already made (asks nothing).
  bool Has(const experiment::ExperimentSpec& spec) const;

 private:
  std::filesystem::path dir_;
  Ask ask_;
};

// The suite models' listing (the worker's list_models): kept in `cache_dir` under the stamp of the
// package's models.py and the worker's Python, which alone decide it, so a run whose captures are
// cached and whose backends parity runs itself starts no worker.
std::optional<nlohmann::json> CachedModelListing(const std::filesystem::path& cache_dir);
// The cached listing, else `ask`'s, stored for the next run.
[[nodiscard]] Expected<nlohmann::json> ModelListing(const std::filesystem::path& cache_dir,
                                                    const std::function<Expected<nlohmann::json>()>& ask);

// "model name" of /proc/cpuinfo, or "cpu".
std::string CpuModel();

}  // namespace parity::matrix
