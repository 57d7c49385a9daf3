#include "minifier/outputs.h"

#include <algorithm>
#include <ostream>
#include <sstream>

#include "compare/budget.h"
#include "host_ops/approval.h"
#include "repro/graph_json.h"
#include "repro/graph_text.h"
#include "runtime/worker.h"
#include "runtime/tool_script.h"
#include "util/files.h"
#include "experiment/backend.h"
#include "experiment/case.h"

namespace parity::minifier {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// From the divergence scan: the first value (graph order) further from fp64 than its own noise
// budget, as the justification names it; null when the scan measured none beyond.
json FirstBeyondBudget(const json& divergence, const ir::Graph& original) {
  if (!divergence.is_array()) return nullptr;
  for (const auto& e : divergence) {
    if (!e.contains("budgets") || e["budgets"].get<double>() <= 1.0) continue;
    json f = {{"node", e["node"]}, {"target", e["target"]}, {"budgets", e["budgets"]}};
    std::string where;
    if (const ir::Node* n = original.Find(e["node"].get<std::string>()); n != nullptr) {
      if (!n->module_path.empty()) where = " in " + n->module_path;
      if (std::string line = ir::ModelLine(n->stack_trace); !line.empty()) where += ", " + line;
    }
    f["sentence"] = "the first value to leave its own noise budget is %" + e["node"].get<std::string>() + " (" +
                    e["target"].get<std::string>() + where + "), " + compare::BudgetsText(e["budgets"].get<double>()) + " from fp64";
    return f;
  }
  return nullptr;
}

json Summary(const OutputContext& ctx, const ReductionState& s, const fs::path& minified) {
  const GraphEntry& entry = ctx.repro.graphs()[s.graph_index];
  const ir::Graph& g = *s.current;
  json culprits = json::array();
  for (const ir::Node* n : g.ops()) culprits.push_back(NodeInfo(n));
  json j = {{"source", s.source},
            {"backend", s.base.backend},
            {"backend_options", s.base.backend_options},
            {"tol", experiment::EffectiveTolerance(s.base)},
            {"rule", s.base.rule},
            {"strict", !ctx.options.experiment.ignore_non_fp},
            {"confirm", s.confirm},
            {"signature", s.original.ToJson()},
            {"graph", entry.name},
            {"nodes_before", entry.graph.size()},
            {"ops_before", entry.graph.ops().size()},
            {"nodes_after", g.size()},
            {"ops_after", g.ops().size()},
            {"culprit_ops", culprits},
            {"backend_runs", s.backend_runs + ctx.test_runs},
            {"cache_hits", ctx.cache_hits},
            {"runners_started", ctx.runners_started},
            {"workers_adopted", ctx.workers_adopted},
            {"passes", s.passes},
            {"minified_dir", fs::absolute(minified).string()},
            {"graph_text", ir::GraphToText(g)}};
  if (!s.stages.is_null()) {
    j["stages"] = s.stages;
    j["first_failing_stage"] = s.first_failing_stage;
  }
  if (!s.culprit.is_null()) j["culprit"] = s.culprit;
  if (!s.localization.is_null()) j["localization"] = s.localization;
  if (!s.divergence.is_null()) j["divergence"] = s.divergence;
  if (json f = FirstBeyondBudget(s.divergence, entry.graph); !f.is_null()) j["first_beyond_budget"] = f;
  if (!s.compiler_culprit.is_null()) j["compiler_culprit"] = s.compiler_culprit;
  if (!s.inlined.empty()) j["inlined"] = s.inlined;
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - ctx.started).count();
  j["wall_time_s"] = wall;
  j["step_seconds"] = s.step_seconds;
  // The cost of one run: the wall time over the backend runs (a run is a child process: eager
  // twice, fp64 and the backend, its compile included), what the minifier's speed rests on.
  const int runs = j["backend_runs"].get<int>();
  j["seconds_per_backend_run"] = runs > 0 ? wall / runs : 0.0;
  return j;
}

// The modules repro.py imports first: --import's (the backend's plugins) and those registering
// the host ops the minimum still calls (approved by --import or the config's allow-list).
std::vector<std::string> ScriptImports(const fs::path& minified) {
  std::vector<std::string> modules = runtime::ImportModules();
  if (auto repro = ReproDir::Load(minified); repro.ok())
    for (const auto& m : host_ops::HostOpModules(*repro))
      if (std::find(modules.begin(), modules.end(), m) == modules.end()) modules.push_back(m);
  return modules;
}

// repro.py from the Python package (parity_capture.standalone), which also holds the one
// Python copy of the comparison rules: written by its torch-free script, no worker needed.
Status WriteReproScript(const ReductionState& s, const fs::path& minified, const fs::path& out) {
  PARITY_ASSIGN_OR_RETURN(experiment::BackendInfo info, experiment::FindBackend(s.base.backend));
  json req = {{"repro", fs::absolute(minified).string()}, {"dynamo_backend", info.dynamo},
              {"imports", ScriptImports(minified)}, {"out", fs::absolute(minified / "repro.py").string()}};
  if (!s.compiler_culprit.is_null()) req["compiler_culprit"] = s.compiler_culprit;
  return runtime::RunToolScript("repro_script", {req.dump()}, out / "repro_script.log");
}

// "time: run_ahead 11.2 s, divergence_scan 2.5 s, ...\n": the steps that took a tenth of a second or more.
std::string StepTimes(const json& steps) {
  std::ostringstream out;
  for (const auto& step : steps) {
    const double s = step.value("seconds", 0.0);
    if (s >= 0.1)
      out << (out.tellp() == 0 ? "time: " : ", ") << step.value("step", "") << " " << static_cast<int>(s * 10) / 10.0 << " s";
  }
  if (out.tellp() > 0) out << "\n";
  return out.str();
}

void Report(const json& summary, const ReductionState& s, const fs::path& minified, std::ostream& log) {
  log << "\nminified " << summary["graph"].get<std::string>() << ": " << summary["ops_before"] << " ops -> "
      << summary["ops_after"] << " ops, " << summary["backend_runs"] << " backend runs, "
      << static_cast<int>(summary["wall_time_s"].get<double>()) << " s ("
      << static_cast<int>(summary["seconds_per_backend_run"].get<double>() * 10) / 10.0 << " s per run)\n"
      << StepTimes(s.step_seconds)
      << summary["graph_text"].get<std::string>();
  for (const ir::Node* n : s.current->ops())
    if (!n->stack_trace.empty()) log << "%" << n->name() << " comes from:\n" << n->stack_trace << "\n";
  if (summary.contains("first_beyond_budget")) log << "noise budgets: " << summary["first_beyond_budget"]["sentence"].get<std::string>() << "\n";
  if (!s.compiler_culprit.is_null()) log << s.compiler_culprit["sentence"].get<std::string>() << "\n";
  log << "repro dir: " << minified.string() << "\nstandalone script: " << (minified / "repro.py").string() << "\n";
}

}  // namespace

json FailureRecord(const ReductionState& state) {
  json f = state.original.ToJson();
  f["tol"] = experiment::EffectiveTolerance(state.base);
  f["rule"] = state.base.rule;
  return f;
}

Expected<json> WriteOutputs(const OutputContext& ctx, const ReductionState& s, std::ostream& log) {
  const fs::path minified = ctx.out / "minified";
  PARITY_RETURN_IF_ERROR(ctx.writer.Write(*s.current, minified, FailureRecord(s)));
  PARITY_RETURN_IF_ERROR(WriteReproScript(s, minified, ctx.out));
  json summary = Summary(ctx, s, minified);
  PARITY_RETURN_IF_ERROR(WriteFileAtomic(ctx.out / "summary.json", summary.dump(2) + "\n"));
  Report(summary, s, minified, log);
  return summary;
}

}  // namespace parity::minifier
