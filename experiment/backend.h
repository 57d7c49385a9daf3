// The backend plug-in interface. A backend says whether it is available here and whether it
// can run a given experiment (unsupported means VERIFIER_SKIPPED, not a failure), prepares
// (compiles), then runs. Backends are listed in one explicit table (backend_registry.cpp):
// adding one is one file plus one line there.
#pragma once

#include <ATen/core/Tensor.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "repro/repro_dir.h"
#include "util/status.h"

namespace parity::experiment {

// Results in a fixed order with stable names: eval "output/<k>"; train "loss",
// "grad/<param key>", "grad/input/<placeholder>", "sgd/<param key>" (PyTorch's collect_results).
using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

struct ExperimentContext {
  const ReproDir* repro = nullptr;
  const GraphEntry* graph = nullptr;
  std::string mode = "eval";  // eval | train
  c10::Device device{c10::kCPU};
  nlohmann::json options = nlohmann::json::object();  // --backend-option KEY=VALUE
  std::filesystem::path work_dir;                     // scratch space for this experiment
  std::filesystem::path cache_dir;                    // compiled artifacts, shared across runs
  int iterations = 1;                                 // timed runs after the first (compiling) one
};

struct Availability {
  bool available = true;
  std::string why;  // when unavailable
};

struct BackendRun {
  NamedTensors outputs;
  double compile_time_s = 0.0;      // prepare + first run
  std::vector<double> run_times_s;  // the timed runs after the first
  int64_t peak_memory_bytes = 0;    // on an accelerator, the most the backend held at once (0: not known)
};

class Backend {
 public:
  virtual ~Backend() = default;
  // Machine/build level: can this backend run at all here?
  virtual Availability Available() const { return {}; }
  // Experiment level: Unsupported (-> VERIFIER_SKIPPED) when this backend cannot run it.
  [[nodiscard]] virtual Status Supports(const ExperimentContext& ctx) const { return Status::Ok(); }
  // A hook the verifier installs on its own eager reference runs (default none). Lets a
  // fault-injection backend exercise EAGER_FAILED and NONDETERMINISTIC_EAGER_RUN for real.
  virtual std::function<Status(const ir::Node&, c10::IValue&)> EagerHook(const ExperimentContext& ctx) const { return nullptr; }
  // Compile/prepare, run once, then ctx.iterations timed runs.
  [[nodiscard]] virtual Expected<BackendRun> Run(const ExperimentContext& ctx) = 0;
  // Whether Run computes in another process (the Python worker), touching nothing of this one but
  // the worker's connection: the flow then runs it beside its own reference runs, with
  // ctx.iterations 0 (the compile and the first run), and asks for the timed runs after its own
  // runs are done (TimedRuns), so that neither times the other.
  virtual bool RunsApart(const ExperimentContext& ctx) const { return false; }
  // `ctx.iterations` timed runs of what the last Run (with iterations 0) compiled; RunsApart
  // backends only.
  [[nodiscard]] virtual Expected<std::vector<double>> TimedRuns(const ExperimentContext& ctx) {
    return Error::Internal("TimedRuns of a backend that does not run apart");
  }
  // One graph at several shapes (a symbolic graph under --shapes sweep: `shapes[0]` the recorded
  // one, the rest variants of it). A backend that compiles once for every shape, as the
  // program's dynamic compile did, overrides this; the default runs each shape on its own.
  [[nodiscard]] virtual Expected<std::vector<BackendRun>> RunShapes(const std::vector<ExperimentContext>& shapes) {
    std::vector<BackendRun> runs;
    for (const auto& ctx : shapes) {
      PARITY_ASSIGN_OR_RETURN(BackendRun run, Run(ctx));
      runs.push_back(std::move(run));
    }
    return runs;
  }
};

// What the drivers need to know of a backend without making one. The table is the only place
// that says it; every other file asks (FindBackend).
struct BackendInfo {
  std::string name;  // as on the command line; "torch_compile:<name>" matches a prefix
  std::string description;
  std::string kind;          // "c++" | "python worker" | "python worker + c++"
  bool needs_worker = true;  // its experiments talk to the persistent Python worker
  bool train = true;         // runs --test train (else VERIFIER_SKIPPED)
  // The torch.compile backend that runs the same thing from plain Python (the standalone
  // repro.py); "<name>" stands for the part after the prefix; empty: none (C++ runtimes).
  std::string dynamo;
  // Compiles a symbolic graph for its symbolic sizes (else, for a dir holding one,
  // VERIFIER_SKIPPED naming the graph): the ones whose compile step sees the graph's sizes as
  // symbols (torch.compile with dynamic=True, or parity's interpreter).
  bool symbolic = false;
};

// The table, in listing order.
const std::vector<BackendInfo>& Backends();
// The device a run's Python workers prepare a first compile on before they listen
// (runtime::JobRunner::Prestart's `warm_device`): `device` when one of `backends` compiles with
// dynamo in the worker (or is unknown: its error comes later), else "" (no warm-up: a C++
// backend's workers only serve host ops, and a warm-up would only delay their end).
std::string WarmDevice(const std::vector<std::string>& backends, const std::string& device);
// The table's entry for a command-line name (a prefix entry answers for all its names, with
// `dynamo` resolved); BadInput naming the known ones if unknown.
[[nodiscard]] Expected<BackendInfo> FindBackend(const std::string& name);
// Makes the backend for a command-line name; BadInput naming the known ones if unknown.
[[nodiscard]] Expected<std::unique_ptr<Backend>> MakeBackend(const std::string& name);

// Helpers shared by backends.
std::string OutputName(size_t k);
[[nodiscard]] Expected<NamedTensors> LoadNamed(const std::filesystem::path& safetensors_file);
// Parses [BACKEND:]KEY=VALUE options into JSON (values stay strings; backends interpret them).
// A key with a backend's name and a colon before it is that backend's only (scoped: kept as
// written, "fault:op"); BadInput naming `flag` and the option when that name is no backend.
[[nodiscard]] Expected<nlohmann::json> ParseBackendOptions(const std::vector<std::string>& specs,
                                                           const std::string& flag = "--backend-option");
// The options `backend` gets of parsed `options`: every unscoped key, and its own scoped ones
// without their scope (over an unscoped key of the same name); other backends' scoped keys not.
nlohmann::json OptionsFor(const nlohmann::json& options, const std::string& backend);

}  // namespace parity::experiment
