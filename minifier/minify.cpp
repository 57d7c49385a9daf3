#include "minifier/minify.h"

#include <chrono>
#include <cstdio>
#include <functional>
#include <ostream>
#include <thread>

#include "minifier/delta.h"
#include "minifier/outputs.h"
#include "repro/graph_json.h"
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
  // The experiment that runs a candidate of the graph being reduced through the backend, the
  // candidate written to a dir named after its graph (the same graph, the same experiment: a run
  // made ahead of it is found); nullopt when it cannot be written.
  std::optional<std::pair<verifier::ExperimentSpec, fs::path>> CandidateRun(const ir::Graph& g) {
    const std::string text = ir::GraphToText(g);
    char id[17];
    std::snprintf(id, sizeof id, "%016zx", std::hash<std::string>{}(text));
    const fs::path dir = out / "work" / (std::string("scan-") + id);
    verifier::ExperimentSpec spec = state.base;
    spec.repro = fs::absolute(dir).string();
    spec.noise_budgets = verifier::NoiseBudgets::kAlways;  // the scan reports each value against its own noise budget
    const fs::path scratch = out / "work" / (std::string("scan-") + id + "-run");
    if (!ahead.Has(spec, scratch) && !Writer(state.graph_index).Write(g, dir, state.original.ToJson()).ok()) return std::nullopt;
    return std::make_pair(spec, scratch);
  }
  // Candidates of the graph being reduced through the backend as one batch, the whole results
  // in order (a candidate that cannot be written: an error result).
  std::vector<verifier::ExperimentResult> RunCandidates(const std::vector<const ir::Graph*>& gs) {
    verifier::ExperimentBatch batch;
    std::vector<size_t> at;  // each candidate's place in the batch (npos: not written)
    for (const ir::Graph* g : gs) {
      auto run = CandidateRun(*g);
      at.push_back(run ? batch.size() : std::string::npos);
      if (run) batch.push_back(std::move(*run));
    }
    auto results = ahead.RunMany(std::move(batch));
    std::vector<verifier::ExperimentResult> out(gs.size());
    for (size_t i = 0; i < gs.size(); ++i)
      if (at[i] == std::string::npos)
        out[i].error = "minify: the candidate could not be written";
      else
        out[i] = std::move(results.at(at[i]));
    return out;
  }
  AheadRunner ahead{runner};  // what every step runs through (runs made ahead, then the runner)
};

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
    return Timed(s, "reference_values", [&] { return AddReferenceValues(p.repro, entry, s.base.device, p.tensors); });
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
  const auto started = std::chrono::steady_clock::now();
  PARITY_ASSIGN_OR_RETURN(ReproDir repro, ReproDir::Load(opts.repro_dir));
  PARITY_RETURN_IF_ERROR(opts.experiment.Check());
  PARITY_ASSIGN_OR_RETURN(verifier::ExperimentSpec base, verifier::Case::FromRepro(repro, opts.backend, opts.experiment));
  PARITY_RETURN_IF_ERROR(verifier::FindBackend(base.backend));
  // Candidates are judged by the failure's rule; only the calibrated one needs noise budgets.
  base.noise_budgets = base.rule == verifier::kRuleCalibrated ? verifier::NoiseBudgets::kAlways : verifier::NoiseBudgets::kNever;
  const fs::path out = opts.out_dir.empty() ? DefaultOutDir(opts.repro_dir) : opts.out_dir;
  std::error_code ec;
  fs::create_directories(out, ec);
  if (ec) return Error::BadInput("--out " + out.string() + ": " + ec.message());
  // On CUDA the slots' environments verify's runs have (their GPU, a share of host threads). On
  // the CPU every candidate keeps the machine's threads, as a failing `verify -j 1` ran: Inductor
  // generates its CPU kernels for the thread count (and its caches key on it), so a split would
  // compile every candidate afresh, and otherwise than the failure was compiled.
  const bool cuda = base.device.rfind("cuda", 0) == 0;
  auto slot_env = cuda ? verifier::SlotEnvironmentsHere(opts.experiment.jobs, true)
                       : std::vector<std::vector<std::string>>(static_cast<size_t>(std::max(1, opts.experiment.jobs)));
  Pipeline p{opts, repro, out, verifier::IsolatedRunner(out / "work", opts.experiment.timeout_s, std::move(slot_env)), {}, {}};
  // Candidates run one after another in each slot's job server: what a process start costs
  // (libtorch and CUDA initialized, kernels loaded) is paid once per slot, not per candidate.
  if (!opts.fresh_runners) p.runner.UsePersistentRunners();
  {  // while the references are computed; the workers of a dynamo backend warm up for its compile
    auto info = verifier::FindBackend(base.backend);
    const bool compiles = info.ok() && info->needs_worker && !info->dynamo.empty();
    p.runner.Prestart(!info.ok() || info->needs_worker || !base.imports.empty(), compiles ? (cuda ? "cuda" : "cpu") : "");
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
  OutputContext octx{repro, opts, writer, out, [&](const json& req) { return p.runner.Ask(req); }, test->runs(), test->cache_hits(),
                     started, p.runner.runners_started(), p.runner.workers_adopted()};
  PARITY_ASSIGN_OR_RETURN(json summary, WriteOutputs(octx, p.state, log));
  RemoveAll(out / "work");
  return MinifyResult{summary};
}

}  // namespace parity::minifier
