#include <gtest/gtest.h>

#include "minifier/passes/passes.h"
#include "repro/graph_json.h"

namespace parity::minifier {
namespace {

using ir::Arg;
using ir::Graph;
using ir::NodeKind;

// x -> bn = (tuple op) -> getitem -> relu -> out, with a placeholder named "getitem" as a cut
// leaves behind (its target is its name).
Graph WithGetItem() {
  Graph g("g");
  ir::Node* x = g.Append(NodeKind::kPlaceholder, "x", "x");
  ir::Node* ph = g.Append(NodeKind::kPlaceholder, "getitem", "getitem");
  ir::Node* mx = g.Append(NodeKind::kCallFunction, "max", "aten::max.dim");
  mx->args = {Arg::Ref(x), Arg::Int(0)};
  ir::Node* gi = g.Append(NodeKind::kCallFunction, "getitem_1", ir::kGetItem);
  gi->args = {Arg::Ref(mx), Arg::Int(0)};
  ir::Node* add = g.Append(NodeKind::kCallFunction, "add", "aten::add.Tensor");
  add->args = {Arg::Ref(gi), Arg::Ref(ph)};
  ir::Node* relu = g.Append(NodeKind::kCallFunction, "relu", "aten::relu");
  relu->args = {Arg::Ref(add)};
  g.Append(NodeKind::kOutput, "output", "output")->args = {Arg::List({Arg::Ref(relu)})};
  return g;
}

TEST(MinifierPasses, CuttingATupleOpCutsItsGetItems) {
  Graph g = WithGetItem();
  ASSERT_TRUE(g.Lint().ok());
  auto c = CutNodes(g, {g.Find("max")});
  ASSERT_TRUE(c.has_value());
  ASSERT_TRUE(c->Lint().ok());
  // getitem_1 read the cut tuple: it is cut too and becomes a placeholder fed by its value.
  EXPECT_EQ(c->Find("getitem_1")->kind(), NodeKind::kPlaceholder);
  EXPECT_EQ(c->Find("max"), nullptr);
  // A placeholder that happens to be named "getitem" is not a getitem call.
  EXPECT_EQ(c->Find("getitem")->kind(), NodeKind::kPlaceholder);
}

TEST(MinifierPasses, EveryPassKeepsGraphsValid) {
  Graph g = WithGetItem();
  for (const auto& pass : DeltaPasses()) {
    const int n = pass.count(g);
    for (int i = 0; i < n; ++i) {
      auto c = pass.remove(g, i, i + 1);
      if (c) {
        EXPECT_TRUE(c->Lint().ok()) << pass.name << " target " << i;
      }
    }
  }
  EXPECT_EQ(ReplaceWithPlaceholdersPass().count(g), 3);          // max, add, relu (getitem is not an op)
  EXPECT_EQ(RemoveOutputsPass().remove(g, 0, 1), std::nullopt);  // the last output stays
}

}  // namespace
}  // namespace parity::minifier
