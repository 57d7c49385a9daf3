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
#include "verifier/experiment.h"

namespace parity::verifier {

// Command-line overrides. Unset fields fall back to the repro dir's manifest (FromRepro) or
// to the defaults (FromSuite).
struct CaseOptions {
  std::optional<std::string> backend;             // FromRepro: default the manifest's backend
  std::optional<nlohmann::json> backend_options;  // default: the manifest's, for its own backend
  std::optional<std::string> device;              // FromRepro: default the manifest's device
  std::optional<double> tol;                      // default: the manifest's failure tol, else the suite's
  bool cosine = false;
  bool ignore_non_fp = false;
  int batch_size = 0;  // FromSuite: 0 = the model's default
  int repeat = 1;
  int iterations_per_run = 1;
  std::string cache_dir;  // default DefaultCacheDir()
  std::vector<std::string> imports;  // approved host-op modules (verifier/host_ops.h)
};

struct Case {
  // A suite model (captured later: `repro` stays empty until the capture exists).
  static ExperimentSpec FromSuite(const std::string& model, const std::string& suite, const std::string& test,
                                  const std::string& dtype, const CaseOptions& options);
  // A repro dir: model, suite, test (mode) and dtype from its manifest. BadInput naming the
  // manifest when no backend is given and the manifest names none.
  [[nodiscard]] static Expected<ExperimentSpec> FromRepro(const ReproDir& repro, const CaseOptions& options);
};

// The dtype a capture ran in, for tolerances and reports: "amp" when it ran under autocast
// (`fields` holds "amp", the manifest's or a graph's), else its floating dtype.
std::string CapturedDtype(const std::string& dtype, const nlohmann::json& fields);

// Where captures and compiled artifacts are cached: $PARITY_CACHE_DIR, else
// $XDG_CACHE_HOME/parity, else ~/.cache/parity.
std::filesystem::path DefaultCacheDir();

// Default tolerance as PyTorch's benchmark suites set it (docs/verify.md).
double DefaultTolerance(const std::string& suite, const std::string& test, const std::string& dtype);

// The tolerance the experiment will use: --tol, else the suite's default.
double EffectiveTolerance(const ExperimentSpec& spec);

}  // namespace parity::verifier
