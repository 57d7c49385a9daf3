#include "verifier/results.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace parity::verifier {

namespace {
constexpr std::pair<Code, const char*> kCodes[] = {
    {Code::kPass, "PASS"},
    {Code::kFail, "FAIL"},
    {Code::kEagerFailed, "EAGER_FAILED"},
    {Code::kExceptionRaised, "EXCEPTION_RAISED"},
    {Code::kNondeterministicEagerRun, "NONDETERMINISTIC_EAGER_RUN"},
    {Code::kVerifierSkipped, "VERIFIER_SKIPPED"},
    {Code::kVerifierDidntRun, "VERIFIER_DIDNT_RUN"},
};
}  // namespace

const char* ToString(Code c) {
  for (const auto& [code, name] : kCodes)
    if (code == c) return name;
  return "?";
}

Expected<Code> ParseCode(const std::string& s) {
  for (const auto& [code, name] : kCodes)
    if (s == name) return code;
  return Error::BadInput("unknown verification code \"" + s + "\"");
}

bool IsFailure(Code c) { return c != Code::kPass && c != Code::kVerifierSkipped; }

nlohmann::json ExperimentSpec::ToJson() const {
  nlohmann::json j = {{"model", model},         {"suite", suite},   {"repro", repro},
                      {"backend", backend},     {"backend_options", backend_options},
                      {"test", test},           {"dtype", dtype},   {"device", device},
                      {"batch_size", batch_size}, {"repeat", repeat}, {"iterations_per_run", iterations_per_run},
                      {"cosine", cosine},       {"ignore_non_fp", ignore_non_fp},
                      {"cache_dir", cache_dir}, {"work_dir", work_dir}};
  j["tol"] = tol ? nlohmann::json(*tol) : nlohmann::json(nullptr);
  return j;
}

Expected<ExperimentSpec> ExperimentSpec::FromJson(const nlohmann::json& j) {
  try {
    ExperimentSpec s;
    s.model = j.at("model");
    s.suite = j.at("suite");
    s.repro = j.at("repro");
    s.backend = j.at("backend");
    s.backend_options = j.at("backend_options");
    s.test = j.at("test");
    s.dtype = j.at("dtype");
    s.device = j.at("device");
    s.batch_size = j.at("batch_size");
    s.repeat = j.at("repeat");
    s.iterations_per_run = j.at("iterations_per_run");
    s.cosine = j.at("cosine");
    s.ignore_non_fp = j.value("ignore_non_fp", false);
    s.cache_dir = j.at("cache_dir");
    s.work_dir = j.at("work_dir");
    if (!j.at("tol").is_null()) s.tol = j.at("tol").get<double>();
    return s;
  } catch (const std::exception& e) {
    return Error::BadInput(std::string("experiment spec: ") + e.what());
  }
}

std::string ExperimentSpec::Fingerprint() const {
  nlohmann::json j = {{"model", model}, {"suite", suite}, {"backend", backend}, {"backend_options", backend_options},
                      {"test", test},   {"dtype", dtype}, {"device", device},   {"batch_size", batch_size},
                      {"repeat", repeat}, {"iterations_per_run", iterations_per_run},
                      {"tol", tol ? nlohmann::json(*tol) : nlohmann::json(nullptr)}, {"cosine", cosine}};
  std::ostringstream os;
  os << std::hex << std::hash<std::string>{}(j.dump());
  return os.str();
}

Status AppendJsonLine(const std::filesystem::path& file, const nlohmann::json& line) {
  std::error_code ec;
  if (file.has_parent_path()) std::filesystem::create_directories(file.parent_path(), ec);
  int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return Error::Runtime(file.string() + ": cannot open for append: " + std::strerror(errno));
  const std::string text = line.dump() + "\n";
  ssize_t n = ::write(fd, text.data(), text.size());
  ::fsync(fd);
  ::close(fd);
  if (n != static_cast<ssize_t>(text.size())) return Error::Runtime(file.string() + ": short write");
  return Status::Ok();
}

std::set<std::string> DoneFingerprints(const std::filesystem::path& file) {
  std::set<std::string> done;
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_object() && j.contains("fingerprint") && j["fingerprint"].is_string()) done.insert(j["fingerprint"]);
  }
  return done;
}

double DefaultTolerance(const std::string& suite, const std::string& test, const std::string& dtype) {
  const bool train = test == "train";
  const bool reduced = dtype == "float16" || dtype == "bfloat16" || dtype == "amp";
  if (suite == "huggingface") return train ? 1e-2 : 1e-3;
  if (suite == "timm" || suite == "torchvision-style") return train ? 1e-2 : 1e-3;
  // torchbench and everything else
  if (reduced) return train ? 1e-2 : 1e-3;
  return train ? 1e-3 : 1e-4;
}

}  // namespace parity::verifier
