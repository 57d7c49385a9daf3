#include <ostream>

#include "minifier/passes/passes.h"
#include "minifier/steps/steps.h"

namespace parity::minifier {

namespace {

// The divergence scan's run of the original graph, when the steps before it will hand the scan
// that graph unchanged (one graph, eval, the repro dir's recorded failure an accuracy one, no
// calls to inline, the scan on) and the machine has two cores per slot or more: its compile, the
// longest of the minify, then runs beside the others' without slowing them (on fewer cores,
// measured: two slots on two cores, the compiles only take turns).
std::optional<std::pair<verifier::ExperimentSpec, std::filesystem::path>> ScanAhead(const StepContext& ctx,
                                                                                     const ReductionState& state) {
  const auto& graphs = ctx.repro.graphs();
  const nlohmann::json& failure = ctx.repro.manifest().failure;
  if (!ctx.options.scan || !ctx.candidate_run || graphs.size() != 1 || ctx.cpus < 2 * ctx.runner.jobs()) return std::nullopt;
  const std::string mode = graphs[0].mode.empty() ? state.base.test : graphs[0].mode;
  if (mode != "eval" || !failure.is_object() || failure.value("kind", "") != "accuracy") return std::nullopt;
  if (!InlinableSubgraphCalls(graphs[0].graph).empty()) return std::nullopt;
  auto scan = ScanGraph(graphs[0].graph, ctx.options.scan_max);
  if (!scan) return std::nullopt;
  return ctx.candidate_run(*scan);
}

}  // namespace

Status RunAhead(StepContext& ctx, ReductionState& state) {
  if (ctx.ahead == nullptr || ctx.check || ctx.runner.jobs() < 2) return Status::Ok();
  verifier::ExperimentBatch batch;
  if (auto scan = ScanAhead(ctx, state)) batch.push_back(std::move(*scan));
  for (auto& run : ConfirmBatch(ctx, state)) batch.push_back(std::move(run));
  if (ctx.options.stage_bisect)
    for (auto& run : StageBatch(ctx, state)) batch.push_back(std::move(run));
  ctx.ahead->RunAhead(std::move(batch));
  return Status::Ok();
}

}  // namespace parity::minifier
