// The worker protocol's requests, one typed function each: the C++ side of worker.py's request
// table (COMMANDS). Every caller builds its request here and nowhere else, so a request that
// changes on one side changes in this file (and kRequestNames, which a test holds equal to the
// table). What each answers is in worker.py and docs/worker.md.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace parity::runtime::requests {

using nlohmann::json;

// Every request the worker's table answers, by name, in the table's order.
inline constexpr const char* kRequestNames[] = {
    "ping", "list_models", "list_backends", "capture", "import_modules", "host_call", "host_batch",
    "host_backward", "run", "time_runs", "aot_graphs", "compiler_bisect", "aot_inductor", "torchscript", "export_pt2"};

// The worker's torch, Python and device facts (and any --import failure).
json Ping();
// The suite's models, and the dynamo backends torch registers.
json ListModels();
json ListBackends();

// A suite model captured to a repro dir at `out`.
struct Capture {
  std::string model, out, mode, dtype, device;
  int batch_size = 0;  // 0: the model's own
};
json CaptureModel(const Capture& c);

// Modules the worker imports (the host ops' modules, once approved).
json ImportModules(const std::vector<std::string>& modules);

// Host op calls (host_ops/): a call, a batch of consecutive calls, a backward.
enum class Host { kCall, kBatch, kBackward };
const char* HostName(Host h);
// A plan the worker has seen whole, repeated with new tensors in the same shared memory.
json HostRepeat(Host h, int plan);
// A request sent whole: `body` (the op and its non-tensor arguments), the shared-memory segment
// and the tensors' places in it, and the plan id it is kept under (none: not kept).
json HostWhole(Host h, json body, json shm, json tensors, std::optional<int> plan);

// One graph compiled by a dynamo backend in the worker and run: outputs to `out`, and for each
// variant (another shape of the same graph) its own outputs.
struct RunGraph {
  std::string repro, graph, backend, mode, device, out;
  json options = json::object();
  int iterations = 1;
  uint64_t seed = 0;
  double sgd_lr = 0;
  bool keep = false;  // keep the compiled graph for a time_runs request
  struct Variant {
    std::string repro, graph, out;
  };
  std::vector<Variant> variants;
};
json BackendRun(const RunGraph& r);
// `iterations` timed runs of the graph the last run kept.
json TimeRuns(int iterations);

// The forward and backward graphs AOTAutograd hands backend `backend`, as a repro dir at `out`.
json AotGraphs(const std::string& repro, const std::string& graph, const std::string& backend, const std::string& device,
               const std::string& out);

// A compiled artifact of the graph written to `out`: a .so (aot_inductor), a TorchScript archive
// (torchscript), a .pt2 (export_pt2).
enum class Artifact { kAotInductor, kTorchScript, kExportPt2 };
const char* ArtifactName(Artifact a);  // its request's name
json CompileArtifact(Artifact a, const std::string& repro, const std::string& graph, const std::string& device,
                     const json& options, const std::string& out);

// The compiler's own bisection (torch._inductor.compiler_bisector) of one graph against `signature`.
struct CompilerBisect {
  std::string repro, graph, backend, mode, device;
  json options = json::object(), signature;
  uint64_t seed = 0;
  double sgd_lr = 0, tol = 0;
  bool ignore_non_fp = false;
};
json Bisect(const CompilerBisect& b);

}  // namespace parity::runtime::requests
