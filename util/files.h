// Small filesystem helpers. Nothing here knows about repro dirs or torch.
#pragma once

#include <filesystem>
#include <string>

#include "util/status.h"

namespace parity {

[[nodiscard]] Expected<std::string> ReadFile(const std::filesystem::path& path);

// Writes to a temporary file next to `path`, then renames it over `path`: readers never see a
// partial file.
[[nodiscard]] Status WriteFileAtomic(const std::filesystem::path& path, const std::string& data);

// True when `child`, after resolving "..", symlinks and the like, lies inside `root`.
bool IsInside(const std::filesystem::path& root, const std::filesystem::path& child);

}  // namespace parity
