// The verify matrix: the options checked (bad input is exit 2 before anything runs) and
// expanded into the experiments to run, in order: suite models (or repro dirs) x tests x dtypes
// x backends, each made by the one case mapping (verifier/case.h).
#pragma once

#include <functional>
#include <vector>

#include "verifier/experiment.h"
#include "verify/verify.h"

namespace parity::verify {

// Includes: every repro dir passes CheckReproDir.
[[nodiscard]] Status ValidateVerifyOptions(const VerifyOptions& options);

// A repro dir verifies as given: it loads (every file and field valid), the modules of its host
// ops are approved, and it was captured in the test and dtype asked for.
[[nodiscard]] Status CheckReproDir(const std::string& dir, const VerifyOptions& options);

// The repro dirs that fail CheckReproDir leave `options.repro_dirs` and come back with why: one
// bad dir among several is reported, the others still verify.
std::vector<BadDir> SetAsideBadDirs(VerifyOptions& options);

// The worker imports the modules of the repro dirs' host ops (an import error is exit 2 before
// anything runs, not an EAGER_FAILED per experiment).
[[nodiscard]] Status ImportReproHostOps(const VerifyOptions& options,
                                        const std::function<Expected<nlohmann::json>(const nlohmann::json&)>& ask);

// Whether any experiment runs on CUDA: --device, else a repro dir's own device.
bool UsesCuda(const VerifyOptions& options);

// --filter/--exclude as a predicate over model names (`parity ci` applies it to the baseline).
[[nodiscard]] Expected<std::function<bool(const std::string&)>> ModelNameFilter(const VerifyOptions& options);

// `list_models` answers the worker's list_models request (the worker owns the model code); it
// is asked only when suite models are requested. Suite experiments come with `repro` empty:
// they are captured when they run.
[[nodiscard]] Expected<std::vector<verifier::ExperimentSpec>> ExpandMatrix(const VerifyOptions& options,
                                                                 const std::function<Expected<nlohmann::json>()>& list_models);

}  // namespace parity::verify
