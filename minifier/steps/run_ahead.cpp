#include <ostream>

#include "minifier/passes/passes.h"
#include "minifier/steps/steps.h"

namespace parity::minifier {

namespace {

// The divergence scan's first runs on the original graph, when the steps before it will hand the
// scan that graph unchanged (one graph, eval, the repro dir's recorded failure an accuracy one, no
// calls to inline, the scan on): its first -j segments (each a fraction of the graph's compile:
// measured on two cores with -j 2, resnet's minify 20 s -> 18 s), or, where the graph is too
// small to split, the whole graph's run on a machine with two cores per slot or more (its
// compile, the longest of the minify, then runs beside the others' without slowing them; on
// fewer cores, measured, the compiles only take turns).
experiment::ExperimentBatch ScanAhead(const StepContext& ctx, const ReductionState& state) {
  const auto& graphs = ctx.repro.graphs();
  const nlohmann::json& failure = ctx.repro.manifest().failure;
  const int jobs = ctx.runner.jobs();
  if (!ctx.options.scan || !ctx.candidate_run || graphs.size() != 1) return {};
  const std::string mode = graphs[0].mode.empty() ? state.base.test : graphs[0].mode;
  if (mode != "eval" || !failure.is_object() || failure.value("kind", "") != "accuracy") return {};
  if (!InlinableSubgraphCalls(graphs[0].graph).empty()) return {};
  std::vector<ir::Graph> first = ScanSegments(graphs[0].graph, ScanSegmentCount(jobs), ctx.options.scan_max);
  if (first.size() > static_cast<size_t>(jobs)) first.resize(static_cast<size_t>(jobs));
  if (first.empty() && ctx.cpus >= 2 * jobs)
    if (auto whole = ScanGraph(graphs[0].graph, ctx.options.scan_max)) first.push_back(std::move(*whole));
  experiment::ExperimentBatch batch;
  for (const ir::Graph& g : first)
    if (auto run = ctx.candidate_run(g)) batch.push_back(std::move(*run));
  return batch;
}

}  // namespace

Status RunAhead(StepContext& ctx, ReductionState& state) {
  if (ctx.ahead == nullptr || ctx.check || ctx.runner.jobs() < 2) return Status::Ok();
  experiment::ExperimentBatch batch;
  for (auto& run : ScanAhead(ctx, state)) batch.push_back(std::move(run));
  for (auto& run : ConfirmBatch(ctx, state)) batch.push_back(std::move(run));
  if (ctx.options.stage_bisect)
    for (auto& run : StageBatch(ctx, state)) batch.push_back(std::move(run));
  ctx.ahead->RunAhead(std::move(batch));
  return Status::Ok();
}

}  // namespace parity::minifier
