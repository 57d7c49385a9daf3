// The repro dir verify writes for a FAIL or EXCEPTION_RAISED: the experiment's capture with the
// backend, its options, the device it failed on and the failure (code, kind, message, failing
// outputs, tol) in the manifest, ready for `parity minify` and `parity repro run`.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "experiment/experiment.h"

namespace parity::verify {

// The name of each spec's failure repro dir in one run, in the specs' order:
// <model>-<backend>-<test>-<dtype>-<device>, and where two specs of different repro dirs would
// share one (two captures under one model name), each of those with "-" and 8 hex digits of its
// repro dir's path: one failure never overwrites another's dir, whatever order they end in.
std::vector<std::string> FailureReproNames(const std::vector<const experiment::ExperimentSpec*>& specs);

// Writes OUTPUT_DIR/repros/<name>/ (name: FailureReproNames) and returns its path.
[[nodiscard]] Expected<std::filesystem::path> WriteFailureRepro(const std::filesystem::path& output_dir, const std::string& name,
                                                                const experiment::ExperimentSpec& spec, const experiment::ExperimentResult& result);

}  // namespace parity::verify
