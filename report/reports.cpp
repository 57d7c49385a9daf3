#include "report/reports.h"

#include <cstdio>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>

#include "results/statuses.h"
#include "util/csv.h"
#include "util/files.h"

namespace parity::report {

namespace {

std::string Fixed(double v, const char* fmt) {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, v);
  return buf;
}

std::string Str(const nlohmann::json& o, const char* key) {
  return o.is_object() && o.contains(key) && o[key].is_string() ? o[key].get<std::string>() : std::string();
}

double Stat(const nlohmann::json& o, const char* key) {
  const double v = results::OutputStat(o, key);
  return std::isnan(v) ? 0.0 : v;
}

// The failing outputs' statistics, one line each.
std::string FailingOutputs(const results::Record& r) {
  std::string s;
  for (const auto& o : r.outputs) {
    if (o.value("pass", true)) continue;
    s += Str(o, "path") + ": " + Str(o, "message") + " (max abs " + Fixed(Stat(o, "max_abs_err"), "%.3g") + ", rmse vs fp64 " +
         Fixed(Stat(o, "rmse_res_vs_fp64"), "%.3g") + ")\n";
  }
  return s;
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

std::string Label(const results::Record& r) { return r.model + " " + r.experiment.backend + " " + r.experiment.test + " " + r.experiment.dtype; }

// What a passing entry says beside its verdict: the gate's note, the weaker rule that decided.
std::string PassNote(const Entry& e, const results::Outcome& o) {
  std::string note = o.label;
  if (e.gate && !e.gate->note.empty()) note += ": " + e.gate->note;
  if (e.record.LacksFp64Reference() && !(e.gate && e.gate->verdict == results::Verdict::kNoFp64))
    note += "; " + e.record.WeakerRuleNote();
  return note;
}

}  // namespace

std::vector<Entry> Entries(const std::vector<results::Record>& records, const std::vector<results::GateRow>& rows) {
  std::map<std::string, const results::GateRow*> by_fp;
  for (const auto& row : rows)
    if (!row.fingerprint.empty()) by_fp[row.fingerprint] = &row;
  std::map<std::string, size_t> seen;
  std::vector<Entry> entries;
  for (const auto& r : records) {
    auto it = by_fp.find(r.fingerprint);
    Entry e{r, it == by_fp.end() ? std::nullopt : std::optional<results::GateRow>(*it->second)};
    if (auto s = seen.find(r.fingerprint); s != seen.end() && !r.fingerprint.empty()) {
      entries[s->second] = std::move(e);
      continue;
    }
    seen[r.fingerprint] = entries.size();
    entries.push_back(std::move(e));
  }
  return entries;
}

std::string AccuracyCsv(const std::vector<Entry>& entries) {
  CsvTable t;
  t.header = {"dev", "name", "batch_size", "accuracy", "graph_breaks", "unique_graphs", "compilation_latency"};
  for (const auto& e : entries) {
    const results::Record& r = e.record;
    const int breaks = r.graph_breaks.value_or(0);
    t.rows.push_back({r.experiment.accelerator, r.model, std::to_string(r.experiment.batch_size), results::StatusOf(r), std::to_string(breaks),
                      std::to_string(breaks + 1), Fixed(r.metrics.compile_time_s, "%.3f")});
  }
  return CsvText(t);
}

std::string JUnitXml(const std::vector<Entry>& entries) {
  std::map<std::string, std::vector<const Entry*>> suites;
  for (const auto& e : entries) suites[results::ConfigOf(e.record)].push_back(&e);
  std::ostringstream x;
  x << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"parity\">\n";
  for (const auto& [config, es] : suites) {
    int failures = 0, errors = 0, skipped = 0;
    double time = 0;
    for (const Entry* e : es) {
      const auto o = e->outcome();
      failures += o.kind == "fail";
      errors += o.kind == "error";
      skipped += o.kind == "skipped";
      time += e->record.metrics.wall_time_s;
    }
    x << "  <testsuite name=\"" << Xml(config) << "\" tests=\"" << es.size() << "\" failures=\"" << failures << "\" errors=\""
      << errors << "\" skipped=\"" << skipped << "\" time=\"" << Fixed(time, "%.3f") << "\">\n";
    for (const Entry* e : es) {
      const results::Record& r = e->record;
      const auto o = e->outcome();
      x << "    <testcase classname=\"" << Xml(config) << "\" name=\"" << Xml(Label(r)) << "\" time=\""
        << Fixed(r.metrics.wall_time_s, "%.3f") << "\"";
      if (o.kind == "fail" || o.kind == "error") {
        std::string message = o.label + ": " + results::StatusOf(r) +
                              (e->gate && !e->gate->expected.empty() ? ", expected " + e->gate->expected : "") +
                              (!r.justification.empty() ? ": " + r.justification.substr(0, 800)
                               : r.error.empty()        ? ""
                                                        : ": " + r.error.substr(0, 500));
        if (e->gate && !e->gate->note.empty() && r.error.empty()) message += ": " + e->gate->note;
        std::string body = FailingOutputs(r);
        if (!r.justification.empty() && !r.error.empty()) body = "same(): " + r.error.substr(0, 500) + "\n" + body;
        if (!r.repro_dir.empty()) body += "repro dir: " + r.repro_dir + "\n";
        const char* tag = o.kind == "fail" ? "failure" : "error";
        x << ">\n      <" << tag << " message=\"" << Xml(message) << "\" type=\"" << Xml(o.label) << "\">" << Xml(body) << "</"
          << tag << ">\n    </testcase>\n";
      } else if (o.kind == "skipped") {
        x << ">\n      <skipped message=\"" << Xml(r.error) << "\"/>\n    </testcase>\n";
      } else if (o.label != "PASS" || r.LacksFp64Reference()) {
        x << ">\n      <system-out>" << Xml(PassNote(*e, o)) << "</system-out>\n    </testcase>\n";
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
  for (const auto& e : entries) ++counts[e.outcome().label];
  std::ostringstream m;
  m << "## " << title << "\n\n";
  for (auto it = counts.begin(); it != counts.end(); ++it)
    m << (it == counts.begin() ? "" : ", ") << "**" << it->second << "** " << it->first;
  m << " (" << entries.size() << " experiments)\n\n";
  m << "| model | backend | test | dtype | device | result | status | expected | max abs error | wall s |\n"
       "|---|---|---|---|---|---|---|---|---|---|\n";
  for (const auto& e : entries) {
    const results::Record& r = e.record;
    const auto o = e.outcome();
    const bool clean = o.label == "PASS" && !r.LacksFp64Reference();
    const std::string mark = o.kind == "pass" ? (clean ? "✅ " : "⚠️ ") : o.kind == "skipped" ? "⏭️ " : "❌ ";
    m << "| " << Md(r.model) << " | " << Md(r.experiment.backend) << " | " << r.experiment.test << " | " << r.experiment.dtype << " | " << r.experiment.accelerator << " | "
      << mark << o.label << " | " << results::StatusOf(r) << " | " << (e.gate ? e.gate->expected : "") << " | "
      << Fixed(r.MaxAbsError(), "%.3g") << " | " << Fixed(r.metrics.wall_time_s, "%.1f") << " |\n";
  }
  bool header = false;
  for (const auto& e : entries) {
    const auto o = e.outcome();
    const results::Record& r = e.record;
    const bool noted = o.label == "DRIFT" || o.label == "FLAKY" || r.LacksFp64Reference() || results::RulesDisagree(r.outputs);
    if (o.kind != "fail" && o.kind != "error" && !noted) continue;
    if (!header) m << "\n### Details\n\n";
    header = true;
    m << "- **" << Md(r.model) << "** " << r.experiment.backend << " " << r.experiment.test << " " << r.experiment.dtype << ": " << o.label;
    const std::string note = e.gate ? e.gate->note : "";
    if (!note.empty() && (r.error.empty() || note.rfind(r.error.substr(0, 40), 0) != 0)) m << " (" << Md(note) << ")";
    if (!r.error.empty()) m << "  \n  `" << Md(r.error.substr(0, 300)) << "`";
    if (!r.justification.empty() && (o.kind == "fail" || results::RulesDisagree(r.outputs)))
      m << "  \n  why: " << Md(r.justification.substr(0, 800));
    if (r.LacksFp64Reference() && note.find(r.WeakerRuleNote()) == std::string::npos) m << "  \n  " << Md(r.WeakerRuleNote());
    if (!r.repro_dir.empty()) m << "  \n  repro dir: `" << r.repro_dir << "`";
    if (e.gate && !e.gate->culprit_op.empty()) m << "  \n  culprit: `" << e.gate->culprit_op << "` " << Md(e.gate->culprit_source);
    if (e.gate && !e.gate->compiler_culprit.empty()) m << "  \n  compiler: " << Md(e.gate->compiler_culprit);
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
