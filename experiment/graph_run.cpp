// A graph's runs: at each shape the reference (eager twice, fp64) here, the backend beside it
// (or here), results off the device as they come (flow_state.h).
#include <ATen/Context.h>
#include <ATen/Parallel.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "compare/budget.h"
#include "compare/same.h"
#include "interpreter/interpreter.h"
#include "host_ops/host_ops.h"
#include "runtime/jobs.h"
#include "runtime/worker.h"
#include "util/files.h"
#include "experiment/backend.h"
#include "experiment/calibration.h"
#include "experiment/case.h"
#include "experiment/devices.h"
#include "experiment/experiment.h"
#include "experiment/judge.h"
#include "experiment/phase_clock.h"
#include "experiment/reference.h"
#include "experiment/reference_threads.h"
#include "experiment/shapes.h"
#include "experiment/flow_state.h"


namespace parity::experiment::flow {

namespace {

using Clock = std::chrono::steady_clock;

// A graph's tolerance: --tol (or the failure's), else the suite default for the mode and
// dtype the program ran that graph in.
double GraphTolerance(const ExperimentSpec& spec, const GraphEntry& graph) {
  if (spec.tol) return *spec.tol;
  const std::string dtype = graph.dtype.empty() ? spec.dtype : graph.amp.empty() ? graph.dtype : "amp";
  return DefaultTolerance(spec.suite, graph.mode.empty() ? spec.test : graph.mode, dtype);
}

// Eager twice: as PyTorch's benchmark runner, bitwise on CUDA; on the CPU, same()'s default
// tolerance (threaded CPU BLAS may reorder reductions between two runs of the same process).
// Says where the two runs differ, nothing when they agree.
std::optional<std::string> Nondeterministic(const NamedTensors& a, const NamedTensors& b, bool cuda, const std::string& prefix) {
  compare::SameOptions exact;
  exact.tol = cuda ? 0.0 : 1e-4;
  exact.equal_nan = true;
  exact.compute_stats = false;
  for (size_t k = 0; k < a.size(); ++k) {
    auto v = compare::SameTensor(a[k].second, b[k].second, std::nullopt, exact);
    if (!v.pass) return "eager runs differ on " + prefix + a[k].first + ": " + v.message;
  }
  return std::nullopt;
}

// `graph`: the failing graph's name in a dir of several ("" in a dir of one), said before the error.
Stop BackendFailed(Flow& f, const Error& e, const std::string& graph) {
  if (e.kind == ErrorKind::kUnsupported) return Early(f, Code::kVerifierSkipped, e.message);
  // The worker's Python exception keeps its type and traceback; a C++ failure is a RuntimeError.
  f.r.exception_type = e.exception_type.empty() ? "RuntimeError" : e.exception_type;
  f.r.traceback = e.traceback;
  f.r.failed_graph = graph;
  return Early(f, Code::kExceptionRaised, (graph.empty() ? "" : graph + ": ") + e.Text());
}

}  // namespace

// The types a graph's runs keep (GraphRuns outlives a step: a prepared experiment holds them).

// One shape of a graph: the recorded call's (the capture itself), or a --shapes variant.
struct Shape {
  std::string label;  // "" for the recorded shape, else "[s77=12]"
  const ReproDir* repro;
  const GraphEntry* graph;
  sym::Bindings symbols;
};

namespace {

// The shapes a graph runs at: the recorded one, and for a symbolic graph under --shapes sweep
// its variants, written into the experiment's work dir (kept in f.variants).
Expected<std::vector<Shape>> ShapesOf(Flow& f, const ExperimentContext& ctx, const GraphEntry& graph) {
  sym::Bindings recorded;
  for (const auto& [name, sy] : graph.graph.symbols) recorded[name] = sy.hint;
  std::vector<Shape> shapes = {{"", ctx.repro, &graph, recorded}};
  // A train graph with the gradients its program fed back sweeps where they fit every size (a
  // scalar loss's); gradients of outputs with symbolic sizes hold at the recorded sizes only.
  if (!graph.graph.symbolic() || f.spec.sweep <= 0 || !TangentsFitEveryShape(graph)) return shapes;
  int k = 0;
  for (const auto& point : SweepPoints(graph.graph, f.spec.sweep)) {
    const std::filesystem::path dir = ctx.work_dir / ("shape" + std::to_string(k) + "-" + FileNameSlug(graph.name));
    PARITY_RETURN_IF_ERROR(WriteShapeVariant(*ctx.repro, graph, point, ShapeSeed(point), dir));
    ++k;
    PARITY_ASSIGN_OR_RETURN(ReproDir v, ReproDir::Load(dir));
    f.variants.push_back(std::move(v));
    shapes.push_back({"[" + PointLabel(point) + "]", &f.variants.back(), &f.variants.back().graphs().at(0), point});
  }
  return shapes;
}

// The backend's compile and first run of one graph, in a thread of its own while the reference
// runs here (Backend::RunsApart), with the moments it reached: when the worker listened (a
// worker still starting is waited for first), when the run was back.
//
// `after_reference` (the CPU): only the worker's start overlaps the reference; the compile and
// first run wait for ReferenceDone. Both sides' intra-op thread pools on the same cores slowed the
// reference several-fold when the worker was warm at once (a kept one: the eager reference of a
// BERT train step went from 0.8 s to 5.3 s on a 2-core CPU).
class BackendBeside {
 public:
  BackendBeside(Backend& backend, std::vector<ExperimentContext> contexts, bool after_reference)
      : contexts_(std::move(contexts)), after_reference_(after_reference), thread_([this, &backend] { Work(backend); }) {}
  ~BackendBeside() {
    ReferenceDone();
    if (thread_.joinable()) thread_.join();
  }
  // The reference has run (or will not): a compile waiting for it starts.
  void ReferenceDone() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      reference_done_ = true;
    }
    cv_.notify_all();
  }
  // Whether the worker has answered (a kept one at once; a starting one once its imports are done).
  bool Listening() const { return listening_flag_.load(); }
  // Waits for the runs; `clock` splits the wait by what the worker was doing then.
  Expected<std::vector<BackendRun>> Join(PhaseClock& clock) {
    ReferenceDone();
    thread_.join();
    clock.SplitWait({{listening_, "worker_start"}, {done_, "compile"}});
    return std::move(runs_);
  }

 private:
  void Work(Backend& backend) {
    Status connected = runtime::ConnectWorker();
    listening_ = Clock::now();
    listening_flag_ = true;
    if (after_reference_) {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return reference_done_; });
    }
    if (!connected.ok()) {
      runs_ = connected.error();
    } else if (contexts_.size() == 1) {
      auto run = backend.Run(contexts_[0]);
      if (run.ok())
        runs_ = std::vector<BackendRun>{std::move(*run)};
      else
        runs_ = run.error();
    } else {
      runs_ = backend.RunShapes(contexts_);
    }
    done_ = Clock::now();
  }
  std::vector<ExperimentContext> contexts_;
  const bool after_reference_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool reference_done_ = false;
  Expected<std::vector<BackendRun>> runs_ = std::vector<BackendRun>{};
  Clock::time_point listening_, done_;
  std::atomic<bool> listening_flag_{false};
  std::thread thread_;  // last: started once the members it writes exist
};

// The backend's runs of one graph at its shapes where it runs here, the compile and first run
// accounted apart from the timed runs. A backend that asks the worker first thing (aot_eager,
// aot_inductor compiling its package, ...) and finds this process not yet connected waited for
// it to start until it connected: that is the worker's start, not the compile, as for a backend
// run beside (BackendBeside). One that asks nothing (a cached package) waited for nothing.
Expected<std::vector<BackendRun>> RunBackendHere(Flow& f, Backend& backend, const std::vector<ExperimentContext>& contexts) {
  f.clock.Enter("backend_runs", "backend");
  const bool connected = runtime::WorkerConnected();
  Expected<std::vector<BackendRun>> runs = std::vector<BackendRun>{};
  if (contexts.size() == 1) {
    auto run = backend.Run(contexts[0]);
    if (!run.ok()) return run.error();
    runs->push_back(std::move(*run));
  } else {
    runs = backend.RunShapes(contexts);
  }
  double timed = 0;
  if (runs.ok())
    for (const auto& run : *runs)
      for (double t : run.run_times_s) timed += t;
  std::vector<std::pair<Clock::time_point, std::string>> milestones;
  if (auto at = runtime::WorkerConnectedAt(); !connected && runtime::WorkerConnected() && at) milestones.emplace_back(*at, "worker_start");
  milestones.emplace_back(Clock::now() - std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timed)), "compile");
  f.clock.SplitWait(milestones);
  return runs;
}

// Results held on the device go to the host as soon as they are made: the comparison reads them
// there, and the device holds one run's working set at a time.
void ToHost(NamedTensors& results) {
  for (auto& [name, t] : results)
    if (t.defined() && !t.device().is_cpu()) t = t.to(at::kCPU);
}

}  // namespace

// The reference of one shape: eager twice (they must agree) and fp64 (without it, cosine).
struct Reference {
  NamedTensors eager, fp64;
  bool fp64_ran = false;
  std::string fp64_error;  // why the fp64 run failed; the record says it at the graph's turn (Settle)
};

// A step that ended its graph's reference: what the record says at the graph's turn.
struct Failure {
  Code code;
  std::string message;
  bool eager = false;  // an eager run failed: EAGER_FAILED whatever fp64 made of the graph
};

// One graph as its steps see it: its program, the shapes it runs at (each with its context), the
// reference's options and, per shape, the reference's results. Its reference is a list of steps
// (StepCount) that may run ahead of the graph's turn, while an earlier graph's backend waits for a
// worker still starting (RunGraphs); what they make of the record (a failure, notes, a missing
// fp64 reference) is kept here and said at the graph's turn, so a record is what it would be
// without running ahead.
struct GraphRun {
  const GraphEntry* graph = nullptr;
  ExperimentContext ctx;  // the experiment's, at this graph
  bool planned = false, settled = false;
  std::optional<Failure> failed;  // no step of the graph runs after a failed one
  std::vector<std::string> notes;
  const interp::Program* prog = nullptr;
  std::string gprefix, mode;
  std::vector<Shape> shapes;
  std::vector<ExperimentContext> contexts;
  ReferenceOptions ro;
  std::vector<Reference> refs;
  size_t done = 0;  // reference steps run
  // The record's path prefix of a shape's values: the graph's name (several graphs), its label.
  std::string PrefixOf(const Shape& sh) const { return gprefix + (sh.label.empty() ? "" : sh.label + "/"); }
  // On an accelerator the fp64 runs, the largest working sets, come first and alone: the backend
  // (in its own process, on the same device) starts after them (BackendAfter), so the two sides
  // never hold their largest working sets at once. Their results are on the host by then, and the
  // blocks their working sets left in the caching allocator go back to the device (one step):
  // beside the backend this process then holds what the eager runs take, not the fp64 run's peak
  // (measured on an H200, BERT trained under amp bf16: the device's most memory in use over a warm
  // verify 6.3 -> 4.3 GiB, against the Python runner's 4.8 GiB; docs/gpu.md). On the CPU each
  // shape's eager pair, then its fp64 run.
  bool Fp64First() const { return !ctx.device.is_cpu(); }
  size_t StepCount() const { return Fp64First() ? 2 * shapes.size() + 1 : 2 * shapes.size(); }
  size_t BackendAfter() const { return Fp64First() ? shapes.size() + 1 : 0; }
};

struct GraphRuns {
  std::vector<GraphRun> graphs;  // the repro dir's, in order
  bool multi = false;            // several: a record names its graph
};

namespace {

// Eager twice: the shape's eager pair, which must agree.
void RunEagerTwice(Flow& f, GraphRun& g, size_t i) {
  const Shape& sh = g.shapes[i];
  f.clock.Enter("eager");
  auto first = RunReference(*g.prog, *sh.repro, *sh.graph, g.mode, g.ro);
  if (!first.ok()) {
    g.failed = Failure{Code::kEagerFailed, "eager 1st run" + (sh.label.empty() ? "" : " at " + sh.label) + ": " + first.error().message, true};
    return;
  }
  ToHost(*first);
  f.clock.Enter("eager", "eager_2nd_run");
  auto second = RunReference(*g.prog, *sh.repro, *sh.graph, g.mode, g.ro);
  if (!second.ok()) {
    g.failed = Failure{Code::kEagerFailed, "eager 2nd run: " + second.error().message, true};
    return;
  }
  ToHost(*second);
  if (auto differ = Nondeterministic(*first, *second, g.ro.device.is_cuda(), g.PrefixOf(sh))) {
    g.failed = Failure{Code::kNondeterministicEagerRun, *differ};
    return;
  }
  g.refs[i].eager = std::move(*first);
}

void RunFp64(Flow& f, GraphRun& g, size_t i) {
  const Shape& sh = g.shapes[i];
  f.clock.Enter("fp64", "fp64_reference");
  ReferenceOptions r64 = g.ro;
  r64.float_dtype = c10::kDouble;
  r64.hook = nullptr;
  auto fp64 = RunReference(*g.prog, *sh.repro, *sh.graph, g.mode, r64);
  if (!fp64.ok()) {
    g.refs[i].fp64_error = g.PrefixOf(sh) + fp64.error().message.substr(0, 300);
    return;
  }
  ToHost(*fp64);
  g.refs[i].fp64_ran = true;
  g.refs[i].fp64 = std::move(*fp64);
}

// The graph's next reference step (GraphRun says their order).
void RunStep(Flow& f, GraphRun& g) {
  const size_t n = g.shapes.size(), s = g.done++;
  if (g.Fp64First()) {
    if (s < n)
      RunFp64(f, g, s);
    else if (s == n)
      ReleaseCachedMemory(g.ctx.device);
    else
      RunEagerTwice(f, g, s - n - 1);
  } else if (s % 2 == 0) {
    RunEagerTwice(f, g, s / 2);
  } else {
    RunFp64(f, g, s / 2);
  }
}

// The graph's steps up to `upto`, each after `threads` shared the cores (when given).
void RunSteps(Flow& f, GraphRun& g, size_t upto, const ReferenceThreads* threads) {
  while (!g.failed && g.done < upto) {
    if (threads) threads->Share();
    RunStep(f, g);
  }
}

// The graph compiled for the interpreter, the shapes it runs at, the reference's options.
void PlanGraph(Flow& f, Backend& backend, const ExperimentContext& ectx, bool multi, GraphRun& g) {
  const ExperimentSpec& spec = f.spec;
  const GraphEntry& graph = *g.graph;
  g.planned = true;
  g.gprefix = multi ? graph.name + "/" : "";
  g.mode = graph.mode.empty() ? spec.test : graph.mode;
  g.ctx = ectx;
  g.ctx.graph = &graph;
  g.ctx.mode = g.mode;
  f.clock.Enter("load", "eager");
  auto program = interp::Program::Compile(graph.graph, (g.ctx.repro->root() / graph.file).string());
  if (!program.ok()) {
    g.failed = Failure{Code::kEagerFailed, program.error().message};
    return;
  }
  f.programs.push_back(std::move(*program));
  g.prog = &f.programs.back();
  auto shapes = ShapesOf(f, g.ctx, graph);
  if (!shapes.ok()) {
    g.failed = Failure{Code::kEagerFailed, "shapes of " + graph.name + ": " + shapes.error().message};
    return;
  }
  g.shapes = std::move(*shapes);
  if (spec.sweep > 0 && graph.graph.symbolic() && g.shapes.size() == 1)
    g.notes.push_back(graph.name + ": verified at its recorded shape only (" +
                      (!TangentsFitEveryShape(graph) ? "its recorded gradients have the recorded sizes" : "its ranges and guards allow no other") +
                      ")");
  for (const Shape& sh : g.shapes) {
    ExperimentContext sc = g.ctx;
    sc.repro = sh.repro;
    sc.graph = sh.graph;
    g.contexts.push_back(std::move(sc));
  }
  g.ro.device = g.ctx.device;
  g.ro.hook = backend.EagerHook(g.ctx);
  g.ro.while_limit = spec.while_limit;
  g.refs.resize(g.shapes.size());
}

// What the graph's steps so far make of the record, said once: its notes, a missing fp64
// reference (never silent: the record says it is missing, why, and which rule decided), and a
// failure, which ends the experiment.
Stop Settle(Flow& f, GraphRun& g) {
  if (!g.settled) {
    g.settled = true;
    for (const auto& note : g.notes) Note(f.r, note);
    for (const auto& ref : g.refs)
      if (!ref.fp64_error.empty()) {
        f.c.fp64_ok = false;
        if (f.r.reference_error.empty()) f.r.reference_error = ref.fp64_error;
        f.r.cosine = true;
      }
  }
  if (!g.failed) return std::nullopt;
  if (g.failed->eager) {
    f.r.reference_error.clear();
    f.r.cosine = f.spec.cosine;
  }
  return Early(f, g.failed->code, g.failed->message);
}

// The reference at every shape (eager twice, fp64) and the backend's runs: beside the reference
// where the backend runs apart, after it otherwise. While the backend waits for a worker still
// starting, `ahead` runs a step of a later graph's reference (false: none is left).
Stop RunBothSides(Flow& f, Backend& backend, GraphRun& g, bool multi, const std::function<bool()>& ahead,
                  std::vector<BackendRun>& out) {
  const ExperimentContext& ctx = g.ctx;
  RunSteps(f, g, g.BackendAfter(), nullptr);
  if (g.failed) return Settle(f, g);
  // Host ops call the worker from the reference runs: then the backend waits its turn.
  const bool apart = backend.RunsApart(ctx) && ctx.repro->manifest().host_ops.empty();
  std::optional<BackendBeside> beside;
  if (apart) {
    // Started from this thread, which outlives it (a child dies with the thread that made it).
    if (Status st = runtime::LaunchWorker(); !st.ok()) return BackendFailed(f, st.error(), "");
    std::vector<ExperimentContext> first_runs = g.contexts;
    for (auto& c : first_runs) c.iterations = 0;
    beside.emplace(backend, std::move(first_runs), ctx.device.is_cpu());
  }
  // Whether the worker has answered; the slot's named socket tells of a kept worker before the
  // backend's thread has connected to it.
  auto answered = [&] { return runtime::NamedWorkerListening() || beside->Listening(); };
  // A CPU reference leaves a core to a worker still starting (reference_threads.h).
  const ReferenceThreads threads(beside && ctx.device.is_cpu() ? std::function<bool()>(answered) : nullptr);
  RunSteps(f, g, g.StepCount(), &threads);  // on a failure `beside` is waited for as it goes
  if (Stop st = Settle(f, g)) return st;
  bool ran_ahead = false;
  while (beside && !answered()) {
    threads.Share();
    if (!ahead()) break;
    ran_ahead = true;
  }
  threads.Restore();
  // What the steps ahead left in the caching allocator (a later graph's fp64 working set, if its
  // release step had not come yet) goes back to the device before the backend runs beside.
  if (ran_ahead && !ctx.device.is_cpu()) ReleaseCachedMemory(ctx.device);
  if (beside) beside->ReferenceDone();
  const std::string named = multi ? g.graph->name : "";  // the graph a failure names
  Expected<std::vector<BackendRun>> runs = std::vector<BackendRun>{};
  if (apart) {
    f.clock.Enter("backend_runs", "backend");
    runs = beside->Join(f.clock);
    if (runs.ok() && ctx.iterations > 0) {
      auto times = backend.TimedRuns(ctx);
      if (!times.ok()) return BackendFailed(f, times.error(), named);
      runs->at(0).run_times_s = std::move(*times);
    }
  } else {
    runs = RunBackendHere(f, backend, g.contexts);
  }
  if (!runs.ok()) return BackendFailed(f, runs.error(), named);
  out = std::move(*runs);
  return std::nullopt;
}

// Each shape's reference and backend results into f.c, as one unit of f.units; the recorded
// shape's timings are the experiment's.
void Collect(Flow& f, const GraphEntry& graph, const GraphRun& g, std::vector<BackendRun>& runs) {
  Collected& c = f.c;
  for (size_t i = 0; i < g.shapes.size(); ++i) {
    const Shape& sh = g.shapes[i];
    BackendRun& run = runs[i];
    const std::string prefix = g.PrefixOf(sh);
    if (i == 0) {
      f.r.compile_time_s += run.compile_time_s;
      if (c.run_times.size() < run.run_times_s.size()) c.run_times.resize(run.run_times_s.size(), 0.0);
      for (size_t t = 0; t < run.run_times_s.size(); ++t) c.run_times[t] += run.run_times_s[t];
    }
    if (run.peak_memory_bytes > 0)
      f.r.peak_memory_bytes["backend"] = std::max(f.r.peak_memory_bytes["backend"], run.peak_memory_bytes);
    const Reference& ref = g.refs[i];
    Unit u{g.prog, sh.repro, sh.graph, g.mode, g.ro, ref.fp64_ran, c.ref.size(), 0};
    for (size_t k = 0; k < ref.eager.size(); ++k) {
      const std::string& name = ref.eager[k].first;
      const bool named = name.rfind("output/", 0) == 0 && k < graph.output_names.size();
      c.shown.push_back(prefix + (named ? graph.output_names[k] : name));
      c.ref.emplace_back(prefix + name, ref.eager[k].second);
      c.tols.push_back(GraphTolerance(f.spec, graph));
      c.budgets.push_back(std::nullopt);
      if (ref.fp64_ran) c.fp64.emplace_back(prefix + name, ref.fp64[k].second);
    }
    for (auto& [name, t] : run.outputs) c.got.emplace_back(prefix + name, std::move(t));
    u.end = c.ref.size();
    if (graph.graph.symbolic() && g.shapes.size() > 1) c.spans.push_back({graph.name, sh.symbols, u.begin, u.end});
    f.units.push_back(u);
  }
}

// One step of the first graph from `from` on with steps left (its plan the first); none past one
// that failed.
bool StepFrom(Flow& f, Backend& backend, const ExperimentContext& ctx, GraphRuns& runs, size_t from) {
  for (size_t j = from; j < runs.graphs.size(); ++j) {
    GraphRun& later = runs.graphs[j];
    if (!later.planned) {
      PlanGraph(f, backend, ctx, runs.multi, later);
      return true;
    }
    if (later.failed) return false;
    if (later.done < later.StepCount()) {
      RunStep(f, later);
      return true;
    }
  }
  return false;
}

}  // namespace

void GraphRunsDelete::operator()(GraphRuns* g) const { delete g; }

GraphRunsPtr NewGraphRuns(const ExperimentContext& ctx) {
  GraphRunsPtr runs(new GraphRuns);
  const auto& entries = ctx.repro->graphs();
  runs->multi = entries.size() > 1;
  runs->graphs.resize(entries.size());
  for (size_t k = 0; k < entries.size(); ++k) runs->graphs[k].graph = &entries[k];
  return runs;
}

bool StepAhead(Flow& f, Backend& backend, const ExperimentContext& ctx, GraphRuns& runs) {
  return StepFrom(f, backend, ctx, runs, 0);
}

// Every graph in order: at each of its shapes the reference (eager twice, fp64), and the backend
// at every shape (one compile for all where it can), beside the reference where it runs apart.
// While a graph's backend waits for its worker to answer (a fresh one imports torch, dynamo and
// Inductor for seconds), the steps of the later graphs' references run ahead, one at a time, in
// graph order, and then `beyond`'s; the results they leave on the host are the ones the flow
// keeps anyway.
Stop RunGraphs(Flow& f, Backend& backend, const ExperimentContext& ctx, GraphRuns& runs, const std::function<bool()>& beyond) {
  for (size_t k = 0; k < runs.graphs.size(); ++k) {
    auto ahead = [&, k] { return StepFrom(f, backend, ctx, runs, k + 1) || (beyond && beyond()); };
    GraphRun& g = runs.graphs[k];
    if (!g.planned) PlanGraph(f, backend, ctx, runs.multi, g);
    std::vector<BackendRun> runs_of_g;
    if (Stop st = RunBothSides(f, backend, g, runs.multi, ahead, runs_of_g)) return st;
    Collect(f, *g.graph, g, runs_of_g);
  }
  return std::nullopt;
}

}  // namespace parity::experiment::flow
