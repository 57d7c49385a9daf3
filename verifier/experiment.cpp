#include "verifier/experiment.h"

#include <ATen/Context.h>

#include <chrono>
#include <cstdlib>
#include <deque>
#include <map>

#include "compare/budget.h"
#include "compare/histogram.h"
#include "compare/same.h"
#include "interpreter/interpreter.h"
#include "util/digest.h"
#include "util/files.h"
#include "verifier/backend.h"
#include "verifier/calibration.h"
#include "verifier/case.h"
#include "runtime/host_ops.h"
#include "verifier/reference.h"
#include "verifier/shapes.h"
#include "runtime/worker.h"

namespace parity::verifier {

namespace {

void SetPhase(const PhaseFn& on_phase, ExperimentResult& r, const std::string& phase) {
  r.phase = phase;
  if (on_phase) on_phase(phase);
}

ExperimentResult Finish(ExperimentResult r, Code code, std::string error = "") {
  r.code = code;
  r.error = std::move(error);
  return r;
}

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

}  // namespace

namespace {
nlohmann::json ShapesJson(const std::vector<results::ShapeCheck>& shapes) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& s : shapes) a.push_back(s.ToJson());
  return a;
}
}  // namespace

nlohmann::json ExperimentSpec::ToJson() const {
  nlohmann::json j = {{"model", model},
                      {"suite", suite},
                      {"repro", repro},
                      {"backend", backend},
                      {"backend_options", backend_options},
                      {"test", test},
                      {"dtype", dtype},
                      {"device", device},
                      {"batch_size", batch_size},
                      {"repeat", repeat},
                      {"iterations_per_run", iterations_per_run},
                      {"cosine", cosine},
                      {"ignore_non_fp", ignore_non_fp},
                      {"cache_dir", cache_dir},
                      {"work_dir", work_dir},
                      {"imports", imports}};
  j["tol"] = tol ? nlohmann::json(*tol) : nlohmann::json(nullptr);
  if (sweep > 0) j["sweep"] = sweep;  // absent when 0: fingerprints of earlier runs stay the same
  if (rule != "same") j["rule"] = rule;  // likewise
  j["noise_budget"] = noise_budget;
  return j;
}

Expected<ExperimentSpec> ExperimentSpec::FromJson(const nlohmann::json& j) {
  try {
    ExperimentSpec s;
    s.model = j.at("model");
    s.suite = j.at("suite");
    s.repro = j.at("repro");
    s.backend = j.at("backend");
    s.backend_options = j.at("backend_options");
    s.test = j.at("test");
    s.dtype = j.at("dtype");
    s.device = j.at("device");
    s.batch_size = j.at("batch_size");
    s.repeat = j.at("repeat");
    s.iterations_per_run = j.at("iterations_per_run");
    s.cosine = j.at("cosine");
    s.ignore_non_fp = j.value("ignore_non_fp", false);
    s.cache_dir = j.at("cache_dir");
    s.work_dir = j.at("work_dir");
    s.imports = j.value("imports", std::vector<std::string>{});
    s.sweep = j.value("sweep", 0);
    s.rule = j.value("rule", std::string("same"));
    s.noise_budget = j.value("noise_budget", true);
    if (!j.at("tol").is_null()) s.tol = j.at("tol").get<double>();
    return s;
  } catch (const std::exception& e) {
    return Error::BadInput(std::string("experiment spec: ") + e.what());
  }
}

std::string ExperimentSpec::Fingerprint() const {
  // Everything ToJson says except where things live and how failures are filtered.
  nlohmann::json j = ToJson();
  for (const char* where : {"repro", "cache_dir", "work_dir", "imports", "ignore_non_fp", "noise_budget"}) j.erase(where);
  return Sha256Hex(j.dump()).substr(0, 32);
}

nlohmann::json ExperimentResult::ToJson() const {
  return {{"verification_code", ToString(code)},
          {"error", error},
          {"phase", phase},
          {"tol", tol},
          {"cosine", cosine},
          {"compile_time_s", compile_time_s},
          {"total_time", total_time},
          {"per_iter_time", per_iter_time},
          {"outputs", outputs},
          {"exception_type", exception_type},
          {"traceback", traceback},
          {"notes", notes},
          {"reference_error", reference_error},
          {"shapes", ShapesJson(shapes)},
          {"signal", signal},
          {"timed_out", timed_out},
          {"justification", justification},
          {"calibration_time_s", calibration_time_s}};
}

ExperimentResult ExperimentResult::FromJson(const nlohmann::json& j) {
  ExperimentResult r;
  r.code = ParseCode(j.value("verification_code", std::string("VERIFIER_DIDNT_RUN"))).value();
  r.error = j.value("error", std::string());
  r.phase = j.value("phase", std::string());
  r.tol = j.value("tol", 0.0);
  r.cosine = j.value("cosine", false);
  r.compile_time_s = j.value("compile_time_s", 0.0);
  r.total_time = j.value("total_time", std::vector<double>{});
  r.per_iter_time = j.value("per_iter_time", std::vector<double>{});
  r.outputs = j.value("outputs", nlohmann::json::array());
  r.exception_type = j.value("exception_type", std::string());
  r.traceback = j.value("traceback", std::string());
  r.notes = j.value("notes", std::string());
  r.reference_error = j.value("reference_error", std::string());
  for (const auto& s : j.value("shapes", nlohmann::json::array()))
    if (auto c = results::ShapeCheck::FromJson(s, "experiment result"); c.ok()) r.shapes.push_back(std::move(*c));
  r.signal = j.value("signal", 0);
  r.timed_out = j.value("timed_out", false);
  r.justification = j.value("justification", std::string());
  r.calibration_time_s = j.value("calibration_time_s", 0.0);
  return r;
}

namespace {

// What the per-graph runs collect for the final comparison; with several graphs the results are
// named "<graph>/<result>".
struct Collected {
  NamedTensors ref, fp64, got;
  std::vector<std::string> shown;  // readable names, as reported
  std::vector<double> tols;        // each result's tolerance (its graph's mode and dtype)
  std::vector<std::optional<compare::NoiseBudget>> budgets;  // each result's, where it was measured
  bool fp64_ok = true;
  std::vector<double> run_times;
  // --shapes sweep: which results belong to which shape of a symbolic graph.
  struct Span {
    std::string graph;
    sym::Bindings symbols;
    size_t begin, end;
  };
  std::vector<Span> spans;
};

// A graph's tolerance: --tol (or the failure's), else the suite default for the mode and
// dtype the program ran that graph in.
double GraphTolerance(const ExperimentSpec& spec, const GraphEntry& graph) {
  if (spec.tol) return *spec.tol;
  const std::string dtype = graph.dtype.empty() ? spec.dtype : graph.amp.empty() ? graph.dtype : "amp";
  return DefaultTolerance(spec.suite, graph.mode.empty() ? spec.test : graph.mode, dtype);
}

using Stop = std::optional<ExperimentResult>;  // set when the experiment ends early

// Device, backend availability, the table's traits and the backend's own capability check.
Stop CheckCapability(const ExperimentSpec& spec, ExperimentResult& r, Backend& backend, ExperimentContext& ctx) {
  Availability avail = backend.Available();
  if (!avail.available) return Finish(r, Code::kVerifierSkipped, "backend " + spec.backend + " unavailable: " + avail.why);
  auto info = FindBackend(spec.backend);
  if (info.ok() && spec.test == "train" && !info->train)
    return Finish(r, Code::kVerifierSkipped, spec.backend + " runs inference only");
  if (info.ok() && !info->symbolic && ctx.repro)
    for (const auto& g : ctx.repro->graphs())
      if (g.graph.symbolic())
        return Finish(r, Code::kVerifierSkipped,
                      spec.backend + " compiles static shapes only, and " + g.name +
                          " has symbolic ones (inductor, eager or torch_compile:<backend> compile it as dynamic)");
  if (Status st = backend.Supports(ctx); !st.ok()) {
    if (st.error().kind == ErrorKind::kUnsupported) return Finish(r, Code::kVerifierSkipped, st.error().message);
    return Finish(r, Code::kExceptionRaised, st.error().message);
  }
  return std::nullopt;
}

// Eager twice: as PyTorch's benchmark runner, bitwise on CUDA; on the CPU, same()'s default
// tolerance (threaded CPU BLAS may reorder reductions between two runs of the same process).
Stop CheckDeterministic(ExperimentResult& r, const NamedTensors& a, const NamedTensors& b, bool cuda, const std::string& prefix) {
  compare::SameOptions exact;
  exact.tol = cuda ? 0.0 : 1e-4;
  exact.equal_nan = true;
  exact.compute_stats = false;
  for (size_t k = 0; k < a.size(); ++k) {
    auto v = compare::SameTensor(a[k].second, b[k].second, std::nullopt, exact);
    if (!v.pass)
      return Finish(r, Code::kNondeterministicEagerRun, "eager runs differ on " + prefix + a[k].first + ": " + v.message);
  }
  return std::nullopt;
}

Stop BackendFailed(ExperimentResult& r, const Error& e, const std::string& where) {
  if (e.kind == ErrorKind::kUnsupported) return Finish(r, Code::kVerifierSkipped, e.message);
  // The worker's Python exception keeps its type and traceback; a C++ failure is a RuntimeError.
  r.exception_type = e.exception_type.empty() ? "RuntimeError" : e.exception_type;
  r.traceback = e.traceback;
  return Finish(r, Code::kExceptionRaised, where + e.Text());
}

// One shape of a graph: the recorded call's (the capture itself), or a --shapes variant.
struct Shape {
  std::string label;  // "" for the recorded shape, else "[s77=12]"
  const ReproDir* repro;
  const GraphEntry* graph;
  sym::Bindings symbols;
};

// The shapes a graph runs at: the recorded one, and for a symbolic graph under --shapes sweep
// its variants, written into the experiment's work dir (`variants` holds them).
Expected<std::vector<Shape>> ShapesOf(const ExperimentSpec& spec, const ExperimentContext& ctx, const GraphEntry& graph,
                                      std::deque<ReproDir>& variants) {
  sym::Bindings recorded;
  for (const auto& [name, sy] : graph.graph.symbols) recorded[name] = sy.hint;
  std::vector<Shape> shapes = {{"", ctx.repro, &graph, recorded}};
  // A train graph with the gradients its program fed back sweeps where they fit every size (a
  // scalar loss's); gradients of outputs with symbolic sizes hold at the recorded sizes only.
  if (!graph.graph.symbolic() || spec.sweep <= 0 || !TangentsFitEveryShape(graph)) return shapes;
  int k = 0;
  for (const auto& point : SweepPoints(graph.graph, spec.sweep)) {
    const std::filesystem::path dir = ctx.work_dir / ("shape" + std::to_string(k) + "-" + FileNameSlug(graph.name));
    PARITY_RETURN_IF_ERROR(WriteShapeVariant(*ctx.repro, graph, point, ShapeSeed(point), dir));
    ++k;
    PARITY_ASSIGN_OR_RETURN(ReproDir v, ReproDir::Load(dir));
    variants.push_back(std::move(v));
    shapes.push_back({"[" + PointLabel(point) + "]", &variants.back(), &variants.back().graphs().at(0), point});
  }
  return shapes;
}

using Budgets = std::vector<std::optional<compare::NoiseBudget>>;

// The noise budget of each floating result of one shape, from the calibration runs (eager's own
// error the first sample). None when the calibration cannot run: the notes say why, and the
// calibrated rule leaves those results to same().
Budgets MeasureBudgets(const interp::Program& program, const Shape& sh, const std::string& mode, const ReferenceOptions& eager,
                       const NamedTensors& ref, const NamedTensors& fp64, ExperimentResult& r) {
  const auto started = std::chrono::steady_clock::now();
  Budgets budgets(ref.size());
  auto runs = CalibrationRuns(program, *sh.repro, *sh.graph, mode, eager);
  if (!runs.ok()) {
    r.notes += (r.notes.empty() ? "" : "; ") + std::string("no noise budget: a calibration run failed: ") + runs.error().message.substr(0, 200);
  } else {
    for (size_t k = 0; k < ref.size() && k < fp64.size(); ++k) {
      if (!compare::FloatingOutput(ref[k].second) || fp64[k].second.numel() != ref[k].second.numel()) continue;
      std::vector<std::pair<std::string, at::Tensor>> samples = {{"eager", ref[k].second}};
      for (const auto& run : *runs)
        if (k < run.results.size() && run.results[k].second.numel() == ref[k].second.numel())
          samples.emplace_back(run.label, run.results[k].second);
      budgets[k] = compare::MeasureBudget(fp64[k].second, samples);
    }
  }
  r.calibration_time_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return budgets;
}

// One graph: at each of its shapes eager twice and the fp64 reference (without it, cosine); the
// backend at every shape (one compile for all where it can).
Stop RunGraph(const ExperimentSpec& spec, ExperimentResult& r, const PhaseFn& on_phase, Backend& backend, ExperimentContext& ctx,
              const GraphEntry& graph, bool multi, Collected& c) {
  const std::string gprefix = multi ? graph.name + "/" : "";
  const std::string mode = graph.mode.empty() ? spec.test : graph.mode;
  ctx.graph = &graph;
  ctx.mode = mode;
  SetPhase(on_phase, r, "eager");
  auto program = interp::Program::Compile(graph.graph, (ctx.repro->root() / graph.file).string());
  if (!program.ok()) return Finish(r, Code::kEagerFailed, program.error().message);
  std::deque<ReproDir> variants;
  auto shapes = ShapesOf(spec, ctx, graph, variants);
  if (!shapes.ok()) return Finish(r, Code::kEagerFailed, "shapes of " + graph.name + ": " + shapes.error().message);
  if (spec.sweep > 0 && graph.graph.symbolic() && shapes->size() == 1)
    r.notes += (r.notes.empty() ? "" : "; ") + graph.name + ": verified at its recorded shape only (" +
               (!TangentsFitEveryShape(graph) ? "its recorded gradients have the recorded sizes" : "its ranges and guards allow no other") + ")";
  ReferenceOptions ro;
  ro.device = ctx.device;
  ro.hook = backend.EagerHook(ctx);
  ReferenceOptions r64 = ro;
  r64.float_dtype = c10::kDouble;
  r64.hook = nullptr;
  std::vector<NamedTensors> refs, fp64s;
  std::vector<bool> fp64_ran;
  std::vector<Budgets> budgets;
  for (const Shape& sh : *shapes) {
    const std::string prefix = gprefix + (sh.label.empty() ? "" : sh.label + "/");
    SetPhase(on_phase, r, "eager");
    auto ref = RunReference(*program, *sh.repro, *sh.graph, mode, ro);
    if (!ref.ok()) return Finish(r, Code::kEagerFailed, "eager 1st run" + (sh.label.empty() ? "" : " at " + sh.label) + ": " + ref.error().message);
    SetPhase(on_phase, r, "eager_2nd_run");
    auto ref2 = RunReference(*program, *sh.repro, *sh.graph, mode, ro);
    if (!ref2.ok()) return Finish(r, Code::kEagerFailed, "eager 2nd run: " + ref2.error().message);
    if (Stop st = CheckDeterministic(r, *ref, *ref2, ctx.device.is_cuda(), prefix)) return st;
    SetPhase(on_phase, r, "fp64_reference");
    auto fp64 = RunReference(*program, *sh.repro, *sh.graph, mode, r64);
    if (!fp64.ok()) {
      // Never silent: the record says the reference is missing, why, and which rule decided.
      c.fp64_ok = false;
      if (r.reference_error.empty()) r.reference_error = prefix + fp64.error().message.substr(0, 300);
      r.cosine = true;
    }
    budgets.push_back(spec.noise_budget && fp64.ok() ? MeasureBudgets(*program, sh, mode, ro, *ref, *fp64, r) : Budgets{});
    refs.push_back(std::move(*ref));
    fp64_ran.push_back(fp64.ok());
    fp64s.push_back(fp64.ok() ? std::move(*fp64) : NamedTensors{});
  }
  SetPhase(on_phase, r, "backend");
  std::vector<ExperimentContext> contexts;
  for (const Shape& sh : *shapes) {
    ExperimentContext sc = ctx;
    sc.repro = sh.repro;
    sc.graph = sh.graph;
    contexts.push_back(std::move(sc));
  }
  // One shape is the common case: one run, its error as it is. Several go to the backend together,
  // so that a backend compiling once for every size (the worker's dynamic=True) does so.
  Expected<std::vector<BackendRun>> runs = std::vector<BackendRun>{};
  if (contexts.size() == 1) {
    auto run = backend.Run(ctx);
    if (!run.ok()) return BackendFailed(r, run.error(), multi ? graph.name + ": " : "");
    runs->push_back(std::move(*run));
  } else {
    runs = backend.RunShapes(contexts);
  }
  if (!runs.ok()) return BackendFailed(r, runs.error(), multi ? graph.name + ": " : "");
  for (size_t i = 0; i < shapes->size(); ++i) {
    const Shape& sh = (*shapes)[i];
    const BackendRun& run = (*runs)[i];
    const std::string prefix = gprefix + (sh.label.empty() ? "" : sh.label + "/");
    if (i == 0) {  // the recorded shape's timings are the experiment's
      r.compile_time_s += run.compile_time_s;
      if (c.run_times.size() < run.run_times_s.size()) c.run_times.resize(run.run_times_s.size(), 0.0);
      for (size_t t = 0; t < run.run_times_s.size(); ++t) c.run_times[t] += run.run_times_s[t];
    }
    const size_t begin = c.ref.size();
    for (size_t k = 0; k < refs[i].size(); ++k) {
      const std::string& name = refs[i][k].first;
      const bool named = name.rfind("output/", 0) == 0 && k < graph.output_names.size();
      c.shown.push_back(prefix + (named ? graph.output_names[k] : name));
      c.ref.emplace_back(prefix + name, refs[i][k].second);
      c.tols.push_back(GraphTolerance(spec, graph));
      c.budgets.push_back(k < budgets[i].size() ? budgets[i][k] : std::nullopt);
      if (fp64_ran[i]) c.fp64.emplace_back(prefix + name, fp64s[i][k].second);
    }
    for (const auto& [name, t] : run.outputs) c.got.emplace_back(prefix + name, t);
    if (graph.graph.symbolic() && shapes->size() > 1) c.spans.push_back({graph.name, sh.symbols, begin, c.ref.size()});
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

// One compared result as the justification sees it.
struct Judged {
  std::string path;
  bool same_pass = true;
  std::string same_message;
  std::optional<compare::NoiseBudget> budget;
  std::optional<compare::BudgetCheck> check;
};

// The verdict in one sentence a maintainer can quote: under the calibrated rule, the failing
// output furthest beyond its budget (or the one closest to it on a PASS); under same(), its
// first failure and what the budget says of it, or a PASS the budget disagrees with.
std::string Justify(const std::vector<Judged>& judged, bool calibrated) {
  const Judged* worst = nullptr;  // the furthest beyond (or closest to) its budget
  const Judged* first_same_fail = nullptr;
  int over = 0, same_fails = 0, measured = 0;
  for (const Judged& j : judged) {
    if (!j.same_pass) {
      ++same_fails;
      if (!first_same_fail) first_same_fail = &j;
    }
    if (!j.check) continue;
    ++measured;
    over += !j.check->within;
    if (!worst || j.check->budgets > worst->check->budgets) worst = &j;
  }
  if (measured == 0) return "";
  auto more = [](int n, const char* what) { return n > 1 ? "; " + std::to_string(n - 1) + " more " + what : std::string(); };
  const std::string largest = worst->path + " at " + compare::Num3(worst->check->budgets) + " budgets";
  if (calibrated) {
    if (over > 0) return compare::Sentence(worst->path, *worst->budget, *worst->check) + more(over, "outputs exceed their budgets");
    std::string s = "every output within its noise budget (the closest: " + largest + ")";
    for (const Judged& j : judged)
      if (!j.check && !j.same_pass) return s + "; " + j.path + " has no budget and fails same(): " + j.same_message;
    return s + (same_fails > 0 ? "; same() would fail " + std::to_string(same_fails) + " of them" : "");
  }
  if (first_same_fail) {
    const Judged& f = *first_same_fail;
    if (!f.check) return "same() fails " + f.path + ": " + f.same_message + " (no noise budget for it)" + more(same_fails, "outputs fail same()");
    if (f.check->within)
      return "same() fails " + f.path + " (" + f.same_message + "), but its error is " + compare::Num3(f.check->budgets) +
             " noise budgets from fp64: rounding alone can explain it (--rule calibrated passes it)" +
             more(same_fails, "outputs fail same()");
    return "same() fails " + compare::Sentence(f.path, *f.budget, *f.check) + more(same_fails, "outputs fail same()");
  }
  if (over > 0)
    return "same() passes every output, but " + compare::Sentence(worst->path, *worst->budget, *worst->check) +
           " (--rule calibrated fails it)";
  return "every output passes same() and is within its noise budget (the closest: " + largest + ")";
}

// same() on every reference result against the backend's, and each result against its noise
// budget; spec.rule says which decides.
ExperimentResult Compare(const ExperimentSpec& spec, ExperimentResult r, const Collected& c) {
  std::map<std::string, at::Tensor> got(c.got.begin(), c.got.end());
  compare::SameOptions so;
  so.cos_similarity = r.cosine;
  so.equal_nan = true;
  so.ignore_non_fp = spec.ignore_non_fp;
  const bool calibrated = spec.rule == kRuleCalibrated;
  bool all = true;
  std::string first_failure;
  std::vector<Judged> judged;
  for (size_t k = 0; k < c.ref.size(); ++k) {
    const auto& [name, want] = c.ref[k];
    so.tol = c.tols[k];
    compare::Verdict v;
    Judged j;
    nlohmann::json hist;  // the error distribution, for reports
    auto it = got.find(name);
    if (it == got.end()) {
      v.pass = false;
      v.rule = compare::Rule::kStructure;
      v.message = "the backend did not return " + name;
    } else {
      std::optional<at::Tensor> f;
      if (c.fp64_ok) f = c.fp64[k].second.to(at::kCPU);
      const at::Tensor ref = want.to(at::kCPU), res = it->second.to(at::kCPU);
      v = compare::SameTensor(ref, res, f, so);
      if (f) hist = compare::ErrorHistogram(ref, res, *f);
      if (f && c.budgets[k] && ref.sizes() == res.sizes() && ref.scalar_type() == res.scalar_type()) {
        j.budget = c.budgets[k];
        j.check = compare::CheckBudget(*j.budget, *f, ref, res);
      }
    }
    v.path = c.shown[k];
    j.path = v.path;
    j.same_pass = v.pass;
    j.same_message = v.message;
    if (calibrated && j.check) {
      v.pass = j.check->within;
      v.rule = compare::Rule::kNoiseBudget;
      v.message = compare::Sentence("", *j.budget, *j.check);
    }
    if (!v.pass && first_failure.empty()) first_failure = c.shown[k] + ": " + v.message;
    all = all && v.pass;
    r.outputs.push_back(v.ToJson());
    nlohmann::json& out = r.outputs.back();
    if (c.tols[k] != r.tol) out["tol"] = c.tols[k];
    if (!hist.is_null()) out["error_hist"] = std::move(hist);
    if (j.check) {
      out["same_pass"] = j.same_pass;
      out["noise_budget"] = j.budget->ToJson();
      out["noise_budget"]["check"] = j.check->ToJson();
    }
    judged.push_back(std::move(j));
  }
  r.justification = Justify(judged, calibrated);
  for (const auto& sp : c.spans) {
    results::ShapeCheck check{sp.graph, {sp.symbols.begin(), sp.symbols.end()}, true};
    for (size_t k = sp.begin; k < sp.end; ++k) check.pass = check.pass && r.outputs[k].value("pass", false);
    r.shapes.push_back(std::move(check));
  }
  if (!all && !r.shapes.empty()) {
    std::string at;
    for (const auto& sh : r.shapes)
      if (!sh.pass) at += (at.empty() ? "" : "; ") + sh.graph + " at " + PointLabel({sh.symbols.begin(), sh.symbols.end()});
    if (!at.empty()) first_failure += " (fails " + at + ")";
  }
  if (got.size() > c.ref.size() && all)
    return Finish(r, Code::kFail,
                  "the backend returned " + std::to_string(got.size()) + " results, expected " + std::to_string(c.ref.size()));
  return all ? Finish(r, Code::kPass) : Finish(r, Code::kFail, first_failure);
}

}  // namespace

ExperimentResult RunExperiment(const ExperimentSpec& spec, const PhaseFn& on_phase) {
  ExperimentResult r;
  r.tol = EffectiveTolerance(spec);
  r.cosine = spec.cosine;
  DeterministicSetup();
  SetPhase(on_phase, r, "load");
  auto repro = ReproDir::Load(spec.repro);
  if (!repro.ok()) return Finish(r, Code::kEagerFailed, repro.error().message);
  c10::Device device(c10::kCPU);
  try {
    device = c10::Device(spec.device);
  } catch (const std::exception&) {
    return Finish(r, Code::kVerifierSkipped, "invalid device \"" + spec.device + "\"");
  }
  if (device.is_cuda() && !at::hasCUDA()) return Finish(r, Code::kVerifierSkipped, "CUDA is not available on this machine/build");
  // Host ops (ops registered from Python only) call the worker; the driver checked approval.
  if (Status st = runtime::PrepareHostOps(*repro, spec.imports, [](const nlohmann::json& req) { return runtime::AskWorker(req); }); !st.ok())
    return Finish(r, Code::kEagerFailed, st.error().message);
  auto backend = MakeBackend(spec.backend);
  if (!backend.ok()) return Finish(r, Code::kVerifierSkipped, backend.error().message);
  ExperimentContext ctx;
  ctx.repro = &*repro;
  ctx.graph = &repro->graphs().at(0);  // capability is asked of the first graph
  ctx.mode = spec.test;
  ctx.device = device;
  ctx.options = spec.backend_options;
  ctx.work_dir = spec.work_dir;
  ctx.cache_dir = spec.cache_dir;
  ctx.iterations = std::max(1, spec.repeat * spec.iterations_per_run);
  SetPhase(on_phase, r, "capability");
  if (Stop s = CheckCapability(spec, r, **backend, ctx)) return *s;
  Collected c;
  const bool multi = repro->graphs().size() > 1;
  for (const GraphEntry& graph : repro->graphs())
    if (Stop s = RunGraph(spec, r, on_phase, **backend, ctx, graph, multi, c)) return *s;
  FillTimes(spec, c.run_times, r);
  SetPhase(on_phase, r, "compare");
  return Compare(spec, std::move(r), c);
}

}  // namespace parity::verifier
