#include "verifier/experiment.h"

#include <ATen/Context.h>

#include <cstdlib>
#include <fstream>
#include <map>

#include "compare/same.h"
#include "interpreter/interpreter.h"
#include "verifier/backend.h"
#include "verifier/reference.h"

namespace parity::verifier {

namespace {

void SetPhase(const std::filesystem::path& status_file, ExperimentResult& r, const std::string& phase) {
  r.phase = phase;
  std::ofstream(status_file, std::ios::trunc) << phase << "\n";
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

nlohmann::json ExperimentResult::ToJson() const {
  return {{"verification_code", ToString(code)}, {"error", error}, {"phase", phase}, {"tol", tol}, {"cosine", cosine},
          {"compile_time_s", compile_time_s}, {"total_time", total_time}, {"per_iter_time", per_iter_time},
          {"outputs", outputs}, {"exception_type", exception_type}, {"signal", signal}, {"timed_out", timed_out}};
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
  r.signal = j.value("signal", 0);
  r.timed_out = j.value("timed_out", false);
  return r;
}

ExperimentResult RunExperiment(const ExperimentSpec& spec, const std::filesystem::path& status_file) {
  ExperimentResult r;
  r.tol = spec.tol.value_or(DefaultTolerance(spec.suite, spec.test, spec.dtype));
  r.cosine = spec.cosine;
  DeterministicSetup();

  SetPhase(status_file, r, "load");
  auto repro = ReproDir::Load(spec.repro);
  if (!repro.ok()) return Finish(r, Code::kEagerFailed, repro.error().message);
  const GraphEntry& g = repro->graphs().at(0);  // capability is asked of the first graph
  c10::Device device(c10::kCPU);
  try {
    device = c10::Device(spec.device);
  } catch (const std::exception&) {
    return Finish(r, Code::kVerifierSkipped, "invalid device \"" + spec.device + "\"");
  }
  if (device.is_cuda() && !at::hasCUDA()) return Finish(r, Code::kVerifierSkipped, "CUDA is not available on this machine/build");

  auto backend = MakeBackend(spec.backend);
  if (!backend.ok()) return Finish(r, Code::kVerifierSkipped, backend.error().message);
  Availability avail = (*backend)->Available();
  if (!avail.available) return Finish(r, Code::kVerifierSkipped, "backend " + spec.backend + " unavailable: " + avail.why);
  ExperimentContext ctx;
  ctx.repro = &*repro;
  ctx.graph = &g;
  ctx.mode = spec.test;
  ctx.device = device;
  ctx.options = spec.backend_options;
  ctx.work_dir = spec.work_dir;
  ctx.cache_dir = spec.cache_dir;
  ctx.iterations = std::max(1, spec.repeat * spec.iterations_per_run);
  SetPhase(status_file, r, "capability");
  if (Status st = (*backend)->Supports(ctx); !st.ok()) {
    if (st.error().kind == ErrorKind::kUnsupported) return Finish(r, Code::kVerifierSkipped, st.error().message);
    return Finish(r, Code::kExceptionRaised, st.error().message);
  }

  // Every graph of the repro dir on its own captured inputs; with several graphs the results
  // are named "<graph>/<result>".
  const bool multi = repro->graphs().size() > 1;
  NamedTensors ref_all, fp64_all, got_all;
  std::vector<std::string> shown_all;
  bool fp64_ok = true;
  std::vector<double> run_times;
  for (const GraphEntry& graph : repro->graphs()) {
    const std::string prefix = multi ? graph.name + "/" : "";
    ctx.graph = &graph;
    SetPhase(status_file, r, "eager");
    auto program = interp::Program::Compile(graph.graph, (repro->root() / graph.file).string());
    if (!program.ok()) return Finish(r, Code::kEagerFailed, program.error().message);
    ReferenceOptions ro;
    ro.device = device;
    ro.hook = (*backend)->EagerHook(ctx);
    auto ref = RunReference(*program, *repro, graph, spec.test, ro);
    if (!ref.ok()) return Finish(r, Code::kEagerFailed, "eager 1st run: " + ref.error().message);
    SetPhase(status_file, r, "eager_2nd_run");
    auto ref2 = RunReference(*program, *repro, graph, spec.test, ro);
    if (!ref2.ok()) return Finish(r, Code::kEagerFailed, "eager 2nd run: " + ref2.error().message);
    // As PyTorch's benchmark runner: bitwise on CUDA; on the CPU, same()'s default tolerance
    // (threaded CPU BLAS may reorder reductions between two runs of the same process).
    compare::SameOptions exact;
    exact.tol = device.is_cuda() ? 0.0 : 1e-4;
    exact.equal_nan = true;
    exact.compute_stats = false;
    for (size_t k = 0; k < ref->size(); ++k) {
      auto v = compare::SameTensor((*ref)[k].second, (*ref2)[k].second, std::nullopt, exact);
      if (!v.pass)
        return Finish(r, Code::kNondeterministicEagerRun, "eager runs differ on " + prefix + (*ref)[k].first + ": " + v.message);
    }
    // The fp64 reference; without it, compare by cosine similarity.
    SetPhase(status_file, r, "fp64_reference");
    ReferenceOptions r64 = ro;
    r64.float_dtype = c10::kDouble;
    r64.hook = nullptr;
    auto fp64 = RunReference(*program, *repro, graph, spec.test, r64);
    if (!fp64.ok()) {
      fp64_ok = false;
      r.cosine = true;
    }
    SetPhase(status_file, r, "backend");
    auto run = (*backend)->Run(ctx);
    if (!run.ok()) {
      if (run.error().kind == ErrorKind::kUnsupported) return Finish(r, Code::kVerifierSkipped, run.error().message);
      // "Type: message" from the worker, or a C++ runtime error.
      const std::string& m = run.error().message;
      const auto colon = m.find(": ");
      r.exception_type = colon != std::string::npos && m.find(' ') >= colon ? m.substr(0, colon) : "RuntimeError";
      return Finish(r, Code::kExceptionRaised, (multi ? graph.name + ": " : "") + m);
    }
    r.compile_time_s += run->compile_time_s;
    if (run_times.size() < run->run_times_s.size()) run_times.resize(run->run_times_s.size(), 0.0);
    for (size_t i = 0; i < run->run_times_s.size(); ++i) run_times[i] += run->run_times_s[i];
    for (size_t k = 0; k < ref->size(); ++k) {
      const std::string& name = (*ref)[k].first;
      shown_all.push_back(prefix + (name.rfind("output/", 0) == 0 && k < graph.output_names.size() ? graph.output_names[k] : name));
      ref_all.emplace_back(prefix + name, (*ref)[k].second);
      if (fp64.ok()) fp64_all.emplace_back(prefix + name, (*fp64)[k].second);
    }
    for (auto& [name, t] : run->outputs) got_all.emplace_back(prefix + name, t);
  }
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

  SetPhase(status_file, r, "compare");
  std::map<std::string, at::Tensor> got(got_all.begin(), got_all.end());
  compare::SameOptions so;
  so.tol = r.tol;
  so.cos_similarity = r.cosine;
  so.equal_nan = true;
  so.ignore_non_fp = spec.ignore_non_fp;
  bool all = true;
  std::string first_failure;
  for (size_t k = 0; k < ref_all.size(); ++k) {
    const auto& [name, want] = ref_all[k];
    compare::Verdict v;
    auto it = got.find(name);
    if (it == got.end()) {
      v.pass = false;
      v.rule = compare::Rule::kStructure;
      v.message = "the backend did not return " + name;
    } else {
      std::optional<at::Tensor> f;
      if (fp64_ok) f = fp64_all[k].second.to(at::kCPU);
      v = compare::SameTensor(want.to(at::kCPU), it->second.to(at::kCPU), f, so);
    }
    v.path = shown_all[k];
    if (!v.pass && first_failure.empty()) first_failure = shown_all[k] + ": " + v.message;
    all = all && v.pass;
    r.outputs.push_back(v.ToJson());
  }
  if (got.size() > ref_all.size() && all)
    return Finish(r, Code::kFail, "the backend returned " + std::to_string(got.size()) + " results, expected " +
                                      std::to_string(ref_all.size()));
  return all ? Finish(r, Code::kPass) : Finish(r, Code::kFail, first_failure);
}

}  // namespace parity::verifier
