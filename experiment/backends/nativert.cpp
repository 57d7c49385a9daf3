// nativert: the torch.export package (.pt2) run by libtorch's NativeRT through its public
// handle, where the installed torch ships it.
// PARITY_TORCH_HAS_NATIVERT comes from cmake/TorchWheel.cmake's link probe.
#if PARITY_TORCH_HAS_NATIVERT
#include <torch/nativert/ModelRunnerHandle.h>
#define PARITY_HAS_NATIVERT 1
#else
#define PARITY_HAS_NATIVERT 0
#endif

#include "experiment/backends/backends.h"
#include "experiment/backends/compiled_artifact.h"

namespace parity::experiment {
namespace {

class NativeRTBackend final : public Backend {
 public:
  Availability Available() const override {
    if (!PARITY_HAS_NATIVERT)
      return {false, "this torch's libraries do not export NativeRT's ModelRunnerHandle (torch " PARITY_TORCH_VERSION_BUILT ")"};
    return {};
  }
  Expected<BackendRun> Run(const ExperimentContext& ctx) override {
#if PARITY_HAS_NATIVERT
    auto t0 = std::chrono::steady_clock::now();
    PARITY_ASSIGN_OR_RETURN(auto path, CompiledArtifact(ctx, runtime::requests::Artifact::kExportPt2, ".pt2"));
    PARITY_ASSIGN_OR_RETURN(auto inputs, PlaceholderInputs(ctx));
    std::unique_ptr<torch::nativert::ModelRunnerHandle> runner;
    try {
      runner = std::make_unique<torch::nativert::ModelRunnerHandle>(path.string(), "model");
    } catch (const std::exception& e) {
      return Error::Runtime(std::string("NativeRT ModelRunnerHandle: ") + e.what());
    }
    const double prepare = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return TimeRuns(ctx, prepare, [&]() -> Expected<std::vector<at::Tensor>> {
      try {
        std::vector<c10::IValue> flat(inputs.begin(), inputs.end());
        std::vector<at::Tensor> outs;
        for (const auto& v : runner->runWithFlatInputsAndOutputs(std::move(flat))) outs.push_back(v.toTensor());
        return outs;
      } catch (const std::exception& e) {
        return Error::Runtime(std::string("NativeRT run: ") + e.what());
      }
    });
#else
    return Error::Unsupported("nativert is not available in this build");
#endif
  }
};

}  // namespace
std::unique_ptr<Backend> MakeNativeRTBackend() { return std::make_unique<NativeRTBackend>(); }
}  // namespace parity::experiment
