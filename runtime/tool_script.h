// The Python package's torch-free scripts (tools/parity_capture/<name>.py that import neither
// torch nor the package), run as files in the worker's Python: text work such as writing
// repro.py costs a Python start (a tenth of a second), not a worker's (torch imported, seconds).
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>

#include "util/status.h"

namespace parity::runtime {

// Runs `<tools>/parity_capture/<name>.py '<request as JSON>'`, its output to `log` (removed when it
// succeeds); an error names the script, how it ended and the log's end. It must end within
// `timeout_s`.
[[nodiscard]] Status RunToolScript(const std::string& name, const nlohmann::json& request, const std::filesystem::path& log,
                                   int timeout_s = 120);

}  // namespace parity::runtime
