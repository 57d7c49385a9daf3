// The dispatcher's side of host ops: each op registered under a boxed kernel that calls the
// worker (host_call; wire.h), an Autograd kernel whose backward the worker computes
// (host_backward), and, for ops that write none of their arguments, a batch kernel
// (interpreter/batch.h: host_batch). The interpreter then dispatches to them like to any op.
#pragma once

#include <string>

#include "repro/repro_dir.h"
#include "util/status.h"

namespace parity::host_ops {

// Registers `op` (named "ns::op.overload") with this process's dispatcher unless it is there
// (registered by an earlier call, or in C++). An op registered stays registered for the life of
// the process; a failed registration is BadInput naming the op and its schema.
[[nodiscard]] Status Register(const std::string& name, const HostOp& op);

}  // namespace parity::host_ops
