#include "verifier/child.h"

#include <fstream>

#include "util/files.h"

namespace parity::verifier {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

const char* const kSpec = "spec.json";
const char* const kResult = "result.json";
const char* const kStatus = "status.txt";
const char* const kLog = "log.txt";

std::string Tail(const fs::path& file, size_t max_chars) {
  auto t = ReadFile(file);
  if (!t.ok()) return "";
  return t->size() > max_chars ? t->substr(t->size() - max_chars) : *t;
}

}  // namespace

Expected<Child> SpawnExperiment(ExperimentSpec spec, const fs::path& dir, const std::string& worker_socket,
                                const std::vector<std::string>& env) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  spec.work_dir = fs::absolute(dir).string();
  fs::remove(dir / kResult, ec);
  fs::remove(dir / kStatus, ec);
  PARITY_RETURN_IF_ERROR(WriteFileAtomic(dir / kSpec, spec.ToJson().dump(2)));
  SpawnOptions so;
  so.env = env;
  so.stdout_path = (dir / kLog).string();
  so.stderr_path = so.stdout_path;
  if (!worker_socket.empty()) so.env.push_back("PARITY_WORKER_SOCKET=" + worker_socket);
  return Child::Spawn({SelfExe(), kExperimentCommand, "--dir", fs::absolute(dir).string()}, so);
}

std::string CurrentPhase(const fs::path& dir) {
  std::string phase = Tail(dir / kStatus, 200);
  while (!phase.empty() && (phase.back() == '\n' || phase.back() == ' ')) phase.pop_back();
  return phase;
}

ExperimentResult CollectExperiment(const fs::path& dir, const ExitInfo& how, int timeout_s) {
  if (how.exited && how.code == 0) {
    auto text = ReadFile(dir / kResult);
    auto j = text.ok() ? json::parse(*text, nullptr, false) : json();
    if (j.is_object()) return ExperimentResult::FromJson(j);
  }
  ExperimentResult r;
  const std::string phase = CurrentPhase(dir);
  r.code = Code::kVerifierDidntRun;
  r.phase = phase;
  r.signal = how.timed_out ? 0 : how.signal;
  r.timed_out = how.timed_out;
  r.error = "experiment process " + (how.timed_out ? "timed out after " + std::to_string(timeout_s) + " s" : how.Describe()) +
            (phase.empty() ? "" : " during " + phase);
  const std::string log = Tail(dir / kLog, 600);
  if (!log.empty()) r.error += "; log tail: " + log;
  return r;
}

int ExperimentChildMain(const fs::path& dir) {
  auto text = ReadFile(dir / kSpec);
  if (!text.ok()) return 2;
  auto spec = ExperimentSpec::FromJson(json::parse(*text, nullptr, false));
  if (!spec.ok()) {
    std::fprintf(stderr, "%s\n", spec.error().message.c_str());
    return 2;
  }
  const fs::path status = dir / kStatus;
  ExperimentResult r =
      RunExperiment(*spec, [&](const std::string& phase) { std::ofstream(status, std::ios::trunc) << phase << "\n"; });
  return WriteFileAtomic(dir / kResult, r.ToJson().dump()).ok() ? 0 : 3;
}

}  // namespace parity::verifier
