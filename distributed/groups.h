// The process groups a graph's collectives name, and ranks whose graphs differ only in them. In a
// program of several dimensions (FSDP2 with tensor parallelism on a 2-D mesh, say) every rank runs
// the same graph, but each names its own tensor-parallel group: rank 0's all_reduce is on "3"
// ([0, 1]), rank 2's on "4" ([2, 3]). Such ranks are alike up to a renaming of groups, and an edit
// of rank 0's graph is one every rank's graph can take, its groups renamed back.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "distributed/world.h"
#include "repro/graph.h"
#include "util/status.h"

namespace parity::distributed {

// Rank 0's group name -> a rank's own, for every group rank 0's graphs name.
using GroupRenaming = std::map<std::string, std::string>;
// Whether it renames nothing (every group its own name, or none).
bool IsIdentity(const GroupRenaming& renaming);

// The group each collective call of `g` names (its "group_name" argument, found by the op's
// schema), in node order; subgraphs are not walked (collectives run in the graph itself).
[[nodiscard]] Expected<std::vector<std::string>> GroupsCalled(const ir::Graph& g);

// `g` with every collective call's group renamed by `renaming` (a name it does not hold stays).
[[nodiscard]] Status RenameGroups(ir::Graph& g, const GroupRenaming& renaming);

// Per rank, the renaming of rank 0's groups that makes each of rank 0's graphs that rank's, graph
// by graph (the identity for rank 0 and for ranks calling the same groups); Unsupported naming the
// first rank and graph that differ otherwise (another op, another count of graphs, or a group
// that would stand for two).
[[nodiscard]] Expected<std::vector<GroupRenaming>> AlikeUpToGroups(const World& world);
// The same over each rank's graphs, in rank order.
[[nodiscard]] Expected<std::vector<GroupRenaming>> AlikeUpToGroups(const std::vector<std::vector<const ir::Graph*>>& ranks);

}  // namespace parity::distributed
