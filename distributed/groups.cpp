#include "distributed/groups.h"

#include <ATen/core/dispatch/Dispatcher.h>

#include "interpreter/collectives.h"
#include "repro/graph_text.h"

namespace parity::distributed {

namespace {

// The argument holding the group name of a collective call, or nullptr for any other node.
Expected<ir::Arg*> GroupArg(ir::Node* n) {
  if (n->kind() != ir::NodeKind::kCallFunction || !interp::IsCollective(n->OperatorName().first)) return nullptr;
  const auto [name, overload] = n->OperatorName();
  auto op = c10::Dispatcher::singleton().findSchema({name, overload});
  if (!op) return Error::BadInput("node %" + n->name() + ": " + n->target() + " is no operator this torch has");
  const auto& args = op->schema().arguments();
  for (size_t k = 0; k < args.size(); ++k) {
    if (args[k].name() != "group_name") continue;
    for (auto& [key, arg] : n->kwargs)
      if (key == "group_name") return &arg;
    if (k < n->args.size() && n->args[k].kind == ir::Arg::Kind::kString) return &n->args[k];
    return Error::BadInput("node %" + n->name() + ": " + n->target() + " has no group name where its schema puts it");
  }
  return nullptr;  // wait_tensor: no group
}

}  // namespace

bool IsIdentity(const GroupRenaming& renaming) {
  for (const auto& [from, to] : renaming)
    if (from != to) return false;
  return true;
}

Expected<std::vector<std::string>> GroupsCalled(const ir::Graph& g) {
  std::vector<std::string> out;
  for (ir::Node* n : g.nodes()) {
    PARITY_ASSIGN_OR_RETURN(ir::Arg * arg, GroupArg(n));
    if (arg) out.push_back(arg->s);
  }
  return out;
}

Status RenameGroups(ir::Graph& g, const GroupRenaming& renaming) {
  for (ir::Node* n : g.nodes()) {
    PARITY_ASSIGN_OR_RETURN(ir::Arg * arg, GroupArg(n));
    if (!arg) continue;
    auto it = renaming.find(arg->s);
    if (it != renaming.end()) arg->s = it->second;
  }
  return Status::Ok();
}

Expected<std::vector<GroupRenaming>> AlikeUpToGroups(const std::vector<std::vector<const ir::Graph*>>& ranks) {
  std::vector<GroupRenaming> out(ranks.size());
  if (ranks.empty()) return out;
  const auto& lead = ranks[0];
  for (size_t r = 1; r < ranks.size(); ++r) {
    const auto& mine = ranks[r];
    const std::string who = "rank " + std::to_string(r);
    if (mine.size() != lead.size())
      return Error::Unsupported(who + " has " + std::to_string(mine.size()) + " graphs, rank 0 " + std::to_string(lead.size()));
    GroupRenaming& renaming = out[r];
    std::map<std::string, std::string> back;  // the rank's name -> rank 0's: one each way
    for (size_t gi = 0; gi < lead.size(); ++gi) {
      const std::string differs = who + "'s graph " + mine[gi]->name() + " is not rank 0's";
      PARITY_ASSIGN_OR_RETURN(auto theirs, GroupsCalled(*lead[gi]));
      PARITY_ASSIGN_OR_RETURN(auto ours, GroupsCalled(*mine[gi]));
      if (theirs.size() != ours.size()) return Error::Unsupported(differs);
      for (size_t k = 0; k < theirs.size(); ++k) {
        const auto to = renaming.emplace(theirs[k], ours[k]).first;
        const auto from = back.emplace(ours[k], theirs[k]).first;
        if (to->second != ours[k] || from->second != theirs[k])
          return Error::Unsupported(differs + ": its collective #" + std::to_string(k) + " calls group \"" + ours[k] +
                                    "\" where rank 0's calls \"" + theirs[k] + "\", and the two groups do not correspond one to one");
      }
      ir::Graph renamed = lead[gi]->Clone();
      PARITY_RETURN_IF_ERROR(RenameGroups(renamed, renaming));
      if (ir::GraphToText(renamed) != ir::GraphToText(*mine[gi])) return Error::Unsupported(differs);
    }
  }
  return out;
}

Expected<std::vector<GroupRenaming>> AlikeUpToGroups(const World& world) {
  std::vector<std::vector<const ir::Graph*>> ranks(static_cast<size_t>(world.world_size()));
  for (int r = 0; r < world.world_size(); ++r)
    for (const auto& g : world.rank(r).graphs()) ranks[static_cast<size_t>(r)].push_back(&g.graph);
  return AlikeUpToGroups(ranks);
}

}  // namespace parity::distributed
