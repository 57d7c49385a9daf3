#include "results/record.h"

#include <chrono>
#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>

#include "util/files.h"
#include "util/json.h"

namespace parity::results {
using nlohmann::json;

namespace {

// Typed reads of a record's fields: absent gives the default, a wrong JSON type is kBadInput
// naming the field.
class Reader {
 public:
  explicit Reader(std::string where) : where_(std::move(where)) {}

  // `obj[key]` into `out` when present and not null; `is` checks its JSON type, `what` names it.
  template <typename T>
  Status Field(const json& obj, const char* key, T& out, bool (json::*is)() const noexcept, const char* what,
               const char* prefix = "") const {
    if (!obj.contains(key) || obj[key].is_null()) return Status::Ok();
    if (!(obj[key].*is)()) return Bad(prefix, key, std::string("is not ") + what);
    out = obj[key].get<T>();
    return Status::Ok();
  }
  Status String(const json& obj, const char* key, std::string& out, const char* prefix = "") const {
    return Field(obj, key, out, &json::is_string, "a string", prefix);
  }
  Status Number(const json& obj, const char* key, double& out, const char* prefix = "") const {
    return Field(obj, key, out, &json::is_number, "a number", prefix);
  }
  Status Int(const json& obj, const char* key, int& out, const char* prefix = "") const {
    return Field(obj, key, out, &json::is_number_integer, "an integer", prefix);
  }
  Status Bool(const json& obj, const char* key, bool& out, const char* prefix = "") const {
    return Field(obj, key, out, &json::is_boolean, "a boolean", prefix);
  }
  Status Numbers(const json& obj, const char* key, std::vector<double>& out, const char* prefix = "") const {
    if (!obj.contains(key) || obj[key].is_null()) return Status::Ok();
    if (!obj[key].is_array()) return Bad(prefix, key, "is not an array");
    for (const auto& v : obj[key]) {
      if (!v.is_number()) return Bad(prefix, key, "holds a non-number");
      out.push_back(v.get<double>());
    }
    return Status::Ok();
  }
  // An object of numbers (phase -> seconds, side -> bytes).
  template <typename T>
  Status NumberMap(const json& obj, const char* key, std::map<std::string, T>& out, const char* prefix = "") const {
    if (!obj.contains(key) || obj[key].is_null()) return Status::Ok();
    if (!obj[key].is_object()) return Bad(prefix, key, "is not an object");
    for (const auto& [k, v] : obj[key].items()) {
      if (!v.is_number()) return Bad(prefix, key, "holds a non-number at \"" + k + "\"");
      out[k] = v.template get<T>();
    }
    return Status::Ok();
  }
  Status Object(const json& obj, const char* key, const json*& out, bool required, const char* prefix = "") const {
    if (!obj.contains(key)) return required ? Bad(prefix, key, "is missing") : Status::Ok();
    if (!obj[key].is_object()) return Bad(prefix, key, "is not an object");
    out = &obj[key];
    return Status::Ok();
  }
  Status CodeOf(const json& obj, Code& out, const char* prefix = "") const {
    if (!obj.contains("verification_code") || !obj["verification_code"].is_string())
      return Bad(prefix, "verification_code", "is missing or not a string");
    auto c = ParseCode(obj["verification_code"].get<std::string>());
    if (!c.ok()) return Bad(prefix, "verification_code", "is " + obj["verification_code"].dump() + ", not a verification code");
    out = *c;
    return Status::Ok();
  }

 private:
  Error Bad(const char* prefix, const char* key, const std::string& what) const {
    return Error::BadInput(where_ + ": field \"" + prefix + key + "\" " + what);
  }
  std::string where_;
};

const char* const kKnown[] = {"shapes", "model",  "experiment", "repeat",         "iterations_per_run", "metrics",   "timestamp",
                              "verification_code", "tolerance", "cosine", "outputs", "fingerprint", "error", "exception_type",
                              "notes",  "phase",      "fp64_reference", "reference_error",    "repro_input", "repro_dir",
                              "timed_out", "graph_breaks", "attempts", "rule", "justification", "distributed"};

Expected<Attempt> AttemptFromJson(const json& a, const Reader& r) {
  Attempt at;
  if (!a.is_object()) return Error::BadInput("an entry of \"attempts\" is not an object");
  PARITY_RETURN_IF_ERROR(r.CodeOf(a, at.code, "attempts[]."));
  PARITY_RETURN_IF_ERROR(r.String(a, "phase", at.phase, "attempts[]."));
  PARITY_RETURN_IF_ERROR(r.Bool(a, "timed_out", at.timed_out, "attempts[]."));
  PARITY_RETURN_IF_ERROR(r.String(a, "exception_type", at.exception_type, "attempts[]."));
  PARITY_RETURN_IF_ERROR(r.String(a, "error", at.error, "attempts[]."));
  return at;
}

}  // namespace

json Attempt::ToJson() const {
  json a = {{"verification_code", results::ToString(code)}};
  if (code == Code::kPass) return a;
  if (!phase.empty()) a["phase"] = phase;
  if (timed_out) a["timed_out"] = true;
  if (!exception_type.empty()) a["exception_type"] = exception_type;
  if (!error.empty()) a["error"] = error.substr(0, 300);
  return a;
}

Attempt Record::FirstAttempt() const {
  Attempt a;
  a.code = code;
  a.phase = phase;
  a.timed_out = timed_out;
  a.exception_type = exception_type;
  a.error = error.substr(0, 300);
  return a;
}

std::string Record::WeakerRuleNote() const {
  if (!LacksFp64Reference()) return "";
  return "no fp64 reference, decided by cosine similarity (" + reference_error.substr(0, 160) + ")";
}

double Now() {
  using namespace std::chrono;
  return static_cast<double>(duration_cast<microseconds>(system_clock::now().time_since_epoch()).count()) / 1e6;
}

bool RulesDisagree(const json& outputs) {
  if (!outputs.is_array()) return false;
  for (const auto& o : outputs) {
    if (!o.is_object() || !o.contains("noise_budget") || !o.contains("same_pass")) continue;
    const json& nb = o["noise_budget"];
    if (!nb.is_object() || !nb.contains("check") || !nb["check"].is_object()) continue;
    const json& within = nb["check"]["within"];
    if (within.is_boolean() && o["same_pass"].is_boolean() && within.get<bool>() != o["same_pass"].get<bool>()) return true;
  }
  return false;
}

double OutputStat(const json& o, const char* key) {
  if (!o.is_object() || !o.contains("stats") || !o["stats"].is_object()) return std::nan("");
  const json& s = o["stats"];
  return s.contains(key) && s[key].is_number() ? s[key].get<double>() : std::nan("");
}

double MaxAbsError(const json& outputs) {
  // Both counts present and different (an output without them, a non-floating one, says nothing).
  auto differ = [](const json& o, const char* res, const char* ref) {
    const double a = OutputStat(o, res), b = OutputStat(o, ref);
    return !std::isnan(a) && !std::isnan(b) && a != b;
  };
  double m = 0;
  bool nan = false;
  for (const auto& o : outputs) {
    if (differ(o, "res_nan", "ref_nan")) nan = true;
    if (differ(o, "res_inf", "ref_inf")) m = std::numeric_limits<double>::infinity();
    if (double v = OutputStat(o, "max_abs_err"); !std::isnan(v)) m = std::max(m, v);
  }
  return nan ? std::nan("") : m;
}

double Record::MaxAbsError() const { return results::MaxAbsError(outputs); }

namespace {

// The optional string fields at the top level: written when set, read when present.
using StringMember = std::string Record::*;
constexpr std::pair<const char*, StringMember> kStrings[] = {
    {"error", &Record::error},        {"exception_type", &Record::exception_type}, {"notes", &Record::notes},
    {"reference_error", &Record::reference_error}, {"repro_input", &Record::repro_input}, {"repro_dir", &Record::repro_dir},
    {"rule", &Record::rule},          {"justification", &Record::justification}};
using ExperimentString = std::string Record::Experiment::*;
constexpr std::pair<const char*, ExperimentString> kExperimentStrings[] = {
    {"accelerator", &Record::Experiment::accelerator}, {"accelerator_model", &Record::Experiment::accelerator_model},
    {"backend", &Record::Experiment::backend},         {"test", &Record::Experiment::test},
    {"dtype", &Record::Experiment::dtype},             {"config", &Record::Experiment::config}};

json ExperimentJson(const Record::Experiment& e) {
  json j = {{"backend_options", e.backend_options}, {"batch_size", e.batch_size}};
  for (const auto& [key, m] : kExperimentStrings)
    if (key != std::string("config") || !(e.*m).empty()) j[key] = e.*m;
  return j;
}

Status ReadExperiment(const json& e, const Reader& r, Record::Experiment& out, const std::string& where) {
  for (const auto& [key, m] : kExperimentStrings) PARITY_RETURN_IF_ERROR(r.String(e, key, out.*m, "experiment."));
  if (e.contains("backend_options") && !e["backend_options"].is_null()) {
    if (!e["backend_options"].is_object())
      return Error::BadInput(where + ": field \"experiment.backend_options\" is not an object");
    out.backend_options = e["backend_options"];
  }
  return r.Int(e, "batch_size", out.batch_size, "experiment.");
}

Status ReadMetrics(const json& m, const Reader& r, Record::Metrics& out) {
  PARITY_RETURN_IF_ERROR(r.Numbers(m, "total_time", out.total_time, "metrics."));
  PARITY_RETURN_IF_ERROR(r.Numbers(m, "per_iter_time", out.per_iter_time, "metrics."));
  PARITY_RETURN_IF_ERROR(r.Number(m, "compile_time_s", out.compile_time_s, "metrics."));
  PARITY_RETURN_IF_ERROR(r.Number(m, "calibration_time_s", out.calibration_time_s, "metrics."));
  PARITY_RETURN_IF_ERROR(r.NumberMap(m, "phase_seconds", out.phase_seconds, "metrics."));
  PARITY_RETURN_IF_ERROR(r.NumberMap(m, "peak_memory_bytes", out.peak_memory_bytes, "metrics."));
  return r.Number(m, "wall_time_s", out.wall_time_s, "metrics.");
}

}  // namespace

json Record::ToJson() const {
  json j = extra;
  j["model"] = {{"suite_name", suite}, {"model_name", model}};
  j["experiment"] = ExperimentJson(experiment);
  j["repeat"] = repeat;
  j["iterations_per_run"] = iterations_per_run;
  j["metrics"] = {{"total_time", metrics.total_time},
                  {"per_iter_time", metrics.per_iter_time},
                  {"compile_time_s", metrics.compile_time_s},
                  {"wall_time_s", metrics.wall_time_s}};
  if (metrics.calibration_time_s > 0) j["metrics"]["calibration_time_s"] = metrics.calibration_time_s;
  if (!metrics.phase_seconds.empty()) j["metrics"]["phase_seconds"] = metrics.phase_seconds;
  if (!metrics.peak_memory_bytes.empty()) j["metrics"]["peak_memory_bytes"] = metrics.peak_memory_bytes;
  j["timestamp"] = timestamp;
  j["verification_code"] = results::ToString(code);
  j["tolerance"] = tolerance;
  j["cosine"] = cosine;
  j["outputs"] = outputs;
  j["fingerprint"] = fingerprint;
  for (const auto& [key, m] : kStrings)
    if (!(this->*m).empty()) j[key] = this->*m;
  if (!phase.empty() && code != Code::kPass) j["phase"] = phase;
  if (fp64_reference) j["fp64_reference"] = *fp64_reference;
  if (timed_out) j["timed_out"] = true;
  if (graph_breaks) j["graph_breaks"] = *graph_breaks;
  if (!attempts.empty()) {
    j["attempts"] = json::array();
    for (const auto& a : attempts) j["attempts"].push_back(a.ToJson());
  }
  if (!shapes.empty()) {
    j["shapes"] = json::array();
    for (const auto& s : shapes) j["shapes"].push_back(s.ToJson());
  }
  if (distributed) j["distributed"] = distributed->ToJson();
  return j;
}

Expected<Record> Record::FromJson(const json& j, const std::string& where) {
  if (!j.is_object()) return Error::BadInput(where + ": not a JSON object (a results.jsonl record)");
  Reader r(where);
  Record rec;
  PARITY_RETURN_IF_ERROR(r.CodeOf(j, rec.code));
  if (!j.contains("fingerprint") || !j["fingerprint"].is_string())
    return Error::BadInput(where + ": field \"fingerprint\" is missing or not a string");
  rec.fingerprint = j["fingerprint"].get<std::string>();
  const json *model = nullptr, *exp = nullptr, *metrics = nullptr;
  PARITY_RETURN_IF_ERROR(r.Object(j, "model", model, true));
  PARITY_RETURN_IF_ERROR(r.Object(j, "experiment", exp, true));
  PARITY_RETURN_IF_ERROR(r.String(*model, "suite_name", rec.suite, "model."));
  PARITY_RETURN_IF_ERROR(r.String(*model, "model_name", rec.model, "model."));
  PARITY_RETURN_IF_ERROR(ReadExperiment(*exp, r, rec.experiment, where));
  PARITY_RETURN_IF_ERROR(r.Int(j, "repeat", rec.repeat));
  PARITY_RETURN_IF_ERROR(r.Int(j, "iterations_per_run", rec.iterations_per_run));
  PARITY_RETURN_IF_ERROR(r.Object(j, "metrics", metrics, false));
  if (metrics) PARITY_RETURN_IF_ERROR(ReadMetrics(*metrics, r, rec.metrics));
  PARITY_RETURN_IF_ERROR(r.Number(j, "timestamp", rec.timestamp));
  PARITY_RETURN_IF_ERROR(r.Number(j, "tolerance", rec.tolerance));
  PARITY_RETURN_IF_ERROR(r.Bool(j, "cosine", rec.cosine));
  if (j.contains("outputs") && !j["outputs"].is_null()) {
    if (!j["outputs"].is_array()) return Error::BadInput(where + ": field \"outputs\" is not an array");
    for (const auto& o : j["outputs"])
      if (!o.is_object()) return Error::BadInput(where + ": field \"outputs\" holds a non-object");
    rec.outputs = j["outputs"];
  }
  for (const auto& [key, m] : kStrings) PARITY_RETURN_IF_ERROR(r.String(j, key, rec.*m));
  PARITY_RETURN_IF_ERROR(r.String(j, "phase", rec.phase));
  if (j.contains("fp64_reference")) {
    bool ran = true;
    PARITY_RETURN_IF_ERROR(r.Bool(j, "fp64_reference", ran));
    rec.fp64_reference = ran;
  }
  PARITY_RETURN_IF_ERROR(r.Bool(j, "timed_out", rec.timed_out));
  if (j.contains("graph_breaks")) {
    int breaks = 0;
    PARITY_RETURN_IF_ERROR(r.Int(j, "graph_breaks", breaks));
    rec.graph_breaks = breaks;
  }
  if (j.contains("attempts")) {
    if (!j["attempts"].is_array()) return Error::BadInput(where + ": field \"attempts\" is not an array");
    for (const auto& a : j["attempts"]) {
      auto at = AttemptFromJson(a, r);
      if (!at.ok()) return Error::BadInput(at.error().message.rfind(where, 0) == 0 ? at.error().message : where + ": " + at.error().message);
      rec.attempts.push_back(std::move(*at));
    }
  }
  if (j.contains("shapes")) {
    if (!j["shapes"].is_array()) return Error::BadInput(where + ": field \"shapes\" is not an array");
    for (const auto& s : j["shapes"]) {
      PARITY_ASSIGN_OR_RETURN(ShapeCheck c, ShapeCheck::FromJson(s, where));
      rec.shapes.push_back(std::move(c));
    }
  }
  if (j.contains("distributed")) {
    PARITY_ASSIGN_OR_RETURN(RankOf d, RankOf::FromJson(j["distributed"], where));
    rec.distributed = std::move(d);
  }
  for (auto it = j.begin(); it != j.end(); ++it)
    if (std::find(std::begin(kKnown), std::end(kKnown), it.key()) == std::end(kKnown)) rec.extra[it.key()] = it.value();
  return rec;
}

Expected<RankOf> RankOf::FromJson(const json& j, const std::string& where) {
  const auto bad = [&where](const std::string& what) { return Error::BadInput(where + ": field \"distributed" + what); };
  if (!j.is_object()) return bad("\" is not an object");
  RankOf d;
  if (!j.contains("rank") || !j["rank"].is_number_integer()) return bad(".rank\" is missing or not an integer");
  if (!j.contains("world_size") || !j["world_size"].is_number_integer()) return bad(".world_size\" is missing or not an integer");
  if (!j.contains("replay") || !j["replay"].is_string()) return bad(".replay\" is missing or not a string");
  d.rank = j["rank"].get<int>();
  d.world_size = j["world_size"].get<int>();
  d.replay = j["replay"].get<std::string>();
  if (d.world_size < 1 || d.rank < 0 || d.rank >= d.world_size) return bad(".rank\" is not a rank of its world_size");
  return d;
}

bool IsProfileRecord(const json& j) { return j.is_object() && j.contains("kind") && j["kind"] == kProfileRecordKind; }

std::vector<json> ReadProfileRecords(const std::filesystem::path& file) {
  std::vector<json> records;
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);) {
    auto j = ParseJson(line, file.string());  // nesting bounded
    if (j.ok() && IsProfileRecord(*j) && j->contains("profile") && (*j)["profile"].is_object()) records.push_back(std::move(*j));
  }
  return records;
}

Expected<std::vector<Record>> ReadRecords(const std::filesystem::path& file, ReadMode mode) {
  std::error_code ec;
  if (mode == ReadMode::kLenient && !std::filesystem::exists(file, ec)) return std::vector<Record>{};
  PARITY_ASSIGN_OR_RETURN(std::string text, ReadFile(file));
  std::vector<Record> records;
  std::istringstream in(text);
  int n = 0;
  for (std::string line; std::getline(in, line);) {
    ++n;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = file.string() + ":" + std::to_string(n);
    auto j = ParseJson(line, where);
    if (j.ok() && IsProfileRecord(*j)) continue;  // `parity profile`'s, not a verification
    auto rec = j.ok() ? Record::FromJson(*j, where) : Expected<Record>(j.error());
    if (!rec.ok()) {
      if (mode == ReadMode::kStrict) return rec.error();
      continue;
    }
    records.push_back(std::move(*rec));
  }
  return records;
}

Status AppendRecord(const std::filesystem::path& file, const Record& record) { return AppendLine(file, record.ToJson().dump()); }

std::set<std::string> DoneFingerprints(const std::filesystem::path& file) {
  std::set<std::string> done;
  auto records = ReadRecords(file, ReadMode::kLenient);
  if (records.ok())
    for (const auto& r : *records) done.insert(r.fingerprint);
  return done;
}

Expected<ShapeCheck> ShapeCheck::FromJson(const json& s, const std::string& where) {
  if (!s.is_object() || !s.contains("symbols") || !s["symbols"].is_object() || !s.contains("pass") || !s["pass"].is_boolean())
    return Error::BadInput(where + ": field \"shapes\" holds an entry without \"symbols\" and \"pass\"");
  ShapeCheck c;
  c.graph = s.value("graph", std::string());
  c.pass = s["pass"].get<bool>();
  for (auto it = s["symbols"].begin(); it != s["symbols"].end(); ++it) {
    if (!it.value().is_number_integer()) return Error::BadInput(where + ": field \"shapes[].symbols." + it.key() + "\" is not an integer");
    c.symbols[it.key()] = it.value().get<int64_t>();
  }
  return c;
}

}  // namespace parity::results
