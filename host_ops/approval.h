// Which host op modules parity may import: the user's approval (--import MODULE, or the
// allow-list in parity's config) against the modules a repro dir's host ops name. Loading a repro
// dir never imports anything; nothing is imported without approval.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "repro/repro_dir.h"
#include "util/status.h"

namespace parity::host_ops {

// parity's config: $PARITY_CONFIG, else $XDG_CONFIG_HOME/parity/config.json, else
// ~/.config/parity/config.json. Its "allowed_imports" approves modules (and their submodules).
std::filesystem::path ConfigPath();

// The approved modules: `flags` (--import) plus the config's allow-list. BadInput naming the
// config file and field when it is malformed.
[[nodiscard]] Expected<std::vector<std::string>> ApprovedImports(const std::vector<std::string>& flags);

// The modules `repro`'s host ops need, in order, without repeats.
std::vector<std::string> HostOpModules(const ReproDir& repro);

// BadInput naming the op, a node calling it, the module and the flag, for the first host op
// whose module is unknown or not approved.
[[nodiscard]] Status CheckHostOpsApproved(const ReproDir& repro, const std::vector<std::string>& approved);

// A node of `repro` calling `op` ("graph: %node"), for messages.
std::string NodeCalling(const ReproDir& repro, const std::string& op);

}  // namespace parity::host_ops
