// torchscript: the graph traced to TorchScript by the worker, loaded and run by libtorch's JIT
// (the legacy deployment path; deprecated in favour of torch.export since 2.11).
#include <torch/csrc/jit/api/module.h>
#include <torch/csrc/jit/serialization/import.h>

#include "experiment/backends/backends.h"
#include "experiment/backends/compiled_artifact.h"

namespace parity::experiment {
namespace {

class TorchScriptBackend final : public Backend {
 public:
  Expected<BackendRun> Run(const ExperimentContext& ctx) override {
    auto t0 = std::chrono::steady_clock::now();
    PARITY_ASSIGN_OR_RETURN(auto path, CompiledArtifact(ctx, runtime::requests::Artifact::kTorchScript, ".pt"));
    PARITY_ASSIGN_OR_RETURN(auto inputs, PlaceholderInputs(ctx));
    torch::jit::Module module;
    try {
      module = torch::jit::load(path.string(), ctx.device);
      module.eval();
    } catch (const std::exception& e) {
      return Error::Runtime(std::string("torch::jit::load: ") + e.what());
    }
    const double prepare = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return TimeRuns(ctx, prepare, [&]() -> Expected<std::vector<at::Tensor>> {
      try {
        c10::InferenceMode guard;
        std::vector<c10::IValue> args(inputs.begin(), inputs.end());
        c10::IValue out = module.forward(args);
        std::vector<at::Tensor> flat;
        if (out.isTensor())
          flat.push_back(out.toTensor());
        else if (out.isTuple())
          for (const auto& v : out.toTupleRef().elements()) flat.push_back(v.toTensor());
        else if (out.isList())
          for (const auto& v : out.toListRef()) flat.push_back(v.toTensor());
        return flat;
      } catch (const std::exception& e) {
        return Error::Runtime(std::string("TorchScript run: ") + e.what());
      }
    });
  }
};

}  // namespace
std::unique_ptr<Backend> MakeTorchScriptBackend() { return std::make_unique<TorchScriptBackend>(); }
}  // namespace parity::experiment
