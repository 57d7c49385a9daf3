// The repro dir verify writes for a FAIL or EXCEPTION_RAISED: the experiment's capture with the
// backend, its options, the device it failed on and the failure (code, kind, message, failing
// outputs, tol) in the manifest, ready for `parity minify` and `parity repro run`.
#pragma once

#include <filesystem>

#include "experiment/experiment.h"

namespace parity::verify {

// Writes OUTPUT_DIR/repros/<model>-<backend>-<test>-<dtype>-<device>/ and returns its path.
[[nodiscard]] Expected<std::filesystem::path> WriteFailureRepro(const std::filesystem::path& output_dir,
                                                                const experiment::ExperimentSpec& spec, const experiment::ExperimentResult& result);

}  // namespace parity::verify
