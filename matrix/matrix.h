// The experiment matrix: the options checked (bad input is exit 2 before anything runs) and
// expanded into the experiments to run, in order: suite models, then repro dirs (each read once:
// repro_dirs.h), x tests x dtypes x backends, each made by the one case mapping (experiment/case.h).
#pragma once

#include <nlohmann/json.hpp>

#include <functional>
#include <string>
#include <vector>

#include "matrix/options.h"
#include "matrix/repro_dirs.h"
#include "experiment/experiment.h"

namespace parity::matrix {

// The options alone (the dirs are checked when they are read: LoadReproDirs).
[[nodiscard]] Status ValidateMatrixOptions(const MatrixOptions& options);

// --filter/--exclude as a predicate over model names (`parity ci` applies it to the baseline).
[[nodiscard]] Expected<std::function<bool(const std::string&)>> ModelNameFilter(const MatrixOptions& options);

// `list_models` answers the worker's list_models request (the worker owns the model code); it
// is asked only when suite models are requested. Suite experiments come with `repro` empty:
// they are captured when they run.
[[nodiscard]] Expected<std::vector<experiment::ExperimentSpec>> ExpandMatrix(
    const MatrixOptions& options, const LoadedDirs& dirs, const std::function<Expected<nlohmann::json>()>& list_models);

}  // namespace parity::matrix
