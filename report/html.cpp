#include "report/html.h"

#include <unistd.h>
#include <nlohmann/json.hpp>

#include "report/reports.h"
#include "results/phases.h"
#include "results/record.h"
#include "results/verdict.h"
#include "runtime/tool_script.h"
#include "util/files.h"

namespace parity::report {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr const char* kMinifySummary = "summary.json";

// A `parity minify` summary.json, when `in` is one or an OUT dir holding one (and no results).
std::optional<fs::path> MinifySummaryOf(const fs::path& in) {
  if (fs::is_directory(in) && !fs::exists(in / "results.jsonl") && fs::exists(in / kMinifySummary)) return in / kMinifySummary;
  if (in.filename() == kMinifySummary) return in;
  return std::nullopt;
}

Expected<json> ReadMinifySummary(const fs::path& file) {
  PARITY_ASSIGN_OR_RETURN(std::string text, ReadFile(file));
  json j = json::parse(text, nullptr, false);
  if (!j.is_object()) return Error::BadInput(file.string() + ": not a JSON object (a parity minify summary.json)");
  for (const char* field : {"source", "backend", "ops_before", "ops_after", "backend_runs"})
    if (!j.contains(field)) return Error::BadInput(file.string() + ": field \"" + std::string(field) + "\" missing");
  if (j.contains("divergence") && !j["divergence"].is_array())
    return Error::BadInput(file.string() + ": field \"divergence\" is not an array");
  return j;
}

}  // namespace

Expected<HtmlSummary> WriteHtmlReport(const std::vector<fs::path>& inputs, const fs::path& out, const std::string& title) {
  json data = {{"title", title},
               {"sources", json::array()},
               {"entries", json::array()},
               {"profiles", json::array()},
               {"minifies", json::array()},
               {"phases", json::array()}};
  for (const auto& p : results::kPhases) data["phases"].push_back({{"name", p.name}, {"meaning", p.meaning}});
  HtmlSummary s;
  for (const auto& in : inputs) {
    if (auto summary = MinifySummaryOf(in)) {
      PARITY_ASSIGN_OR_RETURN(json m, ReadMinifySummary(*summary));
      data["minifies"].push_back(std::move(m));
      data["sources"].push_back(summary->string());
      ++s.minifies;
      continue;
    }
    const fs::path file = fs::is_directory(in) ? in / "results.jsonl" : in;
    PARITY_ASSIGN_OR_RETURN(auto records, results::ReadRecords(file, results::ReadMode::kStrict));
    std::vector<results::GateRow> rows;
    const fs::path gate_file = file.parent_path() / results::kGateFile;
    if (fs::exists(gate_file)) {
      PARITY_ASSIGN_OR_RETURN(results::GateFile gate, results::ReadGateFile(gate_file));
      rows = std::move(gate.rows);
    }
    for (const auto& e : Entries(records, rows)) {
      s.with_verdicts += e.gate.has_value();
      const results::Outcome o = e.outcome();
      data["entries"].push_back({{"record", e.record.ToJson()},
                                 {"gate", e.gate ? e.gate->ToJson() : json()},
                                 {"outcome", {{"kind", o.kind}, {"label", o.label}, {"weaker_rule", e.record.WeakerRuleNote()}}}});
      ++s.experiments;
    }
    for (auto& p : results::ReadProfileRecords(file)) {
      data["profiles"].push_back(std::move(p["profile"]));
      ++s.profiles;
    }
    data["sources"].push_back(file.string());
  }
  const fs::path tmp = fs::temp_directory_path() / ("parity-report-" + std::to_string(::getpid()) + ".json");
  PARITY_RETURN_IF_ERROR(WriteFileAtomic(tmp, data.dump()));
  const fs::path partial = out.string() + ".partial";
  Status rendered = runtime::RunToolScript("report", {tmp.string(), partial.string()}, tmp.string() + ".log", 600);
  std::error_code ec;
  fs::remove(tmp, ec);
  if (!rendered.ok()) {
    fs::remove(partial, ec);
    return Error::Runtime("the report renderer failed: " + rendered.error().message);
  }
  fs::rename(partial, out, ec);
  if (ec) return Error::Runtime("cannot write " + out.string() + ": " + ec.message());
  return s;
}

}  // namespace parity::report
