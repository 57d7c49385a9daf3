// The collectives of a distributed graph: ops of the `_c10d_functional` namespace (all_reduce,
// all_gather_into_tensor, reduce_scatter_tensor, all_to_all_single, broadcast, wait_tensor, their
// coalesced and in-place forms) and DTensor's `_dtensor::shard_dim_alltoall` (a Shard(a) ->
// Shard(b) redistribution). The interpreter resolves them by schema like any op but never
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

// Whether the op of this qualified name ("namespace::name", no overload) is a collective; the one
// list (tools/parity_capture/distributed.py's is_collective says the same for the capture).
inline bool IsCollective(std::string_view op) {
  return op.substr(0, op.find("::")) == "_c10d_functional" || op == "_dtensor::shard_dim_alltoall";
}

}  // namespace parity::interp
