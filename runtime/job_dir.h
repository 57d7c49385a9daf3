// A job's dir as the driver (jobs.cpp) and the child or job server (job_child.cpp) both see it:
// the spec in, the result and the current phase out, the child's log. Internal to runtime/.
#pragma once

#include <filesystem>
#include <string>

#include "util/files.h"

namespace parity::runtime::job_dir {

inline constexpr const char* kSpec = "spec.json";
inline constexpr const char* kResult = "result.json";
inline constexpr const char* kStatus = "status.txt";
inline constexpr const char* kLog = "log.txt";

// The last `max_chars` characters of `file` ("" when it cannot be read).
inline std::string Tail(const std::filesystem::path& file, size_t max_chars) {
  auto t = ReadFile(file);
  if (!t.ok()) return "";
  return t->size() > max_chars ? t->substr(t->size() - max_chars) : *t;
}

}  // namespace parity::runtime::job_dir
