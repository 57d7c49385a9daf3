// Host ops (this room's entry point): ops of a repro dir registered from Python only (torch.library custom ops), which a
// fresh parity process cannot find in the dispatcher. Before a graph holding them runs,
// PrepareHostOps checks that the user approved each op's module (--import MODULE, or the
// allow-list in parity's config), has the Python worker import those modules, and registers
// each op with the C++ dispatcher under a boxed kernel that calls the worker (`host_call`,
// tensors through shared memory). The interpreter then dispatches to it like to any op, so the
// eager and fp64 references, bisection and every delta pass work on graphs with host ops.
// Loading a repro dir never imports anything; nothing is imported without approval.
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "host_ops/approval.h"
#include "host_ops/wire.h"
#include "repro/repro_dir.h"
#include "util/status.h"

namespace parity::host_ops {

// Check, then have the worker import the modules (BadInput naming the op, node and module when
// an import fails). Registers nothing: for a driver that only validates.
[[nodiscard]] Status ImportHostOpModules(const ReproDir& repro, const std::vector<std::string>& approved, const WorkerCall& call);

// ImportHostOpModules, then register each op with this process's dispatcher.
// An op registered once stays registered for the life of the process. `call` reaches the worker
// the host op calls go to.
[[nodiscard]] Status PrepareHostOps(const ReproDir& repro, const std::vector<std::string>& approved, WorkerCall call);

}  // namespace parity::host_ops
