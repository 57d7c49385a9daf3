#include "verifier/results.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <fstream>

#include "util/json.h"
#include "verifier/experiment.h"

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

nlohmann::json ResultRecord(const ExperimentSpec& spec, const ExperimentResult& r, const RecordContext& c) {
  nlohmann::json line = {{"model", {{"suite_name", spec.suite}, {"model_name", spec.model}}},
                         {"experiment",
                          {{"accelerator", spec.device.rfind("cuda", 0) == 0 ? "cuda" : "cpu"},
                           {"accelerator_model", c.accelerator_model},
                           {"backend", spec.backend},
                           {"backend_options", spec.backend_options},
                           {"test", spec.test},
                           {"batch_size", c.batch_size},
                           {"dtype", spec.dtype}}},
                         {"repeat", spec.repeat},
                         {"iterations_per_run", spec.iterations_per_run},
                         {"metrics",
                          {{"total_time", r.total_time},
                           {"per_iter_time", r.per_iter_time},
                           {"compile_time_s", r.compile_time_s},
                           {"wall_time_s", c.wall_time_s}}},
                         {"timestamp", static_cast<double>(std::time(nullptr))},
                         {"verification_code", ToString(r.code)},
                         {"tolerance", r.tol},
                         {"cosine", r.cosine},
                         {"outputs", r.outputs},
                         {"fingerprint", spec.Fingerprint()}};
  if (!r.error.empty()) line["error"] = r.error;
  if (!r.exception_type.empty()) line["exception_type"] = r.exception_type;
  if (!r.notes.empty()) line["notes"] = r.notes;
  if (r.code == Code::kPass || r.code == Code::kFail) line["fp64_reference"] = r.has_fp64_reference();
  if (!r.reference_error.empty()) line["reference_error"] = r.reference_error;
  if (!r.phase.empty() && r.code != Code::kPass) line["phase"] = r.phase;
  if (!c.repro_input.empty()) line["repro_input"] = c.repro_input;
  if (!c.repro_dir.empty()) line["repro_dir"] = c.repro_dir;
  if (r.timed_out) line["timed_out"] = true;
  if (c.graphs > 0) line["graph_breaks"] = c.graphs - 1;
  if (!c.attempts.empty()) line["attempts"] = c.attempts;
  return line;
}

nlohmann::json AttemptJson(const ExperimentResult& r) {
  nlohmann::json a = {{"verification_code", ToString(r.code)}};
  if (r.code == Code::kPass) return a;
  if (!r.phase.empty()) a["phase"] = r.phase;
  if (r.timed_out) a["timed_out"] = true;
  if (!r.exception_type.empty()) a["exception_type"] = r.exception_type;
  if (!r.error.empty()) a["error"] = r.error.substr(0, 300);
  return a;
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

bool LacksFp64Reference(const nlohmann::json& record) {
  return record.is_object() && record.contains("fp64_reference") && record["fp64_reference"] == false;
}

std::string WeakerRuleNote(const nlohmann::json& record) {
  if (!LacksFp64Reference(record)) return "";
  return "no fp64 reference, decided by cosine similarity (" + record.value("reference_error", std::string()).substr(0, 160) + ")";
}

bool IsProfileRecord(const nlohmann::json& j) { return j.is_object() && j.contains("kind") && j["kind"] == kProfileRecordKind; }

std::string RecordProblem(const nlohmann::json& j) {
  if (!j.is_object()) return "not a JSON object (a results.jsonl record)";
  for (const char* key : {"verification_code", "fingerprint"})
    if (!j.contains(key) || !j[key].is_string()) return std::string("field \"") + key + "\" missing or not a string";
  for (const char* key : {"model", "experiment"})
    if (!j.contains(key) || !j[key].is_object()) return std::string("field \"") + key + "\" missing or not an object";
  return "";
}

std::vector<nlohmann::json> ReadResults(const std::filesystem::path& file) {
  std::vector<nlohmann::json> records;
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (RecordProblem(j).empty()) records.push_back(std::move(j));
  }
  return records;
}

std::vector<nlohmann::json> ReadProfileRecords(const std::filesystem::path& file) {
  std::vector<nlohmann::json> records;
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);) {
    auto j = ParseJson(line, file.string());  // nesting bounded
    if (j.ok() && IsProfileRecord(*j) && j->contains("profile") && (*j)["profile"].is_object()) records.push_back(std::move(*j));
  }
  return records;
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

}  // namespace parity::verifier
