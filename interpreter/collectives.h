// The collectives of a distributed graph: ops of the `_c10d_functional` namespace (all_reduce,
// all_gather_into_tensor, reduce_scatter_tensor, all_to_all_single, broadcast, wait_tensor, their
// coalesced and in-place forms). The interpreter resolves them by schema like any op but never
// calls their kernels (those need a live process group): it hands each call, its arguments in
// schema order, to the run's Collectives (RunOptions::collectives), which leaves on the stack
// what the op returns. The interpreter knows nothing of ranks or groups; a run without
// Collectives fails at the first such node, naming it.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

#include <string_view>

namespace parity::interp {

class Collectives {
 public:
  virtual ~Collectives() = default;
  // Throws (as a kernel would) when the collective cannot complete: a rank that never joins, a
  // timeout, arguments the ranks disagree on.
  virtual void Call(const c10::OperatorHandle& op, torch::jit::Stack& stack) = 0;
};

// Whether an op of this namespace ("_c10d_functional") is a collective.
inline bool IsCollectiveNamespace(std::string_view ns) { return ns == "_c10d_functional"; }

}  // namespace parity::interp
