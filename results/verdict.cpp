#include "results/verdict.h"

#include <utility>

#include "util/names.h"

#include "util/files.h"
#include "util/json.h"

namespace parity::results {
using nlohmann::json;

namespace {
constexpr std::pair<Verdict, const char*> kVerdicts[] = {
    {Verdict::kPass, "PASS"},         {Verdict::kXfail, "XFAIL"},   {Verdict::kFail, "FAIL"},
    {Verdict::kImproved, "IMPROVED"}, {Verdict::kMissing, "MISSING"}, {Verdict::kNew, "NEW"},
    {Verdict::kFlaky, "FLAKY"},       {Verdict::kDrift, "DRIFT"},   {Verdict::kNoFp64, "NO_FP64"},
};

std::string Str(const json& j, const char* key) {
  return j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : std::string();
}
}  // namespace

const char* ToString(Verdict v) { return NameIn(kVerdicts, v); }

Expected<Verdict> ParseVerdict(const std::string& s) {
  if (auto v = ValueIn(kVerdicts, s)) return *v;
  return Error::BadInput("unknown verdict \"" + s + "\"");
}

bool Fails(Verdict v, const FailPolicy& p) {
  switch (v) {
    case Verdict::kFail:
    case Verdict::kImproved:
    case Verdict::kMissing:
    case Verdict::kNew: return true;
    case Verdict::kFlaky:
    case Verdict::kNoFp64: return p.strict;
    case Verdict::kDrift: return p.fail_on_drift;
    case Verdict::kPass:
    case Verdict::kXfail: return false;
  }
  return true;
}

json GateRow::ToJson() const {
  json j = {{"config", config}, {"name", name},     {"verdict", ToString(verdict)}, {"fails", fails},
            {"status", status}, {"expected", expected}, {"runs", runs},             {"passes", passes}};
  if (!note.empty()) j["note"] = note;
  if (!repro_dir.empty()) j["repro_dir"] = repro_dir;
  if (!fingerprint.empty()) j["fingerprint"] = fingerprint;
  if (!minified_dir.empty()) j["minified_dir"] = minified_dir;
  if (!culprit_op.empty()) j["culprit"] = {{"op", culprit_op}, {"source", culprit_source}};
  if (!compiler_culprit.empty()) j["compiler_culprit"] = compiler_culprit;
  return j;
}

Expected<GateRow> GateRow::FromJson(const json& j, const std::string& where) {
  if (!j.is_object()) return Error::BadInput(where + ": a row is not an object");
  GateRow r;
  if (!j.contains("verdict") || !j["verdict"].is_string()) return Error::BadInput(where + ": field \"verdict\" missing or not a string");
  auto v = ParseVerdict(j["verdict"].get<std::string>());
  if (!v.ok()) return Error::BadInput(where + ": field \"verdict\": " + v.error().message);
  r.verdict = *v;
  if (j.contains("fails") && !j["fails"].is_boolean()) return Error::BadInput(where + ": field \"fails\" is not a boolean");
  r.fails = j.contains("fails") ? j["fails"].get<bool>() : Fails(r.verdict, FailPolicy{});  // older gate files
  r.config = Str(j, "config");
  r.name = Str(j, "name");
  r.status = Str(j, "status");
  r.expected = Str(j, "expected");
  r.runs = j.contains("runs") && j["runs"].is_number_integer() ? j["runs"].get<int>() : 1;
  r.passes = j.contains("passes") && j["passes"].is_number_integer() ? j["passes"].get<int>() : 0;
  r.note = Str(j, "note");
  r.repro_dir = Str(j, "repro_dir");
  r.fingerprint = Str(j, "fingerprint");
  r.minified_dir = Str(j, "minified_dir");
  if (j.contains("culprit") && j["culprit"].is_object()) {
    r.culprit_op = Str(j["culprit"], "op");
    r.culprit_source = Str(j["culprit"], "source");
  }
  r.compiler_culprit = Str(j, "compiler_culprit");
  return r;
}

Status WriteGateFile(const std::filesystem::path& file, const GateFile& g) {
  json rows = json::array();
  for (const auto& r : g.rows) rows.push_back(r.ToJson());
  return WriteFileAtomic(file, json({{"passed", g.passed}, {"expected", g.expected}, {"rows", rows}}).dump(2) + "\n");
}

Expected<GateFile> ReadGateFile(const std::filesystem::path& file) {
  PARITY_ASSIGN_OR_RETURN(std::string text, ReadFile(file));
  PARITY_ASSIGN_OR_RETURN(json j, ParseJson(text, file.string()));
  if (!j.is_object() || !j.contains("rows") || !j["rows"].is_array())
    return Error::BadInput(file.string() + ": field \"rows\" missing or not an array");
  GateFile g;
  g.passed = j.value("passed", true);
  g.expected = Str(j, "expected");
  for (size_t i = 0; i < j["rows"].size(); ++i) {
    PARITY_ASSIGN_OR_RETURN(GateRow r, GateRow::FromJson(j["rows"][i], file.string() + ": rows[" + std::to_string(i) + "]"));
    g.rows.push_back(std::move(r));
  }
  return g;
}

Outcome OutcomeOf(const Record& r, const GateRow* row) {
  const std::string code = ToString(r.code);
  if (row) {
    const std::string v = ToString(row->verdict);
    if (!row->fails) return {"pass", v};
    const bool numbers = r.code == Code::kFail || r.code == Code::kPass;  // a wrong result, not a crash
    return {numbers || row->verdict == Verdict::kImproved || row->verdict == Verdict::kNew ? "fail" : "error", v};
  }
  if (r.code == Code::kPass) return {"pass", code};
  if (r.code == Code::kVerifierSkipped) return {"skipped", code};
  return {r.code == Code::kFail ? "fail" : "error", code};
}

}  // namespace parity::results
