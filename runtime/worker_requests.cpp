#include "runtime/worker_requests.h"

namespace parity::runtime::requests {

json Ping() { return {{"cmd", "ping"}}; }
json ListModels() { return {{"cmd", "list_models"}}; }
json ListBackends() { return {{"cmd", "list_backends"}}; }

json CaptureModel(const Capture& c) {
  json req = {{"cmd", "capture"}, {"model", c.model}, {"out", c.out}, {"mode", c.mode}, {"dtype", c.dtype}, {"device", c.device}};
  if (c.batch_size > 0) req["batch_size"] = c.batch_size;
  return req;
}

json ImportModules(const std::vector<std::string>& modules) { return {{"cmd", "import_modules"}, {"modules", modules}}; }

const char* HostName(Host h) {
  switch (h) {
    case Host::kCall: return "host_call";
    case Host::kBatch: return "host_batch";
    case Host::kBackward: return "host_backward";
  }
  return "host_call";
}

json HostRepeat(Host h, int plan) { return {{"cmd", HostName(h)}, {"plan", plan}}; }

json HostWhole(Host h, json body, json shm, json tensors, std::optional<int> plan) {
  body["cmd"] = HostName(h);
  body["shm"] = std::move(shm);
  body["tensors"] = std::move(tensors);
  if (plan) body["plan"] = *plan;
  return body;
}

json BackendRun(const RunGraph& r) {
  json req = {{"cmd", "run"},          {"repro", r.repro}, {"graph", r.graph},   {"backend", r.backend},
              {"options", r.options},  {"mode", r.mode},   {"device", r.device}, {"iterations", r.iterations},
              {"seed", r.seed},        {"sgd_lr", r.sgd_lr}, {"out", r.out}};
  if (r.keep) req["keep"] = true;
  for (const auto& v : r.variants) req["variants"].push_back({{"repro", v.repro}, {"graph", v.graph}, {"out", v.out}});
  return req;
}

json TimeRuns(int iterations) { return {{"cmd", "time_runs"}, {"iterations", iterations}}; }

json AotGraphs(const std::string& repro, const std::string& graph, const std::string& backend, const std::string& device,
               const std::string& out) {
  return {{"cmd", "aot_graphs"}, {"repro", repro}, {"graph", graph}, {"backend", backend}, {"device", device}, {"out", out}};
}

const char* ArtifactName(Artifact a) {
  switch (a) {
    case Artifact::kAotInductor: return "aot_inductor";
    case Artifact::kTorchScript: return "torchscript";
    case Artifact::kExportPt2: return "export_pt2";
  }
  return "aot_inductor";
}

json CompileArtifact(Artifact a, const std::string& repro, const std::string& graph, const std::string& device,
                     const json& options, const std::string& out) {
  return {{"cmd", ArtifactName(a)}, {"repro", repro}, {"graph", graph}, {"device", device}, {"options", options}, {"out", out}};
}

json Bisect(const CompilerBisect& b) {
  return {{"cmd", "compiler_bisect"}, {"repro", b.repro},   {"graph", b.graph},         {"backend", b.backend},
          {"options", b.options},     {"mode", b.mode},     {"device", b.device},       {"seed", b.seed},
          {"sgd_lr", b.sgd_lr},       {"tol", b.tol},       {"ignore_non_fp", b.ignore_non_fp},
          {"signature", b.signature}};
}

}  // namespace parity::runtime::requests
