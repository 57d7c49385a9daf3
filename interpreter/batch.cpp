#include "interpreter/batch.h"

#include <mutex>
#include <unordered_map>

namespace parity::interp {

namespace {

struct BatchRegistry {
  std::mutex mu;
  std::unordered_map<c10::OperatorName, std::shared_ptr<const BatchKernel>> kernels;
};
BatchRegistry& Batches() {
  static BatchRegistry r;
  return r;
}

}  // namespace

void RegisterBatchKernel(const c10::OperatorName& op, std::shared_ptr<const BatchKernel> kernel) {
  std::lock_guard<std::mutex> lock(Batches().mu);
  Batches().kernels[op] = std::move(kernel);
}

std::shared_ptr<const BatchKernel> FindBatchKernel(const c10::OperatorName& op) {
  std::lock_guard<std::mutex> lock(Batches().mu);
  auto it = Batches().kernels.find(op);
  return it == Batches().kernels.end() ? nullptr : it->second;
}

}  // namespace parity::interp
