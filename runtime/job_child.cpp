#include <fcntl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>

#include "runtime/job_dir.h"
#include "runtime/jobs.h"
#include "runtime/worker.h"
#include "util/files.h"
#include "util/socket.h"

// The child's side of a job: one job from its dir (JobChildMain), or a job server running one job
// after another for its driver (JobServerMain).
namespace parity::runtime {
namespace fs = std::filesystem;
using nlohmann::json;
using namespace job_dir;

int JobChildMain(const fs::path& dir, const JobFn& run, const std::vector<fs::path>& next) {
  auto text = ReadFile(dir / kSpec);
  if (!text.ok()) return 2;
  const json spec = json::parse(*text, nullptr, false);
  const fs::path status = dir / kStatus;
  std::vector<NextJob> told;  // the next jobs the driver told of, up to one whose spec does not read
  for (const fs::path& n : next) {
    auto text = ReadFile(n / kSpec);
    json next_spec = text.ok() ? json::parse(*text, nullptr, false) : json();
    if (!next_spec.is_object()) break;
    told.push_back({std::move(next_spec), n});
  }
  auto result = run(spec, dir, [&](const std::string& phase) { std::ofstream(status, std::ios::trunc) << phase << "\n"; }, told);
  if (!result.ok()) {
    std::fprintf(stderr, "%s\n", result.error().message.c_str());
    return 2;
  }
  return WriteFileAtomic(dir / kResult, result->dump()).ok() ? 0 : 3;
}

namespace {

// One line from `fd` (without its newline); nullopt at EOF or on an error.
std::optional<std::string> ReadLine(int fd, std::string& buffer) {
  while (true) {
    const auto nl = buffer.find('\n');
    if (nl != std::string::npos) {
      std::string line = buffer.substr(0, nl);
      buffer.erase(0, nl + 1);
      return line;
    }
    char buf[4096];
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return std::nullopt;
    buffer.append(buf, static_cast<size_t>(n));
  }
}

// Runs one job with this process's stdout and stderr in DIR/log.txt, as a job child's are.
int RunLogged(const fs::path& dir, const std::vector<fs::path>& next, const JobFn& run) {
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  const int out = ::dup(1), err = ::dup(2);
  const int log = ::open((dir / kLog).c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (log >= 0) {
    ::dup2(log, 1);
    ::dup2(log, 2);
    ::close(log);
  }
  const int code = JobChildMain(dir, run, next);
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  ::dup2(out, 1);
  ::dup2(err, 2);
  ::close(out);
  ::close(err);
  return code;
}

}  // namespace

int JobServerMain(const std::string& socket, const JobFn& run) {
  const int listener = ListenUnix(socket, SOCK_STREAM, 1);  // the driver connects once it listens
  if (listener < 0) return 3;
  const int fd = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
  ::close(listener);
  ::unlink(socket.c_str());
  if (fd < 0) return 3;
  std::string buffer;
  while (auto line = ReadLine(fd, buffer)) {
    std::vector<fs::path> dirs;  // the job's, then the next ones'
    for (size_t at = 0; at <= line->size();) {
      const size_t tab = std::min(line->find('\t', at), line->size());
      dirs.emplace_back(line->substr(at, tab - at));
      at = tab + 1;
    }
    const int code = RunLogged(dirs.front(), {dirs.begin() + 1, dirs.end()}, run);
    ReleaseWorker();  // the slot's worker serves the driver between jobs
    if (!SendAll(fd, std::to_string(code) + "\n")) break;
  }
  ::close(fd);
  return 0;
}

}  // namespace parity::runtime
