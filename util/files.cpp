#include "util/files.h"

#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace parity {
namespace fs = std::filesystem;

Expected<std::string> ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Error::BadInput(path.string() + ": cannot open: " + std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return Error::BadInput(path.string() + ": read error");
  return ss.str();
}

Status WriteFileAtomic(const fs::path& path, const std::string& data) {
  std::error_code ec;
  if (path.has_parent_path()) fs::create_directories(path.parent_path(), ec);
  fs::path tmp = path;
  tmp += ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return Error::Runtime(tmp.string() + ": cannot create: " + std::strerror(errno));
    out.write(data.data(), static_cast<std::streamsize>(data.size()));
    out.flush();
    if (!out) return Error::Runtime(tmp.string() + ": write failed");
  }
  fs::rename(tmp, path, ec);
  if (ec) return Error::Runtime(path.string() + ": rename failed: " + ec.message());
  return Status::Ok();
}

namespace {
int RemoveEntry(const char* path, const struct stat*, int, struct FTW*) { return ::remove(path); }
}  // namespace

void RemoveAll(const fs::path& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return;
  if (!S_ISDIR(st.st_mode)) {
    ::unlink(path.c_str());
    return;
  }
  ::nftw(path.c_str(), RemoveEntry, 16, FTW_DEPTH | FTW_PHYS);
}

bool IsInside(const fs::path& root, const fs::path& child) {
  std::error_code ec;
  fs::path r = fs::weakly_canonical(root, ec);
  if (ec) return false;
  fs::path c = fs::weakly_canonical(child, ec);
  if (ec) return false;
  auto rit = r.begin();
  auto cit = c.begin();
  for (; rit != r.end(); ++rit, ++cit) {
    if (rit->empty()) continue;  // trailing separator
    if (cit == c.end() || *rit != *cit) return false;
  }
  return true;
}

std::string FileNameSlug(const std::string& s) {
  std::string out;
  for (char c : s) out += (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.') ? c : '_';
  return out;
}

}  // namespace parity
