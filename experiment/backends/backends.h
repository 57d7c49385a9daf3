// Factories of the backends in the table (backend_registry.cpp). One file per backend family.
#pragma once

#include <memory>
#include <string>

#include "experiment/backend.h"

namespace parity::experiment {

std::unique_ptr<Backend> MakeEagerBackend();
std::unique_ptr<Backend> MakeFaultBackend();
std::unique_ptr<Backend> MakeAotAutogradBackend(const std::string& name);       // aot_eager, aot_eager_decomp_partition
std::unique_ptr<Backend> MakeWorkerBackend(const std::string& dynamo_backend);  // inductor, torch_compile:<name>
std::unique_ptr<Backend> MakeAotInductorBackend();
std::unique_ptr<Backend> MakeTorchScriptBackend();
std::unique_ptr<Backend> MakeNativeRTBackend();

}  // namespace parity::experiment
