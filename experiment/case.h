// The one mapping from "what the user asked for" to the experiment to run: a suite model, or a
// repro dir plus command-line overrides, becomes an ExperimentSpec. verify, minify and
// `repro run` all ask here; nothing else reads suite, tolerance or backend options from a
// manifest.
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>
#include <optional>
#include <string>

#include "repro/repro_dir.h"
#include "experiment/experiment.h"
#include "experiment/options.h"

namespace parity::experiment {

struct Case {
  // A suite model (captured later: `repro` stays empty until the capture exists).
  static ExperimentSpec FromSuite(const std::string& model, const std::string& suite, const std::string& test,
                                  const std::string& dtype, const std::string& backend, const ExperimentOptions& options);
  // A repro dir: model, suite, test (mode), dtype and device from its manifest, `options`
  // overriding what they set. `backend` unset: the manifest's; BadInput naming the manifest when
  // it names none.
  [[nodiscard]] static Expected<ExperimentSpec> FromRepro(const ReproDir& repro, const std::optional<std::string>& backend,
                                                          const ExperimentOptions& options);
};

// The dtype a capture ran in, for tolerances and reports: "amp" when it ran under autocast
// (`fields` holds "amp", the manifest's or a graph's), else its floating dtype.
std::string CapturedDtype(const std::string& dtype, const nlohmann::json& fields);

// Where captures and compiled artifacts are cached when no --cache-dir is given: parity's cache
// dir (runtime::ParityCacheDir(), runtime/python_env.h, the one rule of where it is).
std::filesystem::path DefaultCacheDir();

// Default tolerance as PyTorch's benchmark suites set it (docs/verify.md).
double DefaultTolerance(const std::string& suite, const std::string& test, const std::string& dtype);

// The tolerance the experiment will use: --tol, else the suite's default.
double EffectiveTolerance(const ExperimentSpec& spec);

}  // namespace parity::experiment
