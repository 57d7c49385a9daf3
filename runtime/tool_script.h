// The Python package's torch-free scripts (tools/parity_capture/<name>.py that import neither
// torch nor the package: repro_script.py, report.py), run as files in the worker's Python: text
// work such as writing repro.py or rendering a report costs a Python start (a tenth of a second),
// not torch's import (seconds).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "util/status.h"

namespace parity::runtime {

// Runs `<tools>/parity_capture/<name>.py ARGS...`, its output to `log` (removed when it succeeds);
// an error names the script, how it ended and the log's end. It must end within `timeout_s`.
[[nodiscard]] Status RunToolScript(const std::string& name, const std::vector<std::string>& args,
                                   const std::filesystem::path& log, int timeout_s = 120);

}  // namespace parity::runtime
