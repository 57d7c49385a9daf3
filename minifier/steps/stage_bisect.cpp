#include <ostream>

#include "minifier/steps/steps.h"
#include "experiment/backend.h"

namespace parity::minifier {

namespace {

// The compilation stages before a backend, in PyTorch's order (the minifier's
// TORCHDYNAMO_REPRO_AFTER levels): what each one adds names the layer at fault.
constexpr const char* kStages[] = {"aot_eager", "aot_eager_decomp_partition"};

std::string Layer(const std::string& stage, const std::string& backend) {
  if (stage == "aot_eager") return "AOTAutograd (functionalization/tracing)";
  if (stage == "aot_eager_decomp_partition") return "decompositions or the partitioner";
  return "the backend's compiler/runtime (" + backend + ")";
}

}  // namespace

experiment::ExperimentBatch StageBatch(const StepContext& ctx, const ReductionState& state) {
  experiment::ExperimentBatch batch;
  // A backend parity runs itself (the interpreter, fault injection) goes through none of
  // PyTorch's compile stages: nothing to bisect, and no worker to start for the stages' runs.
  auto info = experiment::FindBackend(state.base.backend);
  if (info.ok() && !info->needs_worker) return batch;
  for (const char* stage : kStages) {
    if (stage == state.base.backend) break;
    auto s = state.base;
    s.backend = stage;
    s.backend_options = nlohmann::json::object();
    s.repro = state.source;
    batch.emplace_back(s, ctx.scratch / (std::string("stage-") + stage));
  }
  return batch;
}

Status StageBisect(StepContext& ctx, ReductionState& state) {
  const std::string& backend = state.base.backend;
  experiment::ExperimentBatch batch = StageBatch(ctx, state);
  std::vector<std::string> names;
  for (const auto& [spec, dir] : batch) names.push_back(spec.backend);
  const auto results = ctx.runner.RunMany(std::move(batch));
  state.backend_runs += static_cast<int>(results.size());
  state.stages = nlohmann::json::array();
  state.first_failing_stage = backend;
  for (size_t i = 0; i < results.size(); ++i) {
    const bool matches = Signature::FromResult(results[i]).Matches(state.original);
    state.stages.push_back({{"stage", names[i]}, {"code", experiment::ToString(results[i].code)}, {"matches", matches}});
    if (matches && state.first_failing_stage == backend) state.first_failing_stage = names[i];
  }
  state.stages.push_back({{"stage", backend}, {"code", "FAIL/original"}, {"matches", true}});
  ctx.log << "first failing stage: " << state.first_failing_stage << " -> " << Layer(state.first_failing_stage, backend) << "\n";
  return Status::Ok();
}

}  // namespace parity::minifier
