#include "distributed/groups.h"

#include <gtest/gtest.h>

#include "repro/graph_text.h"

namespace parity::distributed {
namespace {

using ir::Arg;
using ir::NodeKind;

// relu(x) all-reduced (sum) on `tp`, then all-gathered on `dp` (the schema's group_size, then its
// group name), as one rank of a 2-D mesh records it; `op` the first op (another op: another graph).
ir::Graph MeshRank(const std::string& tp, const std::string& dp, const std::string& op = "aten::relu") {
  ir::Graph g("graph_0");
  ir::Node* x = g.Append(NodeKind::kPlaceholder, "x", "x");
  ir::Node* relu = g.Append(NodeKind::kCallFunction, "relu", op);
  relu->args = {Arg::Ref(x)};
  ir::Node* ar = g.Append(NodeKind::kCallFunction, "all_reduce", "_c10d_functional::all_reduce");
  ar->args = {Arg::Ref(relu), Arg::String("sum"), Arg::String(tp)};
  ir::Node* w1 = g.Append(NodeKind::kCallFunction, "wait", "_c10d_functional::wait_tensor");
  w1->args = {Arg::Ref(ar)};
  ir::Node* ag = g.Append(NodeKind::kCallFunction, "all_gather", "_c10d_functional::all_gather_into_tensor");
  ag->args = {Arg::Ref(w1), Arg::Int(2)};
  ag->kwargs = {{"group_name", Arg::String(dp)}};
  ir::Node* w2 = g.Append(NodeKind::kCallFunction, "wait_1", "_c10d_functional::wait_tensor");
  w2->args = {Arg::Ref(ag)};
  ir::Node* out = g.Append(NodeKind::kOutput, "output", "output");
  out->args = {Arg::List({Arg::Ref(w2)})};
  return g;
}

TEST(Groups, EachCollectiveNamesItsGroupByTheSchemaPositionalOrKeyword) {
  auto called = GroupsCalled(MeshRank("3", "5"));
  ASSERT_TRUE(called.ok()) << called.error().message;
  EXPECT_EQ(*called, (std::vector<std::string>{"3", "5"}));  // the reduce_op string is no group; wait_tensor has none
  ir::Graph g = MeshRank("3", "5");
  ASSERT_TRUE(RenameGroups(g, {{"3", "4"}, {"9", "1"}}).ok());
  EXPECT_EQ(ir::GraphToText(g), ir::GraphToText(MeshRank("4", "5")));  // "5" not renamed: it stays
  EXPECT_TRUE(IsIdentity({{"0", "0"}}) && IsIdentity({}) && !IsIdentity({{"3", "4"}}));
}

TEST(Groups, RanksAlikeUpToTheirGroupsGetRank0sGroupsRenamed) {
  // A 2x2 mesh: ranks 0 and 1 share tensor-parallel group "3", ranks 2 and 3 share "4"; the
  // data-parallel groups are "5" (0, 2) and "6" (1, 3).
  ir::Graph r0 = MeshRank("3", "5"), r1 = MeshRank("3", "6"), r2 = MeshRank("4", "5"), r3 = MeshRank("4", "6");
  auto renamings = AlikeUpToGroups({{&r0}, {&r1}, {&r2}, {&r3}});
  ASSERT_TRUE(renamings.ok()) << renamings.error().message;
  EXPECT_TRUE(IsIdentity((*renamings)[0]));
  EXPECT_EQ((*renamings)[1], (GroupRenaming{{"3", "3"}, {"5", "6"}}));
  EXPECT_EQ((*renamings)[3], (GroupRenaming{{"3", "4"}, {"5", "6"}}));
  ir::Graph mine = r0.Clone();  // rank 0's graph as rank 3 runs it
  ASSERT_TRUE(RenameGroups(mine, (*renamings)[3]).ok());
  EXPECT_EQ(ir::GraphToText(mine), ir::GraphToText(r3));
}

TEST(Groups, RanksThatDifferOtherwiseAreUnsupportedNamingTheRankAndGraph) {
  ir::Graph r0 = MeshRank("3", "5"), other_op = MeshRank("4", "6", "aten::tanh");
  auto differs = AlikeUpToGroups({{&r0}, {&other_op}});
  ASSERT_FALSE(differs.ok());
  EXPECT_EQ(differs.error().kind, ErrorKind::kUnsupported);
  EXPECT_NE(differs.error().message.find("rank 1's graph graph_0 is not rank 0's"), std::string::npos) << differs.error().message;
  // One group of rank 1's standing for two of rank 0's: no renaming makes them alike.
  ir::Graph two = MeshRank("3", "5"), merged = MeshRank("7", "7");
  auto merge = AlikeUpToGroups({{&two}, {&merged}});
  ASSERT_FALSE(merge.ok());
  EXPECT_NE(merge.error().message.find("do not correspond one to one"), std::string::npos) << merge.error().message;
  auto count = AlikeUpToGroups({{&two}, {}});
  ASSERT_FALSE(count.ok());
  EXPECT_NE(count.error().message.find("rank 1 has 0 graphs, rank 0 1"), std::string::npos) << count.error().message;
}

}  // namespace
}  // namespace parity::distributed
