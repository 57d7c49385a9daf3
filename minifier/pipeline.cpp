#include "minifier/pipeline.h"

#include <cstdio>
#include <functional>
#include <thread>

#include "repro/graph_json.h"
#include "repro/graph_text.h"
#include "experiment/backend.h"

namespace parity::minifier {
namespace fs = std::filesystem;
using nlohmann::json;

StepContext Pipeline::Context(std::ostream& log) {
  StepContext ctx{
      repro,        o,      ahead, log, [this](size_t gi) { return Test(gi, "graph" + std::to_string(gi)); }, nullptr,
      out / "work", nullptr};
  if (!o.check_command.empty())
    ctx.check = CheckCommandJudge(o.check_command, o.experiment.jobs, o.experiment.timeout_s);
  else {
    ctx.run_candidates = [this](const std::vector<const ir::Graph*>& gs) { return RunCandidates(gs); };
    ctx.candidate_run = [this](const ir::Graph& g) { return CandidateRun(g); };
    ctx.ahead = &ahead;
  }
  ctx.cpus = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  ctx.ask = [this](const json& req) { return runner.Ask(req); };
  ctx.write_graph = [this](const ir::Graph& g, const fs::path& dir) {
    return Writer(state.graph_index).Write(g, dir, state.original.ToJson());
  };
  return ctx;
}

std::optional<std::pair<experiment::ExperimentSpec, fs::path>> Pipeline::CandidateRun(const ir::Graph& g) {
  const std::string text = ir::GraphToText(g);
  char id[17];
  std::snprintf(id, sizeof id, "%016zx", std::hash<std::string>{}(text));
  const fs::path dir = out / "work" / (std::string("scan-") + id);
  experiment::ExperimentSpec spec = state.base;
  spec.repro = fs::absolute(dir).string();
  spec.noise_budgets = experiment::NoiseBudgets::kAlways;  // the scan reports each value against its own noise budget
  const fs::path scratch = out / "work" / (std::string("scan-") + id + "-run");
  if (!ahead.Has(spec, scratch) && !Writer(state.graph_index).Write(g, dir, state.original.ToJson()).ok()) return std::nullopt;
  return std::make_pair(spec, scratch);
}

std::vector<experiment::ExperimentResult> Pipeline::RunCandidates(const std::vector<const ir::Graph*>& gs) {
  experiment::ExperimentBatch batch;
  std::vector<size_t> at;  // each candidate's place in the batch (npos: not written)
  for (const ir::Graph* g : gs) {
    auto run = CandidateRun(*g);
    at.push_back(run ? batch.size() : std::string::npos);
    if (run) batch.push_back(std::move(*run));
  }
  auto results = ahead.RunMany(std::move(batch));
  std::vector<experiment::ExperimentResult> out(gs.size());
  for (size_t i = 0; i < gs.size(); ++i)
    if (at[i] == std::string::npos)
      out[i].error = "minify: the candidate could not be written";
    else
      out[i] = std::move(results.at(at[i]));
  return out;
}

std::vector<std::vector<std::string>> SlotEnvironments(const MinifyOptions& o, const experiment::ExperimentSpec& base) {
  if (base.device.rfind("cuda", 0) == 0) return experiment::SlotEnvironmentsHere(o.experiment.jobs, true);
  return std::vector<std::vector<std::string>>(static_cast<size_t>(std::max(1, o.experiment.jobs)));
}

void StartRunner(experiment::IsolatedRunner& runner, const MinifyOptions& o, const experiment::ExperimentSpec& base) {
  if (!o.fresh_runners) runner.UsePersistentRunners();
  const bool cuda = base.device.rfind("cuda", 0) == 0;
  auto info = experiment::FindBackend(base.backend);
  runner.Prestart(!info.ok() || info->needs_worker || !base.imports.empty(), experiment::WarmDevice({base.backend}, cuda ? "cuda" : "cpu"));
}

}  // namespace parity::minifier
