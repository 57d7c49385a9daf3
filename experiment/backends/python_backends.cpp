// Backends whose compile step is Python: run in the persistent worker (inductor, any dynamo
// backend), or made there and executed by parity's interpreter (AOTAutograd graphs).
#include <filesystem>
#include <set>

#include "experiment/backends/backends.h"
#include "experiment/reference.h"
#include "runtime/worker.h"
#include "runtime/worker_requests.h"

namespace parity::experiment {

namespace {
namespace fs = std::filesystem;

Availability PythonAvailable() {
  if (!fs::exists(runtime::WorkerPython())) return {false, "python interpreter " + runtime::WorkerPython() + " not found (run ./setup.sh)"};
  return {};
}

std::string Abs(const fs::path& p) { return fs::absolute(p).string(); }

std::vector<double> TimesOf(const nlohmann::json& resp) {
  std::vector<double> times;
  for (const auto& t : resp.value("run_times_s", nlohmann::json::array())) times.push_back(t.get<double>());
  return times;
}

BackendRun RunOf(const nlohmann::json& resp, NamedTensors outputs) {
  BackendRun run;
  run.outputs = std::move(outputs);
  run.compile_time_s = resp.value("compile_time_s", 0.0);
  run.run_times_s = TimesOf(resp);
  run.peak_memory_bytes = resp.value("peak_memory_bytes", int64_t{0});
  return run;
}

// `ctxs`: one graph at one or more shapes (the first the recorded); the worker compiles it once
// (as dynamic when it is symbolic) and runs every shape.
Expected<std::vector<BackendRun>> RunInWorker(const std::vector<ExperimentContext>& ctxs, const std::string& dynamo_backend) {
  const ExperimentContext& ctx = ctxs.at(0);
  auto out_of = [&](size_t k) { return ctx.work_dir / ("backend_outputs" + (k ? "_" + std::to_string(k) : "") + ".safetensors"); };
  runtime::requests::RunGraph req;
  req.repro = Abs(ctx.repro->root());
  req.graph = ctx.graph->name;
  req.backend = dynamo_backend;
  req.options = ctx.options;
  req.mode = ctx.mode;
  req.device = ctx.device.str();
  req.iterations = ctx.iterations + 1;
  req.seed = ReferenceOptions{}.seed;  // the reference's seed and SGD step (experiment/reference.h), defined there once
  req.sgd_lr = kSgdLr;
  req.out = Abs(out_of(0));
  req.keep = ctx.iterations == 0;  // the timed runs come in their own request (TimedRuns)
  for (size_t k = 1; k < ctxs.size(); ++k) req.variants.push_back({Abs(ctxs[k].repro->root()), ctxs[k].graph->name, Abs(out_of(k))});
  PARITY_ASSIGN_OR_RETURN(auto resp, runtime::AskWorker(runtime::requests::BackendRun(req)));
  std::vector<BackendRun> runs;
  PARITY_ASSIGN_OR_RETURN(NamedTensors first, LoadNamed(out_of(0)));
  runs.push_back(RunOf(resp, std::move(first)));
  const nlohmann::json variants = resp.value("variants", nlohmann::json::array());
  for (size_t k = 1; k < ctxs.size(); ++k) {
    PARITY_ASSIGN_OR_RETURN(NamedTensors outputs, LoadNamed(out_of(k)));
    runs.push_back(RunOf(k - 1 < variants.size() ? variants[k - 1] : nlohmann::json::object(), std::move(outputs)));
  }
  return runs;
}

Expected<BackendRun> RunInWorker(const ExperimentContext& ctx, const std::string& dynamo_backend) {
  PARITY_ASSIGN_OR_RETURN(auto runs, RunInWorker(std::vector<ExperimentContext>{ctx}, dynamo_backend));
  return std::move(runs.at(0));
}

class WorkerBackend final : public Backend {
 public:
  explicit WorkerBackend(std::string dynamo_backend) : backend_(std::move(dynamo_backend)) {}
  Availability Available() const override { return PythonAvailable(); }
  Status Supports(const ExperimentContext& ctx) const override {
    if (backend_ == "inductor") return Status::Ok();
    // torch_compile:<name>: the name must be registered with dynamo in the worker's torch.
    auto resp = runtime::AskWorker(runtime::requests::ListBackends());
    if (!resp.ok()) return resp.error();
    for (const auto& b : (*resp)["backends"])
      if (b == backend_) return Status::Ok();
    return Error::Unsupported("dynamo backend \"" + backend_ + "\" is not registered in the worker's torch");
  }
  Expected<BackendRun> Run(const ExperimentContext& ctx) override { return RunInWorker(ctx, backend_); }
  Expected<std::vector<BackendRun>> RunShapes(const std::vector<ExperimentContext>& shapes) override {
    return RunInWorker(shapes, backend_);
  }
  bool RunsApart(const ExperimentContext&) const override { return true; }
  Expected<std::vector<double>> TimedRuns(const ExperimentContext& ctx) override {
    PARITY_ASSIGN_OR_RETURN(auto resp, runtime::AskWorker(runtime::requests::TimeRuns(ctx.iterations)));
    return TimesOf(resp);
  }

 private:
  std::string backend_;
};

// aot_eager / aot_eager_decomp_partition. Eval: the worker hands back the graph AOTAutograd
// gives its compiler (functionalized; Inductor's decompositions and the min-cut partitioner for
// the second) and parity's interpreter runs it. Train, and a symbolic graph: torch.compile with
// that backend in the worker (forward and backward graphs stay in Python; a symbolic graph is
// compiled as dynamic, once for all the shapes of --shapes, as for Inductor).
class AotAutogradBackend final : public Backend {
 public:
  explicit AotAutogradBackend(std::string name) : name_(std::move(name)) {}
  Availability Available() const override { return PythonAvailable(); }
  Expected<BackendRun> Run(const ExperimentContext& ctx) override {
    if (ctx.mode == "train" || ctx.graph->graph.symbolic()) return RunInWorker(ctx, name_);
    const fs::path dir = ctx.work_dir / ("aot_" + name_);
    auto t0 = std::chrono::steady_clock::now();
    PARITY_ASSIGN_OR_RETURN(auto resp, runtime::AskWorker(runtime::requests::AotGraphs(Abs(ctx.repro->root()), ctx.graph->name,
                                                                                      name_, ctx.device.str(), Abs(dir))));
    (void)resp;
    PARITY_ASSIGN_OR_RETURN(ReproDir aot, ReproDir::Load(dir));
    const GraphEntry& g = aot.graphs().at(0);
    PARITY_ASSIGN_OR_RETURN(auto program, interp::Program::Compile(g.graph, (dir / g.file).string()));
    ReferenceOptions ro;
    ro.device = ctx.device;
    const double prepare = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return TimedReference(program, aot, g, ctx.mode, ro, ctx.iterations, prepare);
  }
  Expected<std::vector<BackendRun>> RunShapes(const std::vector<ExperimentContext>& shapes) override {
    if (!shapes.at(0).graph->graph.symbolic()) return Backend::RunShapes(shapes);
    return RunInWorker(shapes, name_);
  }

 private:
  std::string name_;
};

}  // namespace

std::unique_ptr<Backend> MakeWorkerBackend(const std::string& dynamo_backend) {
  return std::make_unique<WorkerBackend>(dynamo_backend);
}
std::unique_ptr<Backend> MakeAotAutogradBackend(const std::string& name) { return std::make_unique<AotAutogradBackend>(name); }

}  // namespace parity::experiment
