// Batch kernels: ops whose every call has a fixed cost to start (host ops: one round trip to the
// Python worker each) register one BatchKernel for all of them; Program::Run, when it runs
// without autograd and without a node hook, hands a run of consecutive calls of ops sharing a
// kernel (with the getitems between them) to that kernel in one go. The interpreter knows
// nothing of what the kernel does; the kernel must return what calling each op would.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

#include <functional>
#include <memory>
#include <vector>

namespace parity::interp {

// An argument that is a result of an earlier call of the same run: argument `arg` of this call
// is result `output` of call `call` (-1: the call's one Tensor return; k >= 0: the k-th Tensor of
// its returns).
struct BatchRef {
  size_t arg = 0;
  size_t call = 0;
  int64_t output = -1;
};

struct BatchCall {
  const c10::OperatorHandle* op = nullptr;
  torch::jit::Stack args;     // in schema order; those named in `refs` are None here
  std::vector<BatchRef> refs;
};

// Returns each call's results (the stack an op leaves), in order. Throws as a kernel would.
using BatchKernel = std::function<std::vector<torch::jit::Stack>(const std::vector<BatchCall>& calls)>;

// Registers `kernel` for `op` (replacing an earlier one); Program::Compile looks kernels up.
void RegisterBatchKernel(const c10::OperatorName& op, std::shared_ptr<const BatchKernel> kernel);
std::shared_ptr<const BatchKernel> FindBatchKernel(const c10::OperatorName& op);

}  // namespace parity::interp
