#include "minifier/minify.h"

#include <chrono>
#include <ostream>

#include "minifier/delta.h"
#include "minifier/outputs.h"
#include "minifier/steps/steps.h"
#include "util/files.h"
#include "verifier/backend.h"
#include "runtime/host_ops.h"
#include "verifier/case.h"

namespace parity::minifier {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// One minify run's pieces: the runner, the tensors candidates read, a writer and test per graph.
struct Pipeline {
  const MinifyOptions& o;
  const ReproDir& repro;
  const fs::path out;
  verifier::IsolatedRunner runner;
  std::map<std::string, at::Tensor> tensors;
  ReductionState state;

  CandidateWriter Writer(size_t gi) const {
    const GraphEntry& g = repro.graphs()[gi];
    Manifest m = repro.manifest();
    m.backend = state.base.backend;
    m.backend_options = state.base.backend_options;
    return CandidateWriter(m, g, tensors);
  }
  DirJudge Judge(const std::string& name) {
    if (!o.check_command.empty()) return CheckCommandJudge(o.check_command, o.experiment.jobs, o.experiment.timeout_s);
    return BackendJudge(runner, state.base, state.original, out / "work" / name);
  }
  std::unique_ptr<Interestingness> Test(size_t gi, const std::string& name) {
    return std::make_unique<CandidateTest>(Writer(gi), Judge(name), out / "work" / name, state.original.ToJson());
  }
  void Checkpoint(const ir::Graph& g) const { state.SaveCheckpoint(out, Writer(state.graph_index), g); }
  StepContext Context(std::ostream& log) {
    StepContext ctx{
        repro,        o,      runner, log, [this](size_t gi) { return Test(gi, "graph" + std::to_string(gi)); }, nullptr,
        out / "work", nullptr};
    if (!o.check_command.empty())
      ctx.check = CheckCommandJudge(o.check_command, o.experiment.jobs, o.experiment.timeout_s);
    else
      ctx.run_candidate = [this](const ir::Graph& g) { return RunCandidate(g); };
    ctx.ask = [this](const json& req) { return runner.Ask(req); };
    ctx.write_graph = [this](const ir::Graph& g, const fs::path& dir) {
      return Writer(state.graph_index).Write(g, dir, state.original.ToJson());
    };
    return ctx;
  }
  // One candidate of the graph being reduced through the backend, the whole result.
  verifier::ExperimentResult RunCandidate(const ir::Graph& g) {
    const fs::path dir = out / "work" / ("scan" + std::to_string(scans));
    const fs::path scratch = out / "work" / ("scan" + std::to_string(scans++) + "-run");
    if (Status st = Writer(state.graph_index).Write(g, dir, state.original.ToJson()); !st.ok()) {
      verifier::ExperimentResult r;
      r.error = st.error().message;
      return r;
    }
    verifier::ExperimentSpec spec = state.base;
    spec.repro = fs::absolute(dir).string();
    spec.noise_budget = true;  // the scan reports each value against its own noise budget
    verifier::ExperimentBatch batch;
    batch.emplace_back(spec, scratch);
    return runner.RunMany(std::move(batch)).at(0);
  }
  int scans = 0;
};

// Confirm, stage and graph bisection, then the divergence scan or node bisection; checkpointed
// at the end.
Status Bisect(Pipeline& p, std::ostream& log) {
  StepContext ctx = p.Context(log);
  PARITY_RETURN_IF_ERROR(Confirm(ctx, p.state));
  if (p.o.stage_bisect && p.o.check_command.empty()) PARITY_RETURN_IF_ERROR(StageBisect(ctx, p.state));
  PARITY_RETURN_IF_ERROR(GraphBisect(ctx, p.state));
  const GraphEntry& entry = p.repro.graphs()[p.state.graph_index];
  PARITY_RETURN_IF_ERROR(AddReferenceValues(p.repro, entry, p.state.base.device, p.tensors));
  auto test = p.Test(p.state.graph_index, "nodes");
  PARITY_RETURN_IF_ERROR(InlineSubgraphsStep(ctx, p.state, *test));
  PARITY_RETURN_IF_ERROR(DivergenceScan(ctx, p.state, *test));
  if (p.state.culprit.is_null()) PARITY_RETURN_IF_ERROR(NodeBisect(ctx, p.state, *test));
  p.state.backend_runs += test->runs();
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
  const auto started = std::chrono::steady_clock::now();
  PARITY_ASSIGN_OR_RETURN(ReproDir repro, ReproDir::Load(opts.repro_dir));
  PARITY_RETURN_IF_ERROR(opts.experiment.Check());
  PARITY_ASSIGN_OR_RETURN(verifier::ExperimentSpec base, verifier::Case::FromRepro(repro, opts.backend, opts.experiment));
  PARITY_RETURN_IF_ERROR(verifier::FindBackend(base.backend));
  // Candidates are judged by the failure's rule; only the calibrated one needs noise budgets.
  base.noise_budget = base.rule == verifier::kRuleCalibrated;
  const fs::path out = opts.out_dir.empty() ? DefaultOutDir(opts.repro_dir) : opts.out_dir;
  std::error_code ec;
  fs::create_directories(out, ec);
  if (ec) return Error::BadInput("--out " + out.string() + ": " + ec.message());
  Pipeline p{opts, repro, out, verifier::IsolatedRunner(out / "work", opts.experiment.timeout_s, opts.experiment.jobs), {}, {}};
  // Candidates run one after another in each slot's job server: what a process start costs
  // (libtorch and CUDA initialized, kernels loaded) is paid once per slot, not per candidate.
  if (!opts.fresh_runners) p.runner.UsePersistentRunners();
  {
    auto info = verifier::FindBackend(base.backend);
    p.runner.Prestart(!info.ok() || info->needs_worker || !base.imports.empty());  // while the references are computed
  }
  for (const auto& info : repro.tensors().tensors()) p.tensors[info.name] = *repro.tensors().Get(info.name);
  // Host ops run in this process too (the reference values), through the runner's worker.
  PARITY_RETURN_IF_ERROR(runtime::PrepareHostOps(repro, base.imports, [&p](const json& req) { return p.runner.Ask(req); }));
  p.state.source = base.repro;
  p.state.base = base;
  if (auto resumed = ReductionState::LoadCheckpoint(out, base, repro.graphs().size())) {
    p.state = std::move(*resumed);
    log << "resuming from " << (out / "checkpoint").string() << " (signature: " << p.state.original.Describe() << ")\n";
    PARITY_RETURN_IF_ERROR(AddReferenceValues(repro, repro.graphs()[p.state.graph_index], base.device, p.tensors));
  } else {
    PARITY_RETURN_IF_ERROR(Bisect(p, log));
  }
  auto test = p.Test(p.state.graph_index, "candidates");
  p.state.current = RunPassesToFixedPoint(
      std::move(*p.state.current), *test, opts.experiment.jobs, [&](const ir::Graph& g) { p.Checkpoint(g); }, p.state.passes, log);
  if (opts.compiler_bisect && opts.check_command.empty()) {
    StepContext ctx = p.Context(log);
    PARITY_RETURN_IF_ERROR(CompilerBisect(ctx, p.state));
  }
  const CandidateWriter writer = p.Writer(p.state.graph_index);
  OutputContext octx{repro, opts, writer, out, [&](const json& req) { return p.runner.Ask(req); }, test->runs(), test->cache_hits(),
                     started, p.runner.runners_started()};
  PARITY_ASSIGN_OR_RETURN(json summary, WriteOutputs(octx, p.state, log));
  RemoveAll(out / "work");
  return MinifyResult{summary};
}

}  // namespace parity::minifier
