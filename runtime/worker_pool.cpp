#include "runtime/worker_pool.h"

#include <fcntl.h>
#include <pwd.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "runtime/fork_server.h"
#include "runtime/jobs.h"
#include "runtime/worker.h"
#include "util/digest.h"
#include "util/files.h"
#include "util/subprocess.h"

namespace parity::runtime {
namespace fs = std::filesystem;

namespace {

// Entries per key: more than any -j on one machine needs.
constexpr int kMaxEntries = 64;

int& KeepSetting() {
  static int keep = [] {
    const char* e = std::getenv(kKeepWorkersEnv);
    return e && *e ? std::max(0, std::atoi(e)) : 0;
  }();
  return keep;
}

// Variables that differ between two invocations of one user's shell without changing a worker.
bool Ignored(const std::string& name) {
  // Variables that say where or how the caller runs, not what a worker does: a shell's, a
  // terminal's, pytest's name of the test running now (a CI that runs parity from pytest), and the
  // settings only parity's C++ side reads (its config file, host_ops/approval.h, whose allow-list
  // reaches a worker as the modules it imports, kImportEnv; whether it forks workers,
  // fork_server.h), so that a run with its own config file adopts the same worker.
  static const char* const kNames[] = {"_", "OLDPWD", "SHLVL", "COLUMNS", "LINES", "TERM", "PARITY_WORKER_SOCKET",
                                       "PYTEST_CURRENT_TEST", "PARITY_CONFIG", kForkServerEnv};
  for (const char* n : kNames)
    if (name == n) return true;
  return false;
}

// Inductor's cache dir when TORCHINDUCTOR_CACHE_DIR is unset (torch/_inductor/runtime/
// cache_dir_utils.py: <tempfile.gettempdir()>/torchinductor_<getpass.getuser()>, where a
// process that used Inductor writes it into its own environment, and so into its children's).
std::string InductorDefaultCacheDir(const std::map<std::string, std::string>& env) {
  auto get = [&env](const char* k) -> std::string {
    auto it = env.find(k);
    return it == env.end() ? "" : it->second;
  };
  std::string tmp = "/tmp";
  for (const char* k : {"TMPDIR", "TEMP", "TMP"})
    if (!get(k).empty()) {
      tmp = get(k);
      break;
    }
  std::string user;
  for (const char* k : {"LOGNAME", "USER", "LNAME", "USERNAME"})
    if (!get(k).empty()) {
      user = get(k);
      break;
    }
  if (user.empty()) {
    const struct passwd* pw = ::getpwuid(::getuid());
    if (!pw) return "";
    user = pw->pw_name;
  }
  for (char& c : user)
    if (std::strchr("\\/:*?\"<>|", c)) c = '_';
  return tmp + "/torchinductor_" + user;
}

// Variables whose value here changes nothing for a worker: Inductor's cache dir set to its own
// default, and the pointer Inductor keeps in its process's environment for its compile children.
bool SameAsUnset(const std::string& name, const std::string& value, const std::map<std::string, std::string>& env) {
  if (name == "_TORCHINDUCTOR_PYOBJECT_TENSOR_DATA_PTR") return true;
  return name == "TORCHINDUCTOR_CACHE_DIR" && value == InductorDefaultCacheDir(env);
}

int TryLock(const std::string& path, bool create) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC | (create ? O_CREAT : 0), 0600);
  if (fd < 0) return -1;
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

nlohmann::json ReadMeta(const std::string& base) {
  auto text = ReadFile(base + ".json");
  if (!text.ok()) return nlohmann::json::object();
  auto j = nlohmann::json::parse(*text, nullptr, false);
  return j.is_object() ? j : nlohmann::json::object();
}

pid_t MetaPid(const nlohmann::json& meta) { return meta.contains("pid") && meta["pid"].is_number_integer() ? meta["pid"].get<pid_t>() : 0; }

// The entry's worker, when it is live: listening, or still starting (a run that ended before its
// worker listened left it; the next user waits for its socket, runtime/worker.h Ensure).
pid_t WarmPid(const std::string& base) {
  const pid_t pid = MetaPid(ReadMeta(base));
  return pid > 0 && IsLiveWorker(pid) ? pid : 0;
}

void ClearEntry(const std::string& base) {
  std::error_code ec;
  fs::remove(base + ".sock", ec);
  fs::remove(base + ".json", ec);
}

std::string NowUtc() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// The entries of the pool dir: (key, index) of each `<key>-<n>.lock`.
std::vector<std::pair<std::string, int>> Entries(const fs::path& dir) {
  std::vector<std::pair<std::string, int>> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (e.path().extension() != ".lock") continue;
    const std::string stem = e.path().stem().string();
    const auto dash = stem.rfind('-');
    if (dash == std::string::npos) continue;
    try {
      out.emplace_back(stem.substr(0, dash), std::stoi(stem.substr(dash + 1)));
    } catch (const std::exception&) {
    }
  }
  return out;
}

}  // namespace

void SetKeepWorkers(int seconds) { KeepSetting() = std::max(0, seconds); }
int KeepWorkers() { return KeepSetting(); }

Expected<fs::path> PoolDir(bool create) {
  fs::path dir;
  if (const char* e = std::getenv(kWorkerPoolEnv); e && *e)
    dir = e;
  else
    dir = fs::temp_directory_path() / ("parity-workers-" + std::to_string(::getuid()));
  // An entry's socket, <dir>/<16 hex>-<n>.sock, must fit a Unix socket address (108 bytes).
  if (dir.string().size() > 80)
    return Error::BadInput("worker pool " + dir.string() + " (" + kWorkerPoolEnv + "): longer than 80 characters (its sockets must fit 108)");
  if (create) {
    std::error_code ec;
    fs::create_directories(dir.parent_path(), ec);
    ::mkdir(dir.c_str(), 0700);  // exists already: checked below
  }
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0) {
    if (!create) return dir;  // no pool: nothing to adopt
    return Error::BadInput("worker pool " + dir.string() + " (" + kWorkerPoolEnv + "): cannot create: " + std::strerror(errno));
  }
  if (!S_ISDIR(st.st_mode) || st.st_uid != ::getuid() || (st.st_mode & 077) != 0)
    return Error::BadInput("worker pool " + dir.string() + " (" + kWorkerPoolEnv +
                           "): must be a dir of this user's that no one else may enter (mode 0700)");
  return dir;
}

namespace {
// Variables a fork server's key leaves out (runtime/fork_server.h): its imports (torch, dynamo,
// Inductor, parity's worker module) read none of them, or its fork takes the requester's values
// in their place (tools/parity_capture/forkserver.py): the modules --import names (worker.py
// imports them as it starts), cuBLAS's workspace (read at its first handle, which parity's own
// experiments set), parity's settings of its C++ side (a slot's cores, the cache dir), CI
// systems' shard indices, PYTHONPATH (the fork puts the request's entries in sys.path, and
// refuses a request whose entries would shadow a module the server imported, or drop one it
// imported from), Inductor's compile threads (the fork decides them again from its own
// environment) and which GPUs are visible (the server never initialises CUDA, which reads it;
// how many are visible is in the key: its imports asked NVML whether one is), so that the slots
// of a run on several GPUs fork their workers from one server.
bool LeftToTheFork(const std::string& name) {
  static const char* const kNames[] = {kImportEnv, "CUBLAS_WORKSPACE_CONFIG", kKeepWorkersEnv, kWorkerPoolEnv, "PARITY_SHARDS",
                                       kSlotCpusEnv, "PARITY_CACHE_DIR", "PYTHONPATH", kCompileThreadsEnv, kVisibleDevicesEnv,
                                       "CI_NODE_INDEX", "CI_NODE_TOTAL", "SLURM_ARRAY_TASK_ID", "SLURM_ARRAY_TASK_COUNT",
                                       "JOB_COMPLETION_INDEX"};
  for (const char* n : kNames)
    if (name == n) return true;
  return false;
}

// Whether the thread counts of `env` are left to the fork too: OMP_NUM_THREADS and
// MKL_NUM_THREADS set alike to a count, as a job slot's are (jobs.cpp). The server then imports
// with one thread and each fork sets its own (forkserver.py's threads_per_request: the same rule).
bool ThreadsPerRequest(const std::map<std::string, std::string>& env) {
  auto omp = env.find("OMP_NUM_THREADS"), mkl = env.find("MKL_NUM_THREADS");
  if (omp == env.end() || mkl == env.end() || omp->second != mkl->second || omp->second.empty()) return false;
  if (omp->second.find_first_not_of("0123456789") != std::string::npos) return false;
  return omp->second.find_first_not_of('0') != std::string::npos;
}

// How many devices a CUDA_VISIBLE_DEVICES value names (its comma-separated entries).
std::string VisibleCount(const std::string& value) {
  size_t n = 0;
  std::stringstream in(value);
  for (std::string id; std::getline(in, id, ',');) n += !id.empty();
  return std::to_string(n);
}

std::string KeyOf(const std::vector<std::string>& extra_env, bool fork_server) {
  const std::map<std::string, std::string> env = WorkerEnvironment(extra_env);
  std::string text = std::string(fork_server ? "fork server of " : "") + "python " + WorkerPython() + "\n";
  std::error_code ec;
  text += "cwd " + fs::current_path(ec).string() + "\n";
  const bool threads_left = fork_server && ThreadsPerRequest(env);
  if (threads_left) text += "threads per request\n";
  if (auto gpus = env.find(kVisibleDevicesEnv); fork_server && gpus != env.end()) text += "visible devices " + VisibleCount(gpus->second) + "\n";
  for (const auto& [k, v] : env) {
    const bool left = fork_server && (LeftToTheFork(k) || (threads_left && (k == "OMP_NUM_THREADS" || k == "MKL_NUM_THREADS")));
    if (!Ignored(k) && !SameAsUnset(k, v, env) && !left) text += "env " + k + "=" + v + "\n";
  }
  text += FileStamp(SelfExe());
  const fs::path sources = fs::path(PARITY_TOOLS_DIR) / "parity_capture";
  std::vector<std::string> stamps;
  for (auto it = fs::recursive_directory_iterator(sources, ec); !ec && it != fs::recursive_directory_iterator(); it.increment(ec))
    if (it->path().extension() == ".py") stamps.push_back(FileStamp(it->path()));
  std::sort(stamps.begin(), stamps.end());
  for (const auto& s : stamps) text += s;
  return Sha256Hex(text).substr(0, 16);
}
}  // namespace

std::string PoolKey(const std::vector<std::string>& extra_env) { return KeyOf(extra_env, false); }
std::string ForkServerKey(const std::vector<std::string>& extra_env) { return KeyOf(extra_env, true); }

namespace {
// A /proc file (its size reads as 0: read to its end).
std::optional<std::string> ReadProc(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  return std::string(std::istreambuf_iterator<char>(in), {});
}
}  // namespace

bool IsLiveWorker(pid_t pid) {
  if (pid <= 0) return false;
  auto stat = ReadProc("/proc/" + std::to_string(pid) + "/stat");
  if (!stat) return false;
  const auto close = stat->rfind(')');
  if (close == std::string::npos || close + 2 >= stat->size()) return false;
  const char state = (*stat)[close + 2];
  if (state == 'Z' || state == 'X') return false;
  auto cmdline = ReadProc("/proc/" + std::to_string(pid) + "/cmdline");
  // A worker started as `-m parity_capture.worker`, or forked by its key's fork server.
  return cmdline && (cmdline->find("parity_capture.worker") != std::string::npos ||
                     cmdline->find("parity_capture.forkserver") != std::string::npos);
}

std::optional<PoolClaim> PoolClaim::Claim(const std::vector<std::string>& extra_env) {
  const bool keep = KeepWorkers() > 0;
  auto dir = PoolDir(keep);
  std::error_code ec;
  if (!dir.ok() || !fs::is_directory(*dir, ec)) return std::nullopt;
  const std::string prefix = (*dir / (PoolKey(extra_env) + "-")).string();
  std::optional<PoolClaim> fresh;  // the first free entry, for a new worker
  for (int n = 0; n < kMaxEntries; ++n) {
    const std::string base = prefix + std::to_string(n);
    int fd = TryLock(base + ".lock", false);
    if (fd < 0 && keep && !fresh && !fs::exists(base + ".lock", ec)) fd = TryLock(base + ".lock", true);
    if (fd < 0) continue;  // in use, or no such entry
    if (const pid_t pid = WarmPid(base)) return PoolClaim(base, fd, pid);
    if (keep && !fresh) {
      ClearEntry(base);
      fresh.emplace(PoolClaim(base, fd, 0));
    } else {
      ::close(fd);
    }
  }
  return fresh;
}

std::string PoolClaim::fork_server_base(const std::vector<std::string>& extra_env) const {
  return (fs::path(base_).parent_path() / (ForkServerKey(extra_env) + "-fs")).string();
}

PoolClaim::~PoolClaim() {
  if (lock_fd_ >= 0) ::close(lock_fd_);
}

void PoolClaim::Started(pid_t pid, int keep_idle_s) {
  std::error_code ec;
  nlohmann::json meta{{"pid", pid},
                      {"keep_idle_s", keep_idle_s},
                      {"launches", ++launches_},
                      {"started", NowUtc()},
                      {"cwd", fs::current_path(ec).string()},
                      {"python", WorkerPython()}};
  (void)WriteFileAtomic(base_ + ".json", meta.dump());
}

Expected<std::vector<PooledWorker>> ListPool() {
  PARITY_ASSIGN_OR_RETURN(fs::path dir, PoolDir(false));
  std::vector<PooledWorker> out;
  for (const auto& [key, n] : Entries(dir)) {
    const std::string base = (dir / (key + "-" + std::to_string(n))).string();
    PooledWorker w;
    w.key = key;
    w.index = n;
    const nlohmann::json meta = ReadMeta(base);
    w.pid = MetaPid(meta);
    w.live = IsLiveWorker(w.pid);
    w.keep_idle_s = meta.value("keep_idle_s", 0);
    w.launches = meta.value("launches", 0);
    w.started = meta.value("started", "");
    w.cwd = meta.value("cwd", "");
    w.python = meta.value("python", "");
    const int fd = TryLock(base + ".lock", false);
    w.in_use = fd < 0;
    if (fd >= 0) ::close(fd);
    out.push_back(std::move(w));
  }
  std::sort(out.begin(), out.end(), [](const PooledWorker& a, const PooledWorker& b) { return std::tie(a.key, a.index) < std::tie(b.key, b.index); });
  return out;
}

Expected<int> StopPool() {
  PARITY_ASSIGN_OR_RETURN(fs::path dir, PoolDir(false));
  int stopped = 0;
  for (const auto& [key, n] : Entries(dir)) {
    const std::string base = (dir / (key + "-" + std::to_string(n))).string();
    const int fd = TryLock(base + ".lock", false);
    if (fd < 0) continue;  // in use: its user ends it or hands it back
    const pid_t pid = MetaPid(ReadMeta(base));
    if (IsLiveWorker(pid)) {
      ::kill(-pid, SIGKILL);  // its session's group: the worker and what it started
      ::kill(pid, SIGKILL);
      ++stopped;
    }
    ClearEntry(base);
    std::error_code ec;
    fs::remove(base + ".log", ec);
    fs::remove(base + ".lock", ec);
    ::close(fd);
  }
  (void)StopForkServers(dir);  // what new workers would be forked from
  return stopped;
}

}  // namespace parity::runtime
