#include "util/files.h"

#include <fcntl.h>
#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cctype>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <fstream>
#include <sstream>

namespace parity {
namespace fs = std::filesystem;

Expected<std::string> ReadFile(const fs::path& path, uint64_t max_bytes) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);  // a FIFO must not block the open
  if (fd < 0) return Error::BadInput(path.string() + ": cannot open: " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return Error::BadInput(path.string() + ": not a regular file");
  }
  if (static_cast<uint64_t>(st.st_size) > max_bytes) {
    ::close(fd);
    return Error::BadInput(path.string() + ": " + std::to_string(st.st_size) + " bytes, more than the " +
                           std::to_string(max_bytes) + " this file may have");
  }
  std::string data(static_cast<size_t>(st.st_size), '\0');
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::read(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  if (done != data.size()) return Error::BadInput(path.string() + ": read error (file changed while read?)");
  return data;
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

std::string FileStamp(const std::filesystem::path& p) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(p, ec);
  const auto time = std::filesystem::last_write_time(p, ec).time_since_epoch().count();
  return p.string() + " " + std::to_string(ec ? 0 : size) + " " + std::to_string(time) + "\n";
}

std::string FileNameSlug(const std::string& s) {
  std::string out;
  for (char c : s) out += (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.') ? c : '_';
  return out;
}

int RemoveDeadProcessDirs(const fs::path& parent, const std::string& prefix) {
  int removed = 0;
  std::error_code ec;
  for (auto it = fs::directory_iterator(parent, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) continue;
    const std::string digits = name.substr(prefix.size());
    if (digits.size() > 9 || digits.find_first_not_of("0123456789") != std::string::npos) continue;
    const pid_t pid = static_cast<pid_t>(std::stol(digits));
    if (pid <= 0 || pid == ::getpid() || ::kill(pid, 0) == 0 || errno != ESRCH) continue;
    RemoveAll(it->path());
    removed += !fs::exists(it->path(), ec);
  }
  return removed;
}

fs::path ProcessScratchDir(const std::string& prefix) {
  RemoveDeadProcessDirs(fs::temp_directory_path(), prefix);
  return fs::temp_directory_path() / (prefix + std::to_string(::getpid()));
}

}  // namespace parity

namespace parity {

Status AppendLine(const std::filesystem::path& file, const std::string& line) {
  std::error_code ec;
  if (file.has_parent_path()) std::filesystem::create_directories(file.parent_path(), ec);
  int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return Error::Runtime(file.string() + ": cannot open for append: " + std::strerror(errno));
  const std::string text = line + "\n";
  ssize_t n = ::write(fd, text.data(), text.size());
  ::fsync(fd);
  ::close(fd);
  if (n != static_cast<ssize_t>(text.size())) return Error::Runtime(file.string() + ": short write");
  return Status::Ok();
}

}  // namespace parity
