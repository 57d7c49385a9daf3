#include "host_ops/approval.h"

#include <algorithm>
#include <cstdlib>

#include "repro/graph.h"
#include "util/files.h"

namespace parity::host_ops {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

bool Approved(const std::string& module, const std::vector<std::string>& approved) {
  // torch's own modules (ops torch registers from Python: torch.nn.modules.linear_cross_entropy,
  // inductor's prims): the worker runs torch already, so importing them runs no code from the dir.
  if (module == "torch" || module.rfind("torch.", 0) == 0) return true;
  for (const auto& a : approved)
    if (module == a || module.rfind(a + ".", 0) == 0) return true;
  return false;
}


// A node of `repro` calling `op`, for messages.
}  // namespace

std::string NodeCalling(const ReproDir& repro, const std::string& op) {
  for (const auto& g : repro.graphs())
    for (const ir::Node* n : g.graph.nodes())
      if (n->target() == op) return g.name + ": %" + n->name();
  return "no node";
}

fs::path ConfigPath() {
  if (const char* p = std::getenv("PARITY_CONFIG"); p && *p) return p;
  if (const char* x = std::getenv("XDG_CONFIG_HOME"); x && *x) return fs::path(x) / "parity" / "config.json";
  if (const char* h = std::getenv("HOME"); h && *h) return fs::path(h) / ".config" / "parity" / "config.json";
  return {};
}

Expected<std::vector<std::string>> ApprovedImports(const std::vector<std::string>& flags) {
  std::vector<std::string> out = flags;
  const fs::path config = ConfigPath();
  if (config.empty() || !fs::exists(config)) return out;
  PARITY_ASSIGN_OR_RETURN(std::string text, ReadFile(config));
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return Error::BadInput(config.string() + ": not a JSON object");
  if (!j.contains("allowed_imports")) return out;
  if (!j["allowed_imports"].is_array()) return Error::BadInput(config.string() + ": field \"allowed_imports\" is not an array");
  for (const auto& m : j["allowed_imports"]) {
    if (!m.is_string()) return Error::BadInput(config.string() + ": field \"allowed_imports\" holds a non-string");
    out.push_back(m.get<std::string>());
  }
  return out;
}

std::vector<std::string> HostOpModules(const ReproDir& repro) {
  std::vector<std::string> out;
  for (const auto& [name, op] : repro.manifest().host_ops)
    if (!op.module.empty() && std::find(out.begin(), out.end(), op.module) == out.end()) out.push_back(op.module);
  return out;
}

Status CheckHostOpsApproved(const ReproDir& repro, const std::vector<std::string>& approved) {
  const std::string mw = (repro.root() / "manifest.json").string();
  for (const auto& [name, op] : repro.manifest().host_ops) {
    const std::string where = mw + ": host op " + name + " (" + NodeCalling(repro, name) + ")";
    if (op.module.empty())
      return Error::BadInput(where +
                             ": the manifest names no module that registers it (defined in a script run as "
                             "__main__?): capture with imports=[\"MODULE\"] (parity_capture.capture or dump_backend) "
                             "or set host_ops[\"" +
                             name + "\"].module in the manifest");
    if (!Approved(op.module, approved))
      return Error::BadInput(where + " needs module " + op.module + ", which parity imports only when allowed: pass --import " +
                             op.module + " (or list it under \"allowed_imports\" in " + ConfigPath().string() + ")");
  }
  return Status::Ok();
}

}  // namespace parity::host_ops
