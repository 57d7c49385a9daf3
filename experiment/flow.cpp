// RunExperiment: the steps of one experiment (experiment.h says what they are for), each in
// the phase the record accounts it to (experiment/phase_clock.h).
//
// Where the backend computes in another process (Backend::RunsApart: the Python worker), its
// compile and first run go to the worker first, and the reference runs (eager twice, fp64) run
// here meanwhile: the experiment costs the longer of the two, not their sum. Its timed runs come
// after the reference's, so neither times the other. In a dir of several graphs, a graph's
// backend that waits for a worker still starting lets the later graphs' references run meanwhile
// (graph_run.cpp). Noise budgets (four more eager runs per
// graph) are measured last, only where NoiseBudgets says they are needed.
#include <ATen/Context.h>
#include <ATen/Parallel.h>

#include <chrono>
#include <deque>
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
#include "experiment/shapes.h"

#include "experiment/flow_state.h"

namespace parity::experiment {

namespace {

using namespace flow;
using Clock = std::chrono::steady_clock;

// Determinism as PyTorch's benchmark runner sets it up.
void DeterministicSetup() {
  ::setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8", 0);
  auto& ctx = at::globalContext();
  ctx.setDeterministicAlgorithms(true, /*warn_only=*/true);
  ctx.setDeterministicCuDNN(true);
  ctx.setBenchmarkCuDNN(false);
  ctx.setAllowTF32CuBLAS(false);
  ctx.setAllowTF32CuDNN(false);
}

// Device, backend availability, the table's traits and the backend's own capability check.
Stop CheckCapability(Flow& f, Backend& backend, ExperimentContext& ctx) {
  const ExperimentSpec& spec = f.spec;
  Availability avail = backend.Available();
  if (!avail.available) return Early(f, Code::kVerifierSkipped, "backend " + spec.backend + " unavailable: " + avail.why);
  auto info = FindBackend(spec.backend);
  if (info.ok() && spec.test == "train" && !info->train) return Early(f, Code::kVerifierSkipped, spec.backend + " runs inference only");
  if (info.ok() && !info->symbolic && ctx.repro)
    for (const auto& g : ctx.repro->graphs())
      if (g.graph.symbolic())
        return Early(f, Code::kVerifierSkipped,
                     spec.backend + " compiles static shapes only, and " + g.name +
                         " has symbolic ones (inductor, eager or torch_compile:<backend> compile it as dynamic)");
  if (Status st = backend.Supports(ctx); !st.ok()) {
    if (st.error().kind == ErrorKind::kUnsupported) return Early(f, Code::kVerifierSkipped, st.error().message);
    return Early(f, Code::kExceptionRaised, st.error().message);
  }
  return std::nullopt;
}

// Per-repetition totals of the timed runs.
void FillTimes(const ExperimentSpec& spec, const std::vector<double>& run_times, ExperimentResult& r) {
  const int iters = std::max(1, spec.iterations_per_run);
  for (int rep = 0; rep < spec.repeat; ++rep) {
    double total = 0;
    for (int i = 0; i < iters; ++i) {
      size_t idx = static_cast<size_t>(rep * iters + i);
      if (idx < run_times.size()) total += run_times[idx];
    }
    r.total_time.push_back(total);
    r.per_iter_time.push_back(total / iters);
  }
}

// The repro dir, the device and the backend: what every graph's steps need.
Stop Prepare(Flow& f, Setup& s) {
  const ExperimentSpec& spec = f.spec;
  f.clock.Enter("load");
  ReproDir::TrustVerifiedTensors(spec.verified_tensors);  // the driver hashed it
  auto repro = ReproDir::Load(spec.repro);
  if (!repro.ok()) return Early(f, Code::kEagerFailed, repro.error().message);
  s.repro.emplace(std::move(*repro));
  // --device was checked with the options; a repro dir's own device may be one this machine lacks.
  if (std::string why = DeviceUnavailable(spec.device); !why.empty())
    return Early(f, Code::kVerifierSkipped, "device " + spec.device + ": " + why);
  const c10::Device device(spec.device);
  // Host ops (ops registered from Python only) call the worker; the driver checked approval.
  if (Status st = host_ops::PrepareHostOps(*s.repro, spec.imports, [](const nlohmann::json& req) { return runtime::AskWorker(req); });
      !st.ok())
    return Early(f, Code::kEagerFailed, st.error().message);
  auto backend = MakeBackend(spec.backend);
  if (!backend.ok()) return Early(f, Code::kVerifierSkipped, backend.error().message);
  s.backend = std::move(*backend);
  ExperimentContext& ctx = s.ctx;
  ctx.repro = &*s.repro;
  ctx.graph = &s.repro->graphs().at(0);  // capability is asked of the first graph
  ctx.mode = spec.test;
  ctx.device = device;
  ctx.options = spec.backend_options;
  ctx.work_dir = spec.work_dir;
  ctx.cache_dir = spec.cache_dir;
  ctx.iterations = std::max(1, spec.repeat * spec.iterations_per_run);
  ResetPeakMemory(device);
  f.clock.Enter("load", "capability");
  return CheckCapability(f, *s.backend, ctx);
}

// What the record says of the time and memory it took, whatever came of it.
ExperimentResult Accounted(Flow& f, ExperimentResult r, c10::Device device) {
  r.phase_seconds = f.clock.Seconds();
  if (int64_t peak = std::max(f.peak_before, PeakMemory(device)); peak > 0) r.peak_memory_bytes["reference"] = peak;
  return r;
}

// The most memory the device held since its peak was last reset, kept as `f`'s, and the peak reset:
// what runs next is another experiment's.
void KeepPeak(Flow& f, c10::Device device) {
  f.peak_before = std::max(f.peak_before, PeakMemory(device));
  ResetPeakMemory(device);
}

// The state's repro dir, device and backend, and its graphs' runs to come; false when it ended early
// (`stop` says how).
bool SetUp(PreparedExperiment::State& st, Stop& stop) {
  stop = Prepare(st.f, st.setup);
  if (stop) return false;
  st.graphs = NewGraphRuns(st.setup.ctx);
  return true;
}

}  // namespace

PreparedExperiment::State::State(ExperimentSpec s) : spec(std::move(s)), f{spec, {}, PhaseClock(nullptr), {}, {}, {}, {}, 0} {
  f.r.tol = EffectiveTolerance(spec);
  f.r.cosine = spec.cosine;
}

PreparedExperiment::PreparedExperiment(ExperimentSpec spec) : state_(std::make_unique<State>(std::move(spec))) {}
PreparedExperiment::~PreparedExperiment() = default;
const ExperimentSpec& PreparedExperiment::spec() const { return state_->spec; }

bool PreparedExperiment::Step() {
  State& st = *state_;
  if (!st.usable) return false;
  DeterministicSetup();
  runtime::WorkerRefusal refusal;  // the worker is the earlier experiment's now
  bool more = true;
  if (!st.graphs) {
    Stop stop;
    more = SetUp(st, stop);
    st.usable = more;  // one that ends early ends so at its turn again
  } else {
    more = StepAhead(st.f, *st.setup.backend, st.setup.ctx, *st.graphs);
  }
  if (refusal.refused()) st.usable = false;
  if (st.setup.repro) KeepPeak(st.f, st.setup.ctx.device);
  return more && st.usable;
}

ExperimentResult RunExperiment(const ExperimentSpec& spec, const PhaseFn& on_phase, PreparedExperiment* prepared,
                               const std::vector<PreparedExperiment*>& next) {
  // Where `prepared` went ahead, the flow goes on from its state; its time from here is its own.
  std::unique_ptr<PreparedExperiment::State> fresh;
  PreparedExperiment::State* state = prepared ? prepared->state_.get() : nullptr;
  if (!state || !state->usable || !state->graphs || state->spec.ToJson() != spec.ToJson()) {
    fresh = std::make_unique<PreparedExperiment::State>(spec);
    state = fresh.get();
  }
  Flow& f = state->f;
  f.clock = PhaseClock([&](const std::string& step) {
    f.r.phase = step;
    if (on_phase) on_phase(step);
  });
  DeterministicSetup();
  Setup& s = state->setup;
  if (!state->graphs) {
    Stop stop;
    if (!SetUp(*state, stop)) return Accounted(f, *stop, s.ctx.device);
  } else {
    f.clock.Enter("load");
    ResetPeakMemory(s.ctx.device);  // what ran since it went ahead was another experiment's
  }
  // While this experiment waits for its worker with nothing of its own left to run, a step of the
  // first of `next` with one left.
  auto beyond = [&] {
    if (next.empty()) return false;
    f.clock.Enter("ahead", runtime::kAheadPhase);
    KeepPeak(f, s.ctx.device);
    for (PreparedExperiment* n : next)
      if (n->Step()) return true;
    return false;
  };
  if (Stop st = RunGraphs(f, *s.backend, s.ctx, *state->graphs, beyond)) return Accounted(f, *st, s.ctx.device);
  FillTimes(spec, f.c.run_times, f.r);
  // The comparison takes most of the slot's cores (the backend's work is done:
  // runtime::ComparisonCpus); the calibration runs at the reference's own thread count.
  const int threads = at::get_num_threads(), compare_threads = runtime::ComparisonCpus();
  auto judge = [&] {
    f.clock.Enter("compare");
    if (compare_threads > threads) at::set_num_threads(compare_threads);
    ExperimentResult j = Judge(spec, f.r, f.c);
    at::set_num_threads(threads);
    return j;
  };
  // Judged once; where budgets are needed (the calibrated rule, a failure to explain), judged
  // again with them.
  const bool every = spec.noise_budgets == NoiseBudgets::kAlways || spec.rule == kRuleCalibrated;
  std::optional<ExperimentResult> judged;
  if (!every || !f.c.fp64_ok) judged = judge();
  if (Calibrate(f, judged ? *judged : f.r) || !judged) judged = judge();
  return Accounted(f, std::move(*judged), s.ctx.device);
}

}  // namespace parity::experiment