#include "ci/ci.h"

#include <cstdio>
#include <fstream>
#include <ostream>
#include <set>

#include "distributed/verify_worlds.h"
#include "distributed/world.h"
#include "matrix/matrix.h"
#include "minifier/minify.h"
#include "repro/graph.h"
#include "results/statuses.h"
#include "util/files.h"
#include "experiment/experiment.h"
#include "util/subprocess.h"
#include "verify/record.h"

namespace parity::ci {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// Runs verify's matrix with retries of failures that do not match the baseline; the records
// of this shard's experiments (this run's and those resumed from results.jsonl).
Expected<std::vector<results::Record>> RunMatrix(const CiOptions& o, Baseline& baseline, std::ostream& out) {
  verify::VerifyOptions vo = o.verify;
  if (fs::exists(baseline.StatsPath())) vo.cost_files.push_back(baseline.StatsPath());
  verify::VerifyHooks hooks;
  hooks.retry = [&](const experiment::ExperimentSpec& spec, const std::vector<experiment::ExperimentResult>& attempts) {
    const std::string config = verify::ConfigOfSpec(spec);
    if (!baseline.LoadConfigs({config}).ok()) return false;  // reported when the gate loads it
    std::vector<std::string> statuses;
    for (const auto& a : attempts) statuses.push_back(results::StatusOf(verify::AttemptOf(a)));
    const bool again =
        ShouldRetry(statuses, baseline.ExpectedStatus(config, spec.model), baseline.IsFlaky(spec.model), o.retries);
    if (again)
      out << "  " << spec.model << " " << spec.backend << ": " << statuses.back() << ", expected "
          << *baseline.ExpectedStatus(config, spec.model) << ": rerun " << attempts.size() << " of " << o.retries << "\n";
    return again;
  };
  PARITY_ASSIGN_OR_RETURN(auto summary, distributed::VerifyWithWorlds(vo, out, hooks));
  // The gate decides over the whole matrix asked for: a bad repro dir in it is bad input (the
  // others' records are in the results file).
  if (!summary.bad_dirs.empty()) return summary.bad_dirs.front().error;
  const std::set<std::string> mine(summary.fingerprints.begin(), summary.fingerprints.end());
  PARITY_ASSIGN_OR_RETURN(auto all, results::ReadRecords(summary.results_file, results::ReadMode::kStrict));
  std::vector<results::Record> records;
  for (auto& r : all)
    if (mine.count(r.fingerprint)) records.push_back(std::move(r));
  return records;
}

Expected<std::vector<results::Record>> ReadAll(const std::vector<fs::path>& files) {
  std::vector<results::Record> records;
  for (const auto& f : files) {
    PARITY_ASSIGN_OR_RETURN(auto rs, results::ReadRecords(f, results::ReadMode::kStrict));
    for (auto& r : rs) records.push_back(std::move(r));
  }
  return records;
}

Expected<GateScope> ScopeOf(const CiOptions& o) {
  GateScope scope;
  const auto& m = o.verify.models;
  const bool all_models = std::find(m.begin(), m.end(), "all") != m.end();  // repro dirs and named models are a choice
  scope.complete = !o.results.empty() || (o.verify.shard.count <= 1 && all_models);
  PARITY_ASSIGN_OR_RETURN(scope.wanted, matrix::ModelNameFilter(o.verify));
  return scope;
}

// Each row's verdict by configuration, then the gate's counts and outcome; while the baseline is
// being updated (`updating`) the counts are against the baseline as it was, which the update
// then brings in step, so no outcome is claimed.
void PrintVerdicts(const GateResult& g, const Baseline& baseline, bool updating, std::ostream& out) {
  std::string config;
  for (const auto& row : g.rows) {
    if (row.config != config) {
      config = row.config;
      out << "\n" << config << " (" << baseline.FileOf(config).string() << ")\n";
    }
    char line[160];
    std::snprintf(line, sizeof line, "  %-34s %-9s", row.name.c_str(), results::ToString(row.verdict));
    out << line;
    if (row.verdict != Verdict::kPass) {
      if (!row.status.empty()) out << " accuracy=" << row.status;
      if (!row.expected.empty()) out << (row.status.empty() ? " " : ", ") << "expected=" << row.expected;
    }
    if (!row.note.empty()) out << "  " << row.note;
    out << "\n";
  }
  out << "\ngate:";
  const char* sep = " ";
  for (const auto& [v, n] : g.counts) {
    out << sep << n << " " << results::ToString(v);
    sep = ", ";
  }
  if (updating)
    out << " (against the baseline before this update)\n";
  else
    out << (g.failed ? " -> FAILED\n" : " -> passed\n");
}

// What --minify reduces for a failing row: its failure's repro dir, or for a rank of a
// multi-rank dir the whole dir (minifier/ranks.h) with the record's backend and options, once for
// all its ranks. Empty: nothing to minify.
struct MinifySource {
  std::string dir;
  std::optional<std::string> backend;
  std::optional<json> backend_options;
};
MinifySource SourceOf(const GateRow& row, const std::vector<results::Record>& records) {
  if (!row.repro_dir.empty()) return {row.repro_dir, std::nullopt, std::nullopt};
  for (const auto& r : records) {
    if (r.fingerprint != row.fingerprint || !r.distributed || r.repro_input.empty()) continue;
    fs::path world = r.repro_input;  // the rank's dir, inside the multi-rank dir
    if (!distributed::World::IsWorldDir(world)) world = world.parent_path();
    if (distributed::World::IsWorldDir(world)) return {world.string(), r.experiment.backend, r.experiment.backend_options};
  }
  return {};
}

// --minify: each FAIL with a repro dir (or a rank's multi-rank dir) is minified; the culprit op
// and its source line are printed and kept in the gate's rows.
void MinifyFailures(const CiOptions& o, GateResult& g, const std::vector<results::Record>& records, std::ostream& out) {
  std::map<std::string, GateRow> done;  // a multi-rank dir and backend minified for an earlier rank: its row
  for (GateRow& row : g.rows) {
    if (row.verdict != Verdict::kFail) continue;
    const MinifySource src = SourceOf(row, records);
    if (src.dir.empty()) continue;
    const std::string key = src.dir + "\n" + src.backend.value_or("");
    if (auto it = done.find(key); it != done.end()) {
      row.minified_dir = it->second.minified_dir;
      row.culprit_op = it->second.culprit_op;
      row.culprit_source = it->second.culprit_source;
      row.compiler_culprit = it->second.compiler_culprit;
      out << "minify " << row.name << " (" << row.config << "): as " << it->second.name << "\n";
      continue;
    }
    minifier::MinifyOptions mo;
    mo.repro_dir = src.dir;
    mo.backend = src.backend;
    mo.out_dir = minifier::DefaultOutDir(src.dir);
    if (src.backend) mo.out_dir += "-" + *src.backend;
    mo.experiment.backend_options = src.backend_options;
    mo.experiment.cache_dir = o.verify.experiment.cache_dir;
    mo.experiment.imports = o.verify.experiment.imports;
    mo.experiment.jobs = std::max(1, o.verify.experiment.jobs);
    mo.experiment.timeout_s = o.verify.experiment.timeout_s;
    std::error_code ec;
    fs::create_directories(mo.out_dir, ec);
    std::ofstream log(mo.out_dir / "minify.log");
    out << "minify " << row.name << " (" << row.config << "): ";
    auto m = minifier::Minify(mo, log);
    if (!m.ok()) {
      out << "failed: " << m.error().Text() << " (log: " << (mo.out_dir / "minify.log").string() << ")\n";
      continue;
    }
    const json& s = m->summary;
    json culprit = s.value("culprit", json());
    if (culprit.is_null() && s.contains("culprit_ops") && s["culprit_ops"].size() == 1) culprit = s["culprit_ops"][0];
    row.minified_dir = s.value("minified_dir", std::string());
    out << s.value("ops_before", 0) << " -> " << s.value("ops_after", 0) << " ops, " << row.minified_dir << "\n";
    if (culprit.is_object()) {
      row.culprit_op = culprit.value("target", std::string());
      row.culprit_source = ir::ModelLine(culprit.value("stack_trace", std::string()));
      out << "  culprit: " << row.culprit_op << " (%" << culprit.value("node", std::string()) << ")"
          << (row.culprit_source.empty() ? "" : "\n  from: " + row.culprit_source) << "\n";
    }
    if (s.contains("compiler_culprit") && s["compiler_culprit"].contains("sentence")) {
      row.compiler_culprit = s["compiler_culprit"]["sentence"].get<std::string>();
      out << "  compiler: " << row.compiler_culprit << "\n";
    }
    if (src.backend) done[key] = row;
  }
}

}  // namespace

std::string UpdateCommand(const CiOptions& o) {
  std::string cmd = "parity ci --expected " + ShellWord(o.expected.string()) + " --results";
  if (o.results.empty()) cmd += " " + ShellWord((o.verify.output_dir / "results.jsonl").string());
  for (const auto& r : o.results) cmd += " " + ShellWord(r.string());
  return cmd + " --update-expected";
}

Expected<CiOutcome> RunCi(const CiOptions& o, std::ostream& out) {
  PARITY_ASSIGN_OR_RETURN(Baseline baseline, Baseline::Load(o.expected, o.update_expected));
  PARITY_ASSIGN_OR_RETURN(GateScope scope, ScopeOf(o));
  CiOutcome outcome;
  if (o.results.empty()) {
    PARITY_ASSIGN_OR_RETURN(outcome.records, RunMatrix(o, baseline, out));
  } else {
    PARITY_ASSIGN_OR_RETURN(outcome.records, ReadAll(o.results));
  }
  PARITY_RETURN_IF_ERROR(OneProgramPerRow(outcome.records));
  std::set<std::string> configs;
  for (const auto& r : outcome.records) configs.insert(results::ConfigOf(r));
  PARITY_RETURN_IF_ERROR(baseline.LoadConfigs(configs));
  for (const auto& w : baseline.Warnings()) out << "warning: " << w << "\n";
  outcome.gate = Gate(outcome.records, baseline, o.gate, scope);
  PrintVerdicts(outcome.gate, baseline, o.update_expected, out);
  if (o.update_expected) {
    std::set<ConfigModel> missing;
    for (const auto& row : outcome.gate.rows)
      if (row.verdict == Verdict::kMissing) missing.insert({row.config, row.name});
    PARITY_ASSIGN_OR_RETURN(auto changes, baseline.Update(outcome.records, missing));
    for (const auto& c : changes) out << c << "\n";
    if (changes.empty()) out << "baseline unchanged\n";
    out << "baseline statistics: " << baseline.StatsPath().string() << "\n";
    outcome.exit_code = 0;
  } else {
    if (outcome.gate.failed) out << FailureMessage(outcome.gate, UpdateCommand(o));
    outcome.exit_code = outcome.gate.failed ? 1 : 0;
  }
  if (o.minify && !o.update_expected) MinifyFailures(o, outcome.gate, outcome.records, out);
  std::error_code ec;
  fs::create_directories(o.verify.output_dir, ec);
  PARITY_RETURN_IF_ERROR(results::WriteGateFile(o.verify.output_dir / results::kGateFile,
                                                {!outcome.gate.failed, o.expected.string(), outcome.gate.rows}));
  return outcome;
}

}  // namespace parity::ci
