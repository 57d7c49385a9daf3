#include "runtime/worker.h"
#include "runtime/worker_requests.h"

#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <signal.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <filesystem>
#include <thread>

#include "runtime/python_env.h"
#include "util/digest.h"
#include "util/socket.h"

extern char** environ;

namespace parity::runtime {
namespace fs = std::filesystem;

std::string WorkerPython() {
  if (const char* p = std::getenv("PARITY_PYTHON"); p && *p) return p;
  return PARITY_PYTHON_DEFAULT;
}

std::map<std::string, std::string> WorkerEnvironment(const std::vector<std::string>& extra) {
  std::map<std::string, std::string> env;
  auto put = [&env](const std::string& kv) {
    const auto eq = kv.find('=');
    if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  };
  for (char** e = environ; *e; ++e) put(*e);
  for (const auto& kv : extra) put(kv);
  for (const auto& kv : PythonEnv()) put(kv);  // as WorkerProcess's launches merge them
  return env;
}

// A Unix socket path must fit sockaddr_un::sun_path (108 bytes with its NUL): a socket asked for
// deep inside a long work dir (a minify of a repro dir with a long name) lives in the temp dir
// instead, under a name unique to this process and the path asked for.
std::string UsableSocketPath(const std::string& wanted) {
  if (wanted.size() < sizeof(sockaddr_un::sun_path)) return wanted;
  return (fs::temp_directory_path() /
          ("parity-" + std::to_string(::getpid()) + "-" + Sha256Hex(wanted).substr(0, 12) + ".sock"))
      .string();
}

void SetImportModules(const std::vector<std::string>& modules) {
  std::string joined;
  for (const auto& m : modules) joined += (joined.empty() ? "" : ",") + m;
  if (joined.empty())
    ::unsetenv(kImportEnv);
  else
    ::setenv(kImportEnv, joined.c_str(), 1);
}

std::vector<std::string> ImportModules() {
  std::vector<std::string> out;
  const char* set = std::getenv(kImportEnv);
  std::string cur;
  for (const char* c = set ? set : ""; ; ++c) {
    if (*c == ',' || *c == '\0') {
      if (!cur.empty()) out.push_back(cur);
      cur.clear();
      if (*c == '\0') break;
    } else {
      cur.push_back(*c);
    }
  }
  return out;
}

Status CheckImportModules() {
  const char* set = std::getenv(kImportEnv);
  if (!set || !*set) return Status::Ok();
  auto pong = AskWorker(requests::Ping());
  if (pong.ok()) return Status::Ok();
  if (pong.error().exception_type == "ImportError") return Error::BadInput(pong.error().message);
  return pong.error();
}

WorkerProcess::WorkerProcess(std::string socket_path, std::string log_path, std::vector<std::string> env)
    : socket_path_(UsableSocketPath(socket_path)), log_path_(std::move(log_path)), env_(std::move(env)) {}

WorkerProcess::WorkerProcess(PoolClaim claim, std::vector<std::string> env)
    : socket_path_(claim.socket_path()), log_path_(claim.log_path()), env_(std::move(env)), pid_(claim.warm_pid()),
      claim_(std::move(claim)) {}

namespace {
// Whether the worker at `socket` answers a ping within `timeout`: an adopted worker still busy
// with a request of a run that was killed (a hung compile) would not.
bool Answers(const std::string& socket_path, std::chrono::milliseconds timeout) {
  auto client = WorkerClient::Connect(socket_path, timeout);
  return client.ok() && client->Call(requests::Ping()).ok();
}
}  // namespace

std::unique_ptr<WorkerProcess> WorkerProcess::ForSlot(std::string socket_path, std::string log_path, std::vector<std::string> env) {
  if (auto claim = PoolClaim::Claim(env)) {
    auto w = std::make_unique<WorkerProcess>(std::move(*claim), std::move(env));
    // One still starting (its socket not there yet: a run that ended before its worker listened)
    // is kept: Ensure waits for it as for one this process started.
    if (w->adopted() && fs::exists(w->socket_path()) && !Answers(w->socket_path(), std::chrono::seconds(5)))
      w->Stop();  // busy or stuck: never trusted; a fresh one starts in its entry when needed
    return w;
  }
  return std::make_unique<WorkerProcess>(std::move(socket_path), std::move(log_path), std::move(env));
}

WorkerProcess::~WorkerProcess() {
  (void)TakeFork(std::chrono::milliseconds(0));
  forking_.reset();  // still unanswered: dropped, never forked
  if (KeptForPool()) {
    if (child_) child_->Release();  // it lives on, for the pool's next user
    return;                         // claim_ releases the entry
  }
  Stop();
}

bool WorkerProcess::KeptForPool() { return claim_ && (child_ || pid_ > 0) && !Check(); }

void WorkerProcess::Abandon() {
  if (KeptForPool()) return;
  if (child_) child_->Abandon();
  child_.reset();
  Stop();  // a worker a fork server made: killed (not this process's child: nothing to wait for)
}

std::optional<ExitInfo> WorkerProcess::Check() {
  if (forking_) {
    if (!Settle(std::chrono::milliseconds(0)).ok()) return ExitInfo{};
    if (forking_) return std::nullopt;  // the server has not answered: starting
  }
  if (child_) {
    auto done = child_->Poll();
    if (done) child_.reset();
    return done;
  }
  if (pid_ > 0 && !IsLiveWorker(pid_)) {
    pid_ = 0;
    forked_ = false;
    return ExitInfo{};  // not this process's child: how it ended is not known here
  }
  return std::nullopt;
}

bool WorkerProcess::Starting() {
  if (Check()) return false;
  if (forking_) return true;
  if (!child_ && pid_ <= 0) return false;
  return !fs::exists(socket_path_);
}

std::vector<std::string> WorkerProcess::WorkerArgs() const {
  std::vector<std::string> args{"--socket", socket_path_};
  if (!warm_.empty()) args.insert(args.end(), {"--warm", warm_});
  if (claim_)  // a pool entry's worker: it outlives this process, for KeepWorkers() idle seconds
    args.insert(args.end(), {"--keep-idle", std::to_string(KeepWorkers()), "--pool-lock", claim_->lock_path()});
  return args;
}

Status WorkerProcess::Launch() {
  if (forking_) return Status::Ok();
  if ((child_ || pid_ > 0) && !Check()) return Status::Ok();
  std::error_code ec;
  fs::remove(socket_path_, ec);
  if (LaunchForked()) return Status::Ok();
  return LaunchSpawned();
}

bool WorkerProcess::LaunchForked() {
  if (!claim_ || !ForkServersEnabled()) return false;
  auto pending = RequestFork(claim_->fork_server_base(env_), WorkerArgs(), env_, log_path_);
  if (!pending.ok()) return false;  // started as before
  forking_.emplace(std::move(*pending));
  return true;
}

bool WorkerProcess::TakeFork(std::chrono::milliseconds wait) {
  if (!forking_) return false;
  auto answer = forking_->Poll(wait);
  if (answer.ok() && !answer->has_value()) return false;  // not yet
  forking_.reset();
  if (!answer.ok()) return false;
  pid_ = **answer;
  forked_ = true;
  claim_->Started(pid_, KeepWorkers());
  return true;
}

Status WorkerProcess::Settle(std::chrono::milliseconds wait) {
  if (!forking_ || TakeFork(wait) || forking_) return Status::Ok();
  return LaunchSpawned();  // the server failed: a worker of its own, as without one
}

Status WorkerProcess::LaunchSpawned() {
  SpawnOptions so;
  so.env = env_;
  so.stdout_path = log_path_;
  so.stderr_path = log_path_;
  for (auto& e : PythonEnv()) so.env.push_back(e);
  std::vector<std::string> argv = PackageModuleCommand(WorkerPython(), "worker");
  for (auto& a : WorkerArgs()) argv.push_back(a);
  std::error_code ec;
  if (claim_) {
    so.outlive_parent = true;
    fs::remove(log_path_, ec);
  }
  auto child = Child::Spawn(argv, so);
  if (!child.ok()) return child.error();
  if (claim_) claim_->Started(child->pid(), KeepWorkers());
  child_.emplace(std::move(*child));
  return Status::Ok();
}

Status WorkerProcess::Ensure(std::chrono::seconds startup_timeout) {
  if ((child_ || pid_ > 0) && !Check() && fs::exists(socket_path_)) return Status::Ok();
  PARITY_RETURN_IF_ERROR(Launch());
  const auto deadline = std::chrono::steady_clock::now() + startup_timeout;
  while (forking_ || !fs::exists(socket_path_)) {
    PARITY_RETURN_IF_ERROR(Settle(std::chrono::milliseconds(20)));
    if (forking_) {
      if (std::chrono::steady_clock::now() > deadline) {
        Stop();
        return Error::Runtime("python worker's fork server did not fork it within " + std::to_string(startup_timeout.count()) + " s");
      }
      continue;
    }
    if (auto ended = Check())
      return Error::Runtime("python worker (" + WorkerPython() + ") exited at start-up: " + ended->Describe() + "; see " +
                            log_path_);
    if (std::chrono::steady_clock::now() > deadline) {
      Stop();
      return Error::Runtime("python worker did not start within " + std::to_string(startup_timeout.count()) + " s");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return Status::Ok();
}

void WorkerProcess::Stop() {
  (void)TakeFork(std::chrono::milliseconds(0));  // answered: its pid is ended below
  forking_.reset();  // unanswered: the server's fork finds its client gone and ends
  if (child_) child_->Kill();
  child_.reset();
  if (pid_ > 0 && IsLiveWorker(pid_)) {
    ::kill(-pid_, SIGKILL);  // its session's group: the worker and what it started
    ::kill(pid_, SIGKILL);
  }
  pid_ = 0;
  forked_ = false;
  std::error_code ec;
  fs::remove(socket_path_, ec);
}

Expected<WorkerClient> WorkerClient::Connect(const std::string& socket_path, std::optional<std::chrono::milliseconds> answer_timeout) {
  const int fd = ConnectUnix(socket_path);
  if (fd < 0 && errno == ENAMETOOLONG) return Error::Runtime("python worker: socket path too long: " + socket_path);
  if (fd < 0) return Error::Runtime("python worker: cannot connect to " + socket_path + ": " + std::strerror(errno));
  if (answer_timeout) {
    const auto ms = answer_timeout->count();
    timeval tv{static_cast<time_t>(ms / 1000), static_cast<suseconds_t>((ms % 1000) * 1000)};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  }
  return WorkerClient(fd);
}

WorkerClient::~WorkerClient() {
  if (fd_ >= 0) ::close(fd_);
}

namespace {
Error Lost(std::string what) {
  Error e = Error::Runtime("python worker: " + std::move(what));
  e.exception_type = kWorkerLost;
  return e;
}
}  // namespace

namespace {
// A plan repeat as a frame instead of a JSON line (docs/worker.md, "Frames"): kFrameMagic, three
// zero bytes, the plan id as a little-endian uint32. The worker answers a repeat whose results
// went where they went last time with the same 8 bytes (status 0), anything else with a JSON line.
constexpr char kFrameMagic = '\x01';
constexpr size_t kFrameBytes = 8;

// The plan id when `request` is exactly {"cmd": "host_call" | "host_batch", "plan": id}.
std::optional<uint32_t> PlanRepeat(const nlohmann::json& request) {
  if (!request.is_object() || request.size() != 2) return std::nullopt;
  auto cmd = request.find("cmd"), plan = request.find("plan");
  if (cmd == request.end() || plan == request.end() || !cmd->is_string() || !plan->is_number_integer()) return std::nullopt;
  const auto& c = cmd->get_ref<const std::string&>();
  const int64_t id = plan->get<int64_t>();
  if ((c != "host_call" && c != "host_batch") || id < 0 || id > UINT32_MAX) return std::nullopt;
  return static_cast<uint32_t>(id);
}
}  // namespace

Status WorkerClient::Send(const std::string& bytes) {
  if (SendAll(fd_, bytes)) return Status::Ok();
  return Lost("connection lost while sending");
}

Status WorkerClient::Fill(size_t at_least) {
  while (buffer_.size() < at_least) {
    char buf[65536];
    ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Lost("connection lost (the worker died)");
    buffer_.append(buf, static_cast<size_t>(n));
  }
  return Status::Ok();
}

Expected<nlohmann::json> WorkerClient::Exchange(nlohmann::json request) {
  if (auto plan = PlanRepeat(request)) {
    std::string frame(kFrameBytes, '\0');
    frame[0] = kFrameMagic;
    for (int b = 0; b < 4; ++b) frame[4 + b] = static_cast<char>((*plan >> (8 * b)) & 0xff);
    PARITY_RETURN_IF_ERROR(Send(frame));
  } else {
    request["id"] = next_id_++;
    PARITY_RETURN_IF_ERROR(Send(request.dump() + "\n"));
  }
  PARITY_RETURN_IF_ERROR(Fill(1));
  if (buffer_[0] == kFrameMagic) {
    PARITY_RETURN_IF_ERROR(Fill(kFrameBytes));
    const bool same = buffer_.compare(1, kFrameBytes - 1, std::string(kFrameBytes - 1, '\0')) == 0;
    buffer_.erase(0, kFrameBytes);
    if (!same) return Lost("malformed answer frame");
    return nlohmann::json{{"ok", true}, {"same", true}};
  }
  size_t nl;
  while ((nl = buffer_.find('\n')) == std::string::npos) PARITY_RETURN_IF_ERROR(Fill(buffer_.size() + 1));
  std::string resp = buffer_.substr(0, nl);
  buffer_.erase(0, nl + 1);
  auto j = nlohmann::json::parse(resp, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return Lost("malformed answer: " + resp.substr(0, 200));
  return j;
}

Expected<nlohmann::json> WorkerClient::Call(nlohmann::json request) {
  PARITY_ASSIGN_OR_RETURN(nlohmann::json resp, Exchange(std::move(request)));
  if (resp.value("ok", false)) return resp;
  auto field = [&](const char* key) { return resp.contains(key) && resp[key].is_string() ? resp[key].get<std::string>() : ""; };
  // The worker's torch is another build than parity's (kTorchBuiltEnv): bad input, exit 2.
  Error e = field("error_type") == kTorchMismatch ? Error::BadInput(field("error")) : Error::Runtime(field("error"));
  e.exception_type = field("error_type").empty() ? "Error" : field("error_type");
  e.traceback = field("traceback");
  return e;
}

namespace {
std::optional<WorkerClient>& ProcessClient() {
  static std::optional<WorkerClient> client;
  return client;
}

// This process's own worker (none when $PARITY_WORKER_SOCKET names one), made on first use: a
// pool entry's when the pool has one warm for this environment or this process keeps workers
// (runtime/worker_pool.h; `parity repro run`, `backends`, a verify's captures adopt it as a
// slot's job server does), else a private one at a socket named after this process.
WorkerProcess* OwnWorker() {
  static std::unique_ptr<WorkerProcess> own;
  if (const char* s = std::getenv("PARITY_WORKER_SOCKET"); s && *s) return nullptr;
  if (!own) {
    const std::string path = (fs::temp_directory_path() / ("parity-worker-" + std::to_string(::getpid()) + ".sock")).string();
    own = WorkerProcess::ForSlot(path, path + ".log", {});
  }
  return own.get();
}

// The refusal this thread is under (WorkerRefusal), if any.
thread_local WorkerRefusal* refusal = nullptr;

// WorkerConnectedAt's moment, as steady_clock ticks (0: never connected); atomic, for it is read
// from the thread that waits on one talking to the worker.
std::atomic<int64_t> connected_at{0};

Expected<WorkerClient*> ProcessWorker() {
  if (refusal) return refusal->Refuse();
  std::optional<WorkerClient>& client = ProcessClient();
  if (client) return &*client;
  std::string path;
  if (WorkerProcess* own = OwnWorker()) {
    path = own->socket_path();
    PARITY_RETURN_IF_ERROR(own->Ensure());
  } else {
    path = std::getenv("PARITY_WORKER_SOCKET");
    // The slot's worker may still be starting (runtime/jobs.h): its socket appears once it listens.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(kWorkerStartSeconds);
    while (!fs::exists(path) && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  auto c = WorkerClient::Connect(path);
  if (!c.ok()) return c.error();
  client.emplace(std::move(*c));
  connected_at = std::chrono::steady_clock::now().time_since_epoch().count();
  return &*client;
}
}  // namespace

Expected<nlohmann::json> AskWorker(nlohmann::json request) {
  PARITY_ASSIGN_OR_RETURN(WorkerClient * w, ProcessWorker());
  auto resp = w->Call(std::move(request));
  if (!resp.ok() && IsWorkerLost(resp.error())) ProcessClient().reset();  // the next request connects afresh
  return resp;
}

bool NamedWorkerListening() {
  const char* s = std::getenv("PARITY_WORKER_SOCKET");
  std::error_code ec;
  return s && *s && fs::exists(s, ec);
}

Status LaunchWorker() {
  WorkerProcess* own = OwnWorker();
  return own ? own->Launch() : Status::Ok();
}

Status ConnectWorker() {
  PARITY_ASSIGN_OR_RETURN(WorkerClient * w, ProcessWorker());
  (void)w;
  return Status::Ok();
}

void ReleaseWorker() { ProcessClient().reset(); }

WorkerRefusal::WorkerRefusal() : outer_(refusal) { refusal = this; }

WorkerRefusal::~WorkerRefusal() { refusal = outer_; }

Error WorkerRefusal::Refuse() {
  refused_ = true;
  return Error::Unsupported("the Python worker is not asked from work run ahead of its turn");
}

bool WorkerConnected() { return ProcessClient().has_value(); }

std::optional<std::chrono::steady_clock::time_point> WorkerConnectedAt() {
  const int64_t ticks = connected_at.load();
  if (ticks == 0) return std::nullopt;
  return std::chrono::steady_clock::time_point(std::chrono::steady_clock::duration(ticks));
}

}  // namespace parity::runtime
