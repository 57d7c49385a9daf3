// Captures of suite models, made by the worker and cached on disk per (model, test, dtype,
// device, batch size, torch version), so a matrix captures each model once and a later run not
// at all.
#pragma once

#include <filesystem>
#include <functional>
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

 private:
  std::filesystem::path dir_;
  Ask ask_;
};

// "model name" of /proc/cpuinfo, or "cpu".
std::string CpuModel();

}  // namespace parity::matrix
