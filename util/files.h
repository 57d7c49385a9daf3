// Small filesystem helpers. Nothing here knows about repro dirs or torch.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "util/status.h"

namespace parity {

// The whole of a regular file (a FIFO, device or directory is kBadInput, and opening never
// blocks) of at most `max_bytes` (larger is kBadInput naming the limit).
[[nodiscard]] Expected<std::string> ReadFile(const std::filesystem::path& path, uint64_t max_bytes = uint64_t{4} << 30);

// Writes to a temporary file next to `path`, then renames it over `path`: readers never see a
// partial file.
[[nodiscard]] Status WriteFileAtomic(const std::filesystem::path& path, const std::string& data);

// Appends `line` and a newline with a single write(2) to an O_APPEND file, then fsync: a process
// killed meanwhile leaves whole lines only (several writers may share the file).
[[nodiscard]] Status AppendLine(const std::filesystem::path& path, const std::string& line);

// Removes a file or a directory tree (like rm -rf); missing is fine. Implemented with POSIX
// calls: some libtorch builds export their own std::filesystem::remove_all, which the dynamic
// linker may bind parity's calls to, and torch 2.11's CUDA wheel's copy jumps to null.
void RemoveAll(const std::filesystem::path& path);

// `s` with every character other than letters, digits, '-', '_' and '.' replaced by '_': safe
// as one file name component.
std::string FileNameSlug(const std::string& s);

// "<path> <size> <mtime>\n": what says a file changed without reading it (cache keys: the worker
// pool's, the suite listing's); a missing file stamps as size 0.
std::string FileStamp(const std::filesystem::path& p);

// Removes the directories under `parent` named `prefix`<pid> whose process no longer exists
// (scratch left by a killed run); returns how many.
int RemoveDeadProcessDirs(const std::filesystem::path& parent, const std::string& prefix);

// This process's scratch dir in the temp dir, `prefix`<pid> (not created), the ones killed
// processes left under that prefix removed first (RemoveDeadProcessDirs).
std::filesystem::path ProcessScratchDir(const std::string& prefix);

// True when `child`, after resolving "..", symlinks and the like, lies inside `root`.
bool IsInside(const std::filesystem::path& root, const std::filesystem::path& child);

}  // namespace parity
