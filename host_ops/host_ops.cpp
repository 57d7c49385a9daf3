#include "host_ops/host_ops.h"

#include "host_ops/kernels.h"
#include "runtime/worker_requests.h"

namespace parity::host_ops {

Status ImportHostOpModules(const ReproDir& repro, const std::vector<std::string>& approved, const WorkerCall& call) {
  const auto& ops = repro.manifest().host_ops;
  if (ops.empty()) return Status::Ok();
  PARITY_RETURN_IF_ERROR(CheckHostOpsApproved(repro, approved));
  if (auto r = call(runtime::requests::ImportModules(HostOpModules(repro))); !r.ok()) {
    const auto& [name, op] = *ops.begin();
    return Error::BadInput((repro.root() / "manifest.json").string() + ": host op " + name + " (" + NodeCalling(repro, name) +
                           "): importing its module " + op.module + " failed: " + r.error().message);
  }
  return Status::Ok();
}

Status PrepareHostOps(const ReproDir& repro, const std::vector<std::string>& approved, WorkerCall call) {
  const auto& ops = repro.manifest().host_ops;
  if (ops.empty()) return Status::Ok();
  PARITY_RETURN_IF_ERROR(ImportHostOpModules(repro, approved, call));
  UseWorker(std::move(call));
  for (const auto& [name, op] : ops) PARITY_RETURN_IF_ERROR(Register(name, op));
  return Status::Ok();
}

}  // namespace parity::host_ops
