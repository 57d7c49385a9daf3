// aot_inductor: an AOTInductor package compiled once by the worker (cached by graph, options,
// device and torch version), loaded and run in C++ by libtorch's AOTIModelPackageLoader.
#include <torch/csrc/inductor/aoti_package/model_package_loader.h>

#include "experiment/backends/backends.h"
#include "experiment/backends/compiled_artifact.h"

namespace parity::experiment {
namespace {

class AotInductorBackend final : public Backend {
 public:
  Expected<BackendRun> Run(const ExperimentContext& ctx) override {
    auto t0 = std::chrono::steady_clock::now();
    PARITY_ASSIGN_OR_RETURN(auto package, CompiledArtifact(ctx, runtime::requests::Artifact::kAotInductor, ".pt2"));
    PARITY_ASSIGN_OR_RETURN(auto inputs, PlaceholderInputs(ctx));
    std::unique_ptr<torch::inductor::AOTIModelPackageLoader> loader;
    try {
      loader = std::make_unique<torch::inductor::AOTIModelPackageLoader>(package.string(), "model", false, 1,
                                                                         ctx.device.is_cuda() ? ctx.device.index() : -1);
    } catch (const std::exception& e) {
      return Error::Runtime(std::string("AOTIModelPackageLoader: ") + e.what());
    }
    const double prepare = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return TimeRuns(ctx, prepare, [&]() -> Expected<std::vector<at::Tensor>> {
      try {
        return loader->run(inputs);
      } catch (const std::exception& e) {
        return Error::Runtime(std::string("AOTInductor run: ") + e.what());
      }
    });
  }
};

}  // namespace
std::unique_ptr<Backend> MakeAotInductorBackend() { return std::make_unique<AotInductorBackend>(); }
}  // namespace parity::experiment
