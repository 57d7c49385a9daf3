#include "minifier/minify.h"
#include "minifier/ranks.h"
#include "distributed/world.h"

#include <chrono>
#include <ostream>

#include "host_ops/host_ops.h"
#include "minifier/delta.h"
#include "minifier/outputs.h"
#include "minifier/pipeline.h"
#include "minifier/steps/steps.h"
#include "util/files.h"
#include "experiment/backend.h"
#include "experiment/case.h"

namespace parity::minifier {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// Runs one step and appends its wall time to state.step_seconds (what the summary shows).
template <typename Fn>
Status Timed(ReductionState& state, const char* name, Fn&& step) {
  const auto t0 = std::chrono::steady_clock::now();
  Status st = step();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  state.step_seconds.push_back({{"step", name}, {"seconds", s}});
  return st;
}

// Confirm, stage and graph bisection, then the divergence scan or node bisection; checkpointed
// at the end.
Status Bisect(Pipeline& p, std::ostream& log) {
  StepContext ctx = p.Context(log);
  ReductionState& s = p.state;
  // The reference's values of the graph reduced feed cut candidates (the scan's segments made
  // ahead among them): known at once when the repro dir has one graph, else after graph bisection.
  auto reference_values = [&] {
    const GraphEntry& entry = p.repro.graphs()[s.graph_index];
    return Timed(s, "reference_values", [&] { return AddReferenceValues(p.repro, entry, s.base.device, p.tensors, &log); });
  };
  const bool one_graph = p.repro.graphs().size() == 1;
  if (one_graph) PARITY_RETURN_IF_ERROR(reference_values());
  PARITY_RETURN_IF_ERROR(Timed(s, "run_ahead", [&] { return RunAhead(ctx, s); }));
  PARITY_RETURN_IF_ERROR(Timed(s, "confirm", [&] { return Confirm(ctx, s); }));
  if (p.o.stage_bisect && p.o.check_command.empty())
    PARITY_RETURN_IF_ERROR(Timed(s, "stage_bisect", [&] { return StageBisect(ctx, s); }));
  PARITY_RETURN_IF_ERROR(Timed(s, "graph_bisect", [&] { return GraphBisect(ctx, s); }));
  if (!one_graph) PARITY_RETURN_IF_ERROR(reference_values());
  auto test = p.Test(s.graph_index, "nodes");
  PARITY_RETURN_IF_ERROR(Timed(s, "inline_subgraphs", [&] { return InlineSubgraphsStep(ctx, s, *test); }));
  PARITY_RETURN_IF_ERROR(Timed(s, "divergence_scan", [&] { return DivergenceScan(ctx, s, *test); }));
  if (s.culprit.is_null()) PARITY_RETURN_IF_ERROR(Timed(s, "node_bisect", [&] { return NodeBisect(ctx, s, *test); }));
  p.state.backend_runs += test->runs() + p.ahead.DropUnused();  // runs made ahead count whether used or not
  p.Checkpoint(*p.state.current);
  return Status::Ok();
}

}  // namespace

fs::path DefaultOutDir(const fs::path& repro_dir) {
  fs::path dir = repro_dir;
  while (dir.has_filename() == false && dir.has_parent_path() && dir != dir.root_path()) dir = dir.parent_path();  // "DIR/"
  return fs::path(dir.string() + "-minify");
}

Expected<MinifyResult> Minify(const MinifyOptions& opts, std::ostream& log) {
  if (distributed::World::IsWorldDir(opts.repro_dir)) return MinifyRanks(opts, log);
  const auto started = std::chrono::steady_clock::now();
  PARITY_ASSIGN_OR_RETURN(ReproDir repro, ReproDir::Load(opts.repro_dir));
  PARITY_RETURN_IF_ERROR(opts.experiment.Check());
  PARITY_ASSIGN_OR_RETURN(experiment::ExperimentSpec base, experiment::Case::FromRepro(repro, opts.backend, opts.experiment));
  PARITY_RETURN_IF_ERROR(experiment::FindBackend(base.backend));
  // Candidates are judged by the failure's rule; only the calibrated one needs noise budgets.
  base.noise_budgets = base.rule == experiment::kRuleCalibrated ? experiment::NoiseBudgets::kAlways : experiment::NoiseBudgets::kNever;
  const fs::path out = opts.out_dir.empty() ? DefaultOutDir(opts.repro_dir) : opts.out_dir;
  std::error_code ec;
  fs::create_directories(out, ec);
  if (ec) return Error::BadInput("--out " + out.string() + ": " + ec.message());
  Pipeline p{opts, repro, out, experiment::IsolatedRunner(out / "work", opts.experiment.timeout_s, SlotEnvironments(opts, base)), {}, {}};
  StartRunner(p.runner, opts, base);  // its workers start beside the references
  for (const auto& info : repro.tensors().tensors()) p.tensors[info.name] = *repro.tensors().Get(info.name);
  // Host ops run in this process too (the reference values), through the runner's worker.
  PARITY_RETURN_IF_ERROR(host_ops::PrepareHostOps(repro, base.imports, [&p](const json& req) { return p.runner.Ask(req); }));
  p.state.source = base.repro;
  p.state.base = base;
  if (auto resumed = ReductionState::LoadCheckpoint(out, base, repro.graphs().size())) {
    p.state = std::move(*resumed);
    log << "resuming from " << (out / "checkpoint").string() << " (signature: " << p.state.original.Describe() << ")\n";
    PARITY_RETURN_IF_ERROR(AddReferenceValues(repro, repro.graphs()[p.state.graph_index], base.device, p.tensors, &log));
  } else {
    PARITY_RETURN_IF_ERROR(Bisect(p, log));
  }
  auto test = p.Test(p.state.graph_index, "candidates");
  (void)Timed(p.state, "delta_passes", [&] {
    p.state.current = RunPassesToFixedPoint(
        std::move(*p.state.current), *test, opts.experiment.jobs, [&](const ir::Graph& g) { p.Checkpoint(g); }, p.state.passes, log);
    return Status::Ok();
  });
  if (opts.compiler_bisect && opts.check_command.empty()) {
    StepContext ctx = p.Context(log);
    PARITY_RETURN_IF_ERROR(Timed(p.state, "compiler_bisect", [&] { return CompilerBisect(ctx, p.state); }));
  }
  const CandidateWriter writer = p.Writer(p.state.graph_index);
  OutputContext octx{repro, opts, writer, out, test->runs(), test->cache_hits(), started, p.runner.runners_started(),
                     p.runner.workers_adopted()};
  PARITY_ASSIGN_OR_RETURN(json summary, WriteOutputs(octx, p.state, log));
  RemoveAll(out / "work");
  return MinifyResult{summary};
}

}  // namespace parity::minifier
