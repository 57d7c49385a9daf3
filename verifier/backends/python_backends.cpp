// Backends whose compile step is Python: run in the persistent worker (inductor, any dynamo
// backend), or made there and executed by parity's interpreter (AOTAutograd graphs).
#include <filesystem>
#include <set>

#include "verifier/backends/backends.h"
#include "verifier/reference.h"
#include "runtime/worker.h"

namespace parity::verifier {

namespace {
namespace fs = std::filesystem;

Availability PythonAvailable() {
  if (!fs::exists(runtime::WorkerPython())) return {false, "python interpreter " + runtime::WorkerPython() + " not found (run ./setup.sh)"};
  return {};
}

std::string Abs(const fs::path& p) { return fs::absolute(p).string(); }

Expected<BackendRun> RunInWorker(const ExperimentContext& ctx, const std::string& dynamo_backend) {
  const fs::path out = ctx.work_dir / "backend_outputs.safetensors";
  nlohmann::json req = {{"cmd", "run"},
                        {"repro", Abs(ctx.repro->root())},
                        {"graph", ctx.graph->name},
                        {"backend", dynamo_backend},
                        {"options", ctx.options},
                        {"mode", ctx.mode},
                        {"device", ctx.device.str()},
                        {"iterations", ctx.iterations + 1},
                        // The reference's seed and SGD step (verifier/reference.h), defined there once.
                        {"seed", ReferenceOptions{}.seed},
                        {"sgd_lr", kSgdLr},
                        {"out", Abs(out)}};
  PARITY_ASSIGN_OR_RETURN(auto resp, runtime::AskWorker(req));
  BackendRun run;
  PARITY_ASSIGN_OR_RETURN(run.outputs, LoadNamed(out));
  run.compile_time_s = resp.value("compile_time_s", 0.0);
  for (const auto& t : resp.value("run_times_s", nlohmann::json::array())) run.run_times_s.push_back(t.get<double>());
  return run;
}

class WorkerBackend final : public Backend {
 public:
  explicit WorkerBackend(std::string dynamo_backend) : backend_(std::move(dynamo_backend)) {}
  Availability Available() const override { return PythonAvailable(); }
  Status Supports(const ExperimentContext& ctx) const override {
    if (backend_ == "inductor") return Status::Ok();
    // torch_compile:<name>: the name must be registered with dynamo in the worker's torch.
    auto resp = runtime::AskWorker({{"cmd", "list_backends"}});
    if (!resp.ok()) return resp.error();
    for (const auto& b : (*resp)["backends"])
      if (b == backend_) return Status::Ok();
    return Error::Unsupported("dynamo backend \"" + backend_ + "\" is not registered in the worker's torch");
  }
  Expected<BackendRun> Run(const ExperimentContext& ctx) override { return RunInWorker(ctx, backend_); }

 private:
  std::string backend_;
};

// aot_eager / aot_eager_decomp_partition. Eval: the worker hands back the graph AOTAutograd
// gives its compiler (functionalized; Inductor's decompositions and the min-cut partitioner for
// the second) and parity's interpreter runs it. Train: torch.compile with that backend in the
// worker (forward and backward graphs stay in Python).
class AotAutogradBackend final : public Backend {
 public:
  explicit AotAutogradBackend(std::string name) : name_(std::move(name)) {}
  Availability Available() const override { return PythonAvailable(); }
  Expected<BackendRun> Run(const ExperimentContext& ctx) override {
    if (ctx.mode == "train") return RunInWorker(ctx, name_);
    const fs::path dir = ctx.work_dir / ("aot_" + name_);
    auto t0 = std::chrono::steady_clock::now();
    PARITY_ASSIGN_OR_RETURN(auto resp, runtime::AskWorker({{"cmd", "aot_graphs"},
                                                  {"repro", Abs(ctx.repro->root())},
                                                  {"graph", ctx.graph->name},
                                                  {"backend", name_},
                                                  {"device", ctx.device.str()},
                                                  {"out", Abs(dir)}}));
    (void)resp;
    PARITY_ASSIGN_OR_RETURN(ReproDir aot, ReproDir::Load(dir));
    const GraphEntry& g = aot.graphs().at(0);
    PARITY_ASSIGN_OR_RETURN(auto program, interp::Program::Compile(g.graph, (dir / g.file).string()));
    ReferenceOptions ro;
    ro.device = ctx.device;
    const double prepare = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return TimedReference(program, aot, g, ctx.mode, ro, ctx.iterations, prepare);
  }

 private:
  std::string name_;
};

}  // namespace

std::unique_ptr<Backend> MakeWorkerBackend(const std::string& dynamo_backend) {
  return std::make_unique<WorkerBackend>(dynamo_backend);
}
std::unique_ptr<Backend> MakeAotAutogradBackend(const std::string& name) { return std::make_unique<AotAutogradBackend>(name); }

}  // namespace parity::verifier
