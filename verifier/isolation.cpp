#include "verifier/isolation.h"

#include <csignal>
#include <thread>

#include "util/files.h"
#include "util/subprocess.h"

namespace parity::verifier {
namespace fs = std::filesystem;
using nlohmann::json;

bool UsesPythonWorker(const std::string& backend) { return backend != "eager" && backend != "fault"; }

IsolatedRunner::IsolatedRunner(fs::path scratch, int timeout_s, int jobs)
    : scratch_(std::move(scratch)), timeout_s_(timeout_s), slots_(static_cast<size_t>(std::max(1, jobs))) {
  std::error_code ec;
  fs::create_directories(scratch_, ec);
}

IsolatedRunner::~IsolatedRunner() {
  for (auto& s : slots_) {
    s.client.reset();
    if (s.worker) s.worker->Stop();
  }
}

Status IsolatedRunner::EnsureWorker(size_t i) {
  Slot& s = slots_[i];
  if (!s.worker)
    s.worker = std::make_unique<WorkerProcess>((scratch_ / ("worker" + std::to_string(i) + ".sock")).string(),
                                               (scratch_ / ("worker" + std::to_string(i) + ".log")).string());
  if (s.worker->Check()) s.client.reset();
  return s.worker->Ensure();
}

void IsolatedRunner::RestartWorker(size_t i) {
  slots_[i].client.reset();
  if (slots_[i].worker) slots_[i].worker->Stop();
}

Expected<WorkerClient*> IsolatedRunner::Worker() {
  PARITY_RETURN_IF_ERROR(EnsureWorker(0));
  if (!slots_[0].client) {
    PARITY_ASSIGN_OR_RETURN(auto c, WorkerClient::Connect(slots_[0].worker->socket_path()));
    slots_[0].client.emplace(std::move(c));
  }
  return &*slots_[0].client;
}

Expected<json> IsolatedRunner::Ask(const json& req) {
  PARITY_ASSIGN_OR_RETURN(WorkerClient * w, Worker());
  auto resp = w->Call(req);
  // A lost connection means the worker died: start a fresh one next time.
  if (!resp.ok() && resp.error().message.rfind("python worker:", 0) == 0) RestartWorker(0);
  return resp;
}

ExperimentResult IsolatedRunner::Run(ExperimentSpec spec, const fs::path& dir) { return RunMany({{std::move(spec), dir}})[0]; }

namespace {
std::string Tail(const fs::path& file, size_t max_chars) {
  auto t = ReadFile(file);
  if (!t.ok()) return "";
  return t->size() > max_chars ? t->substr(t->size() - max_chars) : *t;
}
}  // namespace

std::vector<ExperimentResult> IsolatedRunner::RunMany(std::vector<std::pair<ExperimentSpec, fs::path>> batch) {
  std::vector<ExperimentResult> results(batch.size());
  size_t next = 0;
  while (next < batch.size()) {
    struct Running {
      size_t index, slot;
      std::optional<Child> child;
      std::optional<ExitInfo> info;
    };
    std::vector<Running> running;
    for (size_t slot = 0; slot < slots_.size() && next < batch.size(); ++slot, ++next) {
      auto& [spec, dir] = batch[next];
      ExperimentResult& r = results[next];
      std::error_code ec;
      fs::create_directories(dir, ec);
      spec.work_dir = fs::absolute(dir).string();
      fs::remove(dir / "result.json", ec);
      if (auto st = WriteFileAtomic(dir / "spec.json", spec.ToJson().dump(2)); !st.ok()) {
        r.error = st.error().message;
        continue;
      }
      SpawnOptions so;
      so.stdout_path = (dir / "log.txt").string();
      so.stderr_path = so.stdout_path;
      if (UsesPythonWorker(spec.backend)) {
        if (auto st = EnsureWorker(slot); !st.ok()) {
          r.error = st.error().message;
          continue;
        }
        if (slot == 0) slots_[0].client.reset();  // the worker serves one connection at a time
        so.env.push_back("PARITY_WORKER_SOCKET=" + slots_[slot].worker->socket_path());
      }
      auto child = Child::Spawn({SelfExe(), "_experiment", "--spec", (dir / "spec.json").string(), "--result",
                                 (dir / "result.json").string(), "--status", (dir / "status.txt").string()},
                                so);
      if (!child.ok()) {
        r.error = child.error().message;
        continue;
      }
      ++experiments_run_;
      running.push_back({next, slot, std::move(*child), std::nullopt});
    }
    // Wait for the batch, each child against its own deadline.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s_);
    bool pending = true;
    while (pending) {
      pending = false;
      for (auto& run : running) {
        if (run.info) continue;
        run.info = run.child->Poll();
        if (!run.info && std::chrono::steady_clock::now() >= deadline) {
          run.child->Kill();
          ExitInfo t;
          t.timed_out = true;
          t.signal = SIGKILL;
          run.info = t;
        }
        if (!run.info) pending = true;
      }
      if (pending) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    for (auto& run : running) {
      const auto& [spec, dir] = batch[run.index];
      ExperimentResult& r = results[run.index];
      const ExitInfo& info = *run.info;
      if (info.exited && info.code == 0) {
        auto text = ReadFile(dir / "result.json");
        auto j = text.ok() ? json::parse(*text, nullptr, false) : json();
        if (j.is_object()) {
          r = ExperimentResult::FromJson(j);
          continue;
        }
      }
      std::string phase = Tail(dir / "status.txt", 200);
      while (!phase.empty() && (phase.back() == '\n' || phase.back() == ' ')) phase.pop_back();
      r.code = Code::kVerifierDidntRun;
      r.phase = phase;
      r.signal = info.timed_out ? 0 : info.signal;
      r.timed_out = info.timed_out;
      r.error = "experiment process " + (info.timed_out ? "timed out after " + std::to_string(timeout_s_) + " s" : info.Describe()) +
                (phase.empty() ? "" : " during " + phase);
      const std::string log = Tail(dir / "log.txt", 600);
      if (!log.empty()) r.error += "; log tail: " + log;
      // A hang or crash inside a Python backend leaves its worker busy or dead: start afresh.
      if (UsesPythonWorker(spec.backend)) {
        auto ended = slots_[run.slot].worker ? slots_[run.slot].worker->Check() : std::nullopt;
        if (ended) r.error += "; python worker " + ended->Describe();
        RestartWorker(run.slot);
      }
    }
  }
  return results;
}

}  // namespace parity::verifier
