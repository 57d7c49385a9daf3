#include "ci/gate.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "results/statuses.h"

namespace parity::ci {
using nlohmann::json;

namespace {

std::string Sci(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2e", v);
  return buf;
}

double Number(const json& j, const char* key) {
  return j.is_object() && j.contains(key) && j[key].is_number() ? j[key].get<double>() : std::nan("");
}

// The first output whose error grew past the factor, described; empty when none did.
std::string Drift(const results::Record& record, const json& base, const GateOptions& o) {
  const double floor = kDriftFloor * record.tolerance;
  std::map<std::string, const json*> before;
  if (base.contains("outputs") && base["outputs"].is_array())
    for (const auto& b : base["outputs"]) before[b.value("path", std::string())] = &b;
  for (const auto& out : record.outputs) {
    if (!out.contains("stats")) continue;
    auto it = before.find(out.value("path", std::string()));
    if (it == before.end()) continue;
    for (const char* key : {"rmse_res_vs_fp64", "max_abs_err"}) {
      const double now = results::OutputStat(out, key), then = Number(*it->second, key);
      if (std::isnan(now) || std::isnan(then)) continue;
      const double ref = std::max(then, floor);
      if (now > o.drift_factor * ref && now > 0) {
        std::ostringstream s;
        s << out.value("path", std::string()) << ": " << key << " " << Sci(then) << " -> " << Sci(now) << " ("
          << (then > 0 ? Sci(now / then) + "x" : "was 0") << ", limit " << o.drift_factor << "x)";
        return s.str();
      }
    }
  }
  return "";
}

// `s` cut to `n` characters and "..." (in place: GCC 12's -Warray-bounds misfires on the copy
// a by-value version returns, once inlined into Gate).
void Shorten(std::string& s, size_t n) {
  if (s.size() <= n) return;
  s.resize(n);
  s += "...";
}

GateRow Judge(const std::string& config, const results::Record& r, const Baseline& b, const GateOptions& o) {
  GateRow row;
  row.config = config;
  row.name = r.model;
  row.fingerprint = r.fingerprint;
  row.status = results::StatusOf(r);
  row.repro_dir = r.repro_dir;
  std::vector<std::string> statuses;
  for (const auto& a : r.AllAttempts()) statuses.push_back(results::StatusOf(a));
  row.runs = static_cast<int>(statuses.size());
  row.passes = static_cast<int>(std::count(statuses.begin(), statuses.end(), "pass"));
  const auto expected = b.ExpectedStatus(config, r.model);
  if (!expected) {
    row.verdict = Verdict::kNew;
    return row;
  }
  row.expected = *expected;
  if (row.status == *expected) {
    row.verdict = *expected == "pass" ? Verdict::kPass : Verdict::kXfail;
    if (row.verdict == Verdict::kPass)
      if (const json* base = b.Stats(config, r.model))
        if (std::string d = Drift(r, *base, o); !d.empty()) {
          row.verdict = Verdict::kDrift;
          row.note = d;
        }
    if (row.verdict == Verdict::kPass && r.LacksFp64Reference()) {
      row.verdict = Verdict::kNoFp64;
      row.note = r.WeakerRuleNote();
    }
    return row;
  }
  if (std::find(statuses.begin(), statuses.end(), *expected) != statuses.end()) {
    row.verdict = Verdict::kFlaky;
    row.note = "passed " + std::to_string(row.passes) + " of " + std::to_string(row.runs) + " runs";
  } else if (b.IsFlaky(r.model)) {
    row.verdict = Verdict::kFlaky;
    row.note = std::string("in ") + kFlakyFile;
  } else {
    row.verdict = row.status == "pass" ? Verdict::kImproved : Verdict::kFail;
    if (row.verdict == Verdict::kFail) {
      row.note = r.error;
      Shorten(row.note, 160);
    }
  }
  return row;
}

}  // namespace

GateResult Gate(const std::vector<results::Record>& records, const Baseline& b, const GateOptions& o, const GateScope& scope) {
  const auto latest = LatestPerRow(records);
  GateResult g;
  std::set<std::string> configs;
  for (const auto& [key, r] : latest) {
    configs.insert(key.first);
    g.rows.push_back(Judge(key.first, *r, b, o));
  }
  if (scope.complete)
    for (const auto& c : configs)
      for (const auto& name : b.Names(c)) {
        if (latest.count({c, name}) || (scope.wanted && !scope.wanted(name))) continue;
        GateRow row;
        row.config = c;
        row.name = name;
        row.verdict = Verdict::kMissing;
        row.expected = *b.ExpectedStatus(c, name);
        row.runs = 0;
        g.rows.push_back(row);
      }
  std::sort(g.rows.begin(), g.rows.end(),
            [](const GateRow& x, const GateRow& y) { return std::tie(x.config, x.name) < std::tie(y.config, y.name); });
  for (auto& row : g.rows) {
    row.fails = results::Fails(row.verdict, o.policy);
    ++g.counts[row.verdict];
    g.failed = g.failed || row.fails;
  }
  return g;
}

bool ShouldRetry(const std::vector<std::string>& statuses, const std::optional<std::string>& expected, bool known_flaky,
                 int retries) {
  if (!expected || known_flaky || statuses.empty() || statuses.back() == *expected) return false;
  if (statuses.back() == "pass" || statuses.back() == "pass_due_to_skip") return false;
  return static_cast<int>(statuses.size()) < 1 + retries;
}

std::string FailureMessage(const GateResult& g, const std::string& update_command) {
  std::map<Verdict, std::vector<std::string>> names;
  for (const auto& row : g.rows)
    if (row.fails) names[row.verdict].push_back(row.name + " (" + row.config + ")");
  static const std::pair<Verdict, const char*> kWhat[] = {
      {Verdict::kFail, "have accuracy status regressed"},
      {Verdict::kImproved, "have accuracy status improved"},
      {Verdict::kMissing, "are in the baseline but were not run"},
      {Verdict::kNew, "ran but are not in the baseline"},
      {Verdict::kFlaky, "are flaky (--strict)"},
      {Verdict::kDrift, "drifted numerically (--fail-on-drift)"},
      {Verdict::kNoFp64, "passed without an fp64 reference, by cosine similarity (--strict)"},
  };
  std::string msg;
  for (const auto& [v, what] : kWhat) {
    if (!names.count(v)) continue;
    msg += "\n" + std::string(results::ToString(v)) + ": " + std::to_string(names[v].size()) + " model(s) " + what + ":\n";
    for (const auto& n : names[v]) msg += "    " + n + "\n";
  }
  const bool baseline_change = names.count(Verdict::kImproved) || names.count(Verdict::kMissing) || names.count(Verdict::kNew) ||
                               names.count(Verdict::kFail);
  if (baseline_change) msg += "\nIf this change is expected, update the baseline and commit it:\n    " + update_command + "\n";
  return msg;
}

}  // namespace parity::ci
