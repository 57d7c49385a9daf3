#include "verify/console.h"

#include "results/phases.h"
#include "experiment/runner.h"

#include <algorithm>
#include <cstdio>
#include <iomanip>
#include <ostream>
#include <sstream>

namespace parity::verify {

namespace {

std::string Label(const experiment::ExperimentSpec& s) { return s.model + " " + s.backend + " " + s.test + " " + s.dtype; }

std::string Fixed(double v, int prec) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(prec) << v;
  return os.str();
}

// "compile 2.1, eager 0.9, fp64 0.5": the phases that took most of `phases`, largest first
// (those under 5% of the whole left out, at most four).
std::string TopPhases(const std::map<std::string, double>& phases, double whole, int most = 4) {
  std::vector<std::pair<double, std::string>> by;
  for (const auto& [name, s] : phases)
    if (whole > 0 && s >= 0.05 * whole) by.emplace_back(s, name);
  std::sort(by.rbegin(), by.rend());
  std::string out;
  for (int i = 0; i < static_cast<int>(by.size()) && i < most; ++i)
    out += (out.empty() ? "" : ", ") + by[static_cast<size_t>(i)].second + " " + Fixed(by[static_cast<size_t>(i)].first, 1);
  return out;
}

void Row(std::ostream& out, const std::vector<std::string>& r) {
  char line[512];
  std::snprintf(line, sizeof line, "%-12s %-28s %-6s %-9s %-27s %10s %10s %10s\n", r[0].c_str(), r[1].substr(0, 28).c_str(),
                r[2].c_str(), r[3].c_str(), r[4].c_str(), r[5].c_str(), r[6].c_str(), r[7].c_str());
  out << line;
}

}  // namespace

void VerifyConsole::Started(size_t index, const experiment::ExperimentSpec& spec, const std::filesystem::path& dir) {
  running_[index] = {Label(spec), dir, std::chrono::steady_clock::now()};
  Tick();
}

void VerifyConsole::Tick() {
  if (!progress_) return;
  std::ostringstream os;
  const auto now = std::chrono::steady_clock::now();
  for (const auto& [index, r] : running_) {
    const std::string phase = r.dir.empty() ? "" : runtime::CurrentPhase(r.dir);
    const int s = static_cast<int>(std::chrono::duration<double>(now - r.started).count());
    if (os.tellp() > 0) os << " | ";
    os << "[" << index << "/" << total_ << "] " << r.label << ": " << (phase.empty() ? "starting" : phase) << " " << s << "s";
  }
  std::string line = os.str();
  if (line.size() > 200) line.resize(200);
  out_ << "\r\033[K" << line << std::flush;
}

void VerifyConsole::Finished(size_t index, const experiment::ExperimentSpec& spec, const experiment::ExperimentResult& r,
                             const results::Record::Metrics& m) {
  running_.erase(index);
  if (progress_) out_ << "\r\033[K";
  const std::string top = TopPhases(m.phase_seconds, m.wall_time_s);
  out_ << "[" << index << "/" << total_ << "] " << Label(spec) << ": " << results::ToString(r.code) << " ("
       << Fixed(m.wall_time_s, 1) << " s" << (top.empty() ? "" : ": " + top) << ")";
  wall_total_ += m.wall_time_s;
  for (const auto& [name, s] : m.phase_seconds) phase_totals_[name] += s;
  if (!r.error.empty() && r.code != results::Code::kPass) out_ << "  " << r.error.substr(0, 160);
  if (!r.has_fp64_reference() && (r.code == results::Code::kPass || r.code == results::Code::kFail))
    out_ << "  [no fp64 reference: decided by cosine similarity; " << r.reference_error.substr(0, 120) << "]";
  out_ << "\n";
  // The verdict in one sentence: every FAIL, and a PASS the other rule would fail.
  if (!r.justification.empty() && (r.code == results::Code::kFail || results::RulesDisagree(r.outputs)))
    out_ << "  why: " << r.justification << "\n";
  out_ << std::flush;
  std::ostringstream max_abs;
  max_abs << std::setprecision(3) << results::MaxAbsError(r.outputs);
  rows_.push_back({spec.model, spec.backend, spec.test, spec.dtype, results::ToString(r.code), Fixed(r.compile_time_s, 2),
                   r.per_iter_time.empty() ? "-" : Fixed(r.per_iter_time[0] * 1e3, 2), r.outputs.empty() ? "-" : max_abs.str()});
}

void VerifyConsole::Summary(const VerifySummary& s) {
  out_ << "\n";
  Row(out_, {"model", "backend", "test", "dtype", "verification_code", "compile_s", "iter_ms", "max_abs"});
  for (const auto& row : rows_) Row(out_, row);
  out_ << s.passed << " passed, " << s.failed << " failed, " << s.skipped << " skipped";
  if (s.resumed) out_ << ", " << s.resumed << " already in " << s.results_file.string();
  out_ << "; results: " << s.results_file.string() << "\n";
  if (wall_total_ > 0 && rows_.size() > 1) {  // where the run's time went (one experiment's line said it already)
    std::string split;
    for (const auto& p : results::kPhases) {
      auto it = phase_totals_.find(p.name);
      if (it == phase_totals_.end() || it->second < 0.005 * wall_total_) continue;
      split += (split.empty() ? "" : ", ") + std::string(p.name) + " " + Fixed(100.0 * it->second / wall_total_, 0) + "%";
    }
    out_ << "time: " << Fixed(wall_total_, 1) << " s over " << rows_.size() << " experiments: " << split << "\n";
  }
  for (const auto& b : s.bad_dirs) out_ << "not verified (bad input): " << b.dir << ": " << b.error.message << "\n";
}

}  // namespace parity::verify
