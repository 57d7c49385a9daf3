#include "report/reports.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>

#include "ci/statuses.h"
#include "util/csv.h"
#include "util/files.h"
#include "verifier/results.h"

namespace parity::report {
using nlohmann::json;

namespace {

std::string Str(const json& j, const char* key) {
  return j.is_object() && j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : std::string();
}
double Num(const json& j, const char* key) {
  return j.is_object() && j.contains(key) && j[key].is_number() ? j[key].get<double>() : 0.0;
}
std::string Model(const json& r) { return Str(r.value("model", json::object()), "model_name"); }
std::string Exp(const json& r, const char* key) { return Str(r.value("experiment", json::object()), key); }

std::string Fixed(double v, const char* fmt) {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, v);
  return buf;
}

// The failing outputs' statistics, one line each.
std::string FailingOutputs(const json& r) {
  std::string s;
  for (const auto& o : r.value("outputs", json::array())) {
    if (!o.is_object() || o.value("pass", true)) continue;
    const json& st = o.value("stats", json::object());
    s += Str(o, "path") + ": " + Str(o, "message") + " (max abs " + Fixed(Num(st, "max_abs_err"), "%.3g") + ", rmse vs fp64 " +
         Fixed(Num(st, "rmse_res_vs_fp64"), "%.3g") + ")\n";
  }
  return s;
}

double MaxAbs(const json& r) {
  double m = 0;
  for (const auto& o : r.value("outputs", json::array()))
    if (o.is_object()) m = std::max(m, Num(o.value("stats", json::object()), "max_abs_err"));
  return m;
}

std::string Xml(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default:
        if (c < 0x20 && c != '\n' && c != '\t' && c != '\r') continue;  // not allowed in XML 1.0
        out += static_cast<char>(c);
    }
  }
  return out;
}

std::string Md(std::string s) {
  for (size_t i = 0; (i = s.find('|', i)) != std::string::npos; i += 2) s.replace(i, 1, "\\|");
  for (char& c : s)
    if (c == '\n') c = ' ';
  return s;
}

}  // namespace

Outcome OutcomeOf(const Entry& e) {
  const std::string code = Str(e.record, "verification_code");
  if (e.gate.is_object()) {
    const std::string v = Str(e.gate, "verdict");
    if (v == "PASS" || v == "XFAIL" || v == "FLAKY" || v == "DRIFT" || v == "NO_FP64") return {"pass", v};
    return {code == "FAIL" || v == "IMPROVED" || v == "NEW" ? "fail" : "error", v};
  }
  if (code == "PASS") return {"pass", code};
  if (code == "VERIFIER_SKIPPED") return {"skipped", code};
  return {code == "FAIL" ? "fail" : "error", code};
}

std::vector<Entry> Entries(const std::vector<json>& records, const json& gate_rows) {
  std::map<std::string, json> rows;
  if (gate_rows.is_array())
    for (const auto& row : gate_rows)
      if (!Str(row, "fingerprint").empty()) rows[Str(row, "fingerprint")] = row;
  std::map<std::string, size_t> seen;
  std::vector<Entry> entries;
  for (const auto& r : records) {
    const std::string fp = Str(r, "fingerprint");
    auto it = rows.find(fp);
    Entry e{r, it == rows.end() ? json() : it->second};
    if (auto s = seen.find(fp); s != seen.end() && !fp.empty()) {
      entries[s->second] = std::move(e);
      continue;
    }
    seen[fp] = entries.size();
    entries.push_back(std::move(e));
  }
  return entries;
}

std::string AccuracyCsv(const std::vector<Entry>& entries) {
  CsvTable t;
  t.header = {"dev", "name", "batch_size", "accuracy", "graph_breaks", "unique_graphs", "compilation_latency"};
  for (const auto& e : entries) {
    const json& r = e.record;
    const int breaks = r.value("graph_breaks", 0);
    t.rows.push_back({Exp(r, "accelerator"), Model(r), std::to_string(r["experiment"].value("batch_size", 0)), ci::StatusOf(r),
                      std::to_string(breaks), std::to_string(breaks + 1),
                      Fixed(Num(r.value("metrics", json::object()), "compile_time_s"), "%.3f")});
  }
  return CsvText(t);
}

std::string JUnitXml(const std::vector<Entry>& entries) {
  std::map<std::string, std::vector<const Entry*>> suites;
  for (const auto& e : entries) suites[ci::ConfigOf(e.record)].push_back(&e);
  std::ostringstream x;
  x << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"parity\">\n";
  for (const auto& [config, es] : suites) {
    int failures = 0, errors = 0, skipped = 0;
    double time = 0;
    for (const Entry* e : es) {
      const auto o = OutcomeOf(*e);
      failures += o.kind == "fail";
      errors += o.kind == "error";
      skipped += o.kind == "skipped";
      time += Num(e->record.value("metrics", json::object()), "wall_time_s");
    }
    x << "  <testsuite name=\"" << Xml(config) << "\" tests=\"" << es.size() << "\" failures=\"" << failures << "\" errors=\""
      << errors << "\" skipped=\"" << skipped << "\" time=\"" << Fixed(time, "%.3f") << "\">\n";
    for (const Entry* e : es) {
      const json& r = e->record;
      const auto o = OutcomeOf(*e);
      x << "    <testcase classname=\"" << Xml(config) << "\" name=\""
        << Xml(Model(r) + " " + Exp(r, "backend") + " " + Exp(r, "test") + " " + Exp(r, "dtype")) << "\" time=\""
        << Fixed(Num(r.value("metrics", json::object()), "wall_time_s"), "%.3f") << "\"";
      const std::string message =
          o.label + ": " + ci::StatusOf(r) +
          (e->gate.is_object() && !Str(e->gate, "expected").empty() ? ", expected " + Str(e->gate, "expected") : "") +
          (Str(r, "error").empty() ? "" : ": " + Str(r, "error").substr(0, 500));
      std::string body = FailingOutputs(r);
      if (!Str(r, "repro_dir").empty()) body += "repro dir: " + Str(r, "repro_dir") + "\n";
      if (o.kind == "fail" || o.kind == "error") {
        const char* tag = o.kind == "fail" ? "failure" : "error";
        x << ">\n      <" << tag << " message=\"" << Xml(message) << "\" type=\"" << Xml(o.label) << "\">" << Xml(body) << "</"
          << tag << ">\n    </testcase>\n";
      } else if (o.kind == "skipped") {
        x << ">\n      <skipped message=\"" << Xml(Str(r, "error")) << "\"/>\n    </testcase>\n";
      } else if (o.label != "PASS" || verifier::LacksFp64Reference(r)) {
        std::string note = o.label + (Str(e->gate, "note").empty() ? "" : ": " + Str(e->gate, "note"));
        if (verifier::LacksFp64Reference(r) && o.label != "NO_FP64") note += "; " + verifier::WeakerRuleNote(r);
        x << ">\n      <system-out>" << Xml(note) << "</system-out>\n    </testcase>\n";
      } else {
        x << "/>\n";
      }
    }
    x << "  </testsuite>\n";
  }
  x << "</testsuites>\n";
  return x.str();
}

std::string SummaryMarkdown(const std::vector<Entry>& entries, const std::string& title) {
  std::map<std::string, int> counts;
  for (const auto& e : entries) ++counts[OutcomeOf(e).label];
  std::ostringstream m;
  m << "## " << title << "\n\n";
  for (auto it = counts.begin(); it != counts.end(); ++it)
    m << (it == counts.begin() ? "" : ", ") << "**" << it->second << "** " << it->first;
  m << " (" << entries.size() << " experiments)\n\n";
  m << "| model | backend | test | dtype | device | result | status | expected | max abs error | wall s |\n"
       "|---|---|---|---|---|---|---|---|---|---|\n";
  for (const auto& e : entries) {
    const json& r = e.record;
    const auto o = OutcomeOf(e);
    const bool weak = verifier::LacksFp64Reference(r);
    const std::string mark = o.kind == "pass" ? (o.label == "PASS" && !weak ? "✅ " : "⚠️ ") : o.kind == "skipped" ? "⏭️ " : "❌ ";
    m << "| " << Md(Model(r)) << " | " << Md(Exp(r, "backend")) << " | " << Exp(r, "test") << " | " << Exp(r, "dtype") << " | "
      << Exp(r, "accelerator") << " | " << mark << o.label << " | " << ci::StatusOf(r) << " | "
      << (e.gate.is_object() ? Str(e.gate, "expected") : "") << " | " << Fixed(MaxAbs(r), "%.3g") << " | "
      << Fixed(Num(r.value("metrics", json::object()), "wall_time_s"), "%.1f") << " |\n";
  }
  bool header = false;
  for (const auto& e : entries) {
    const auto o = OutcomeOf(e);
    if (o.kind != "fail" && o.kind != "error" && o.label != "DRIFT" && o.label != "FLAKY" && !verifier::LacksFp64Reference(e.record))
      continue;
    if (!header) m << "\n### Details\n\n";
    header = true;
    const json& r = e.record;
    m << "- **" << Md(Model(r)) << "** " << Exp(r, "backend") << " " << Exp(r, "test") << " " << Exp(r, "dtype") << ": "
      << o.label;
    const std::string note = e.gate.is_object() ? Str(e.gate, "note") : "";
    const std::string error = Str(r, "error");
    if (!note.empty() && (error.empty() || note.rfind(error.substr(0, 40), 0) != 0)) m << " (" << Md(note) << ")";
    if (!error.empty()) m << "  \n  `" << Md(error.substr(0, 300)) << "`";
    if (verifier::LacksFp64Reference(r)) m << "  \n  " << Md(verifier::WeakerRuleNote(r));
    if (!Str(r, "repro_dir").empty()) m << "  \n  repro dir: `" << Str(r, "repro_dir") << "`";
    if (e.gate.is_object() && e.gate.contains("culprit"))
      m << "  \n  culprit: `" << Str(e.gate["culprit"], "op") << "` " << Md(Str(e.gate["culprit"], "source"));
    m << "\n";
  }
  return m.str();
}

Status WriteReports(const std::filesystem::path& dir, const std::vector<Entry>& entries, const std::string& title) {
  PARITY_RETURN_IF_ERROR(WriteFileAtomic(dir / "accuracy.csv", AccuracyCsv(entries)));
  PARITY_RETURN_IF_ERROR(WriteFileAtomic(dir / "junit.xml", JUnitXml(entries)));
  const std::string md = SummaryMarkdown(entries, title);
  PARITY_RETURN_IF_ERROR(WriteFileAtomic(dir / "summary.md", md));
  if (const char* step = std::getenv("GITHUB_STEP_SUMMARY"); step && *step) {
    std::ofstream out(step, std::ios::app);
    out << md << "\n";
    if (!out) return Error::Runtime(std::string("$GITHUB_STEP_SUMMARY ") + step + ": cannot append");
  }
  return Status::Ok();
}

}  // namespace parity::report
