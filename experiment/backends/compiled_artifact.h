// Shared by backends that the worker compiles into a file and C++ loads and runs
// (aot_inductor, torchscript, nativert).
#pragma once

#include <chrono>
#include <filesystem>
#include <functional>
#include <string>

#include "runtime/worker_requests.h"
#include "experiment/backend.h"

namespace parity::experiment {

// Asks the worker for an artifact (request `kind`, written to a path under the cache keyed by the
// graph, the options, the device and the torch version) unless the cache holds it already.
[[nodiscard]] Expected<std::filesystem::path> CompiledArtifact(const ExperimentContext& ctx, runtime::requests::Artifact kind,
                                                               const std::string& extension);

// The graph's inputs in placeholder order, on the experiment's device.
[[nodiscard]] Expected<std::vector<at::Tensor>> PlaceholderInputs(const ExperimentContext& ctx);

// Times `run` once (with `prepare_s` added to the first) and ctx.iterations more times.
[[nodiscard]] Expected<BackendRun> TimeRuns(const ExperimentContext& ctx, double prepare_s,
                                            const std::function<Expected<std::vector<at::Tensor>>()>& run);

}  // namespace parity::experiment
