#include "experiment/backends/compiled_artifact.h"

#include "repro/graph_json.h"
#include "util/digest.h"
#include "runtime/worker.h"

namespace parity::experiment {
namespace fs = std::filesystem;

Expected<fs::path> CompiledArtifact(const ExperimentContext& ctx, runtime::requests::Artifact kind, const std::string& extension) {
  const std::string cmd = runtime::requests::ArtifactName(kind);
  const std::string key_text =
      ir::GraphToJson(ctx.graph->graph).dump() + ctx.options.dump() + ctx.device.str() + cmd + PARITY_TORCH_VERSION_BUILT;
  const fs::path path = fs::absolute(ctx.cache_dir / cmd / (Sha256Hex(key_text) + extension));
  if (fs::exists(path)) return path;
  std::error_code ec;
  fs::create_directories(path.parent_path(), ec);
  const fs::path tmp = path.string() + ".tmp" + extension;
  PARITY_ASSIGN_OR_RETURN(auto resp, runtime::AskWorker(runtime::requests::CompileArtifact(
                                         kind, fs::absolute(ctx.repro->root()).string(), ctx.graph->name,
                                         ctx.device.str(), ctx.options, tmp.string())));
  (void)resp;
  fs::rename(tmp, path, ec);
  if (ec) return Error::Runtime("cannot store " + path.string() + ": " + ec.message());
  return path;
}

Expected<std::vector<at::Tensor>> PlaceholderInputs(const ExperimentContext& ctx) {
  PARITY_ASSIGN_OR_RETURN(auto inputs, ctx.repro->Inputs(*ctx.graph));
  std::vector<at::Tensor> out;
  for (const ir::Node* n : ctx.graph->graph.placeholders()) out.push_back(inputs.at(n->name()).to(ctx.device));
  return out;
}

Expected<BackendRun> TimeRuns(const ExperimentContext& ctx, double prepare_s,
                              const std::function<Expected<std::vector<at::Tensor>>()>& run) {
  BackendRun r;
  auto t0 = std::chrono::steady_clock::now();
  PARITY_ASSIGN_OR_RETURN(auto outs, run());
  r.compile_time_s = prepare_s + std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (size_t k = 0; k < outs.size(); ++k) r.outputs.emplace_back(OutputName(k), outs[k]);
  for (int i = 0; i < ctx.iterations; ++i) {
    t0 = std::chrono::steady_clock::now();
    auto again = run();
    if (!again.ok()) return again.error();
    r.run_times_s.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return r;
}

}  // namespace parity::experiment
