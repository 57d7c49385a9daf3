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

// x (64, 256) -> relu [-> view to (64, 256) when `fixed_view`] -> out, with metadata.
Graph ReluOn64x256(bool fixed_view) {
  Graph g("g");
  ir::Node* x = g.Append(NodeKind::kPlaceholder, "x", "x");
  x->meta = {ir::TensorMeta{c10::ScalarType::Float, {64, 256}, {256, 1}}};
  ir::Node* relu = g.Append(NodeKind::kCallFunction, "relu", "aten::relu");
  relu->args = {Arg::Ref(x)};
  relu->meta = x->meta;
  ir::Node* last = relu;
  if (fixed_view) {
    last = g.Append(NodeKind::kCallFunction, "view", "aten::view");
    last->args = {Arg::Ref(relu), Arg::List({Arg::Int(64), Arg::Int(256)})};
    last->meta = x->meta;
  }
  g.Append(NodeKind::kOutput, "output", "output")->args = {Arg::List({Arg::Ref(last)})};
  return g;
}

TEST(MinifierPasses, ShrinkShapesHalvesInputsAndRecomputesMetadata) {
  Graph g = ReluOn64x256(false);
  const DeltaPass pass = ShrinkShapesPass();
  ASSERT_EQ(pass.count(g), 2);  // x's two dimensions
  auto both = pass.remove(g, 0, 2);
  ASSERT_TRUE(both.has_value());
  ASSERT_TRUE(both->Lint().ok());
  EXPECT_EQ(both->Find("x")->meta[0]->shape, (std::vector<int64_t>{32, 128}));
  EXPECT_EQ(both->Find("x")->meta[0]->stride, (std::vector<int64_t>{128, 1}));
  EXPECT_EQ(both->Find("relu")->meta[0]->shape, (std::vector<int64_t>{32, 128}));  // from a meta run
  auto second = pass.remove(g, 1, 2);
  ASSERT_TRUE(second.has_value());
  EXPECT_EQ(second->Find("relu")->meta[0]->shape, (std::vector<int64_t>{64, 128}));
  // Down to ones, then nothing is left to halve.
  Graph c = std::move(*both);
  while (pass.count(c) > 0) c = std::move(*pass.remove(c, 0, pass.count(c)));
  EXPECT_EQ(c.Find("relu")->meta[0]->shape, (std::vector<int64_t>{1, 1}));
}

TEST(MinifierPasses, CollapseDimsGoesStraightToOne) {
  Graph g = ReluOn64x256(false);
  ASSERT_EQ(CollapseDimsPass().count(g), 1);  // one target per input: all its dimensions at once
  auto c = CollapseDimsPass().remove(g, 0, 1);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->Find("relu")->meta[0]->shape, (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(CollapseDimsPass().remove(ReluOn64x256(true), 0, 1), std::nullopt);
}

TEST(MinifierPasses, ShrinkShapesRefusesShapesAnOpCannotTake) {
  // view(relu, [64, 256]) cannot take a halved input: not expressible, so never run.
  Graph g = ReluOn64x256(true);
  EXPECT_EQ(ShrinkShapesPass().remove(g, 0, 1), std::nullopt);
  // An input without metadata is not a target.
  g.Find("x")->meta.clear();
  EXPECT_EQ(ShrinkShapesPass().count(g), 0);
}

// A cond inlines as both branches' nodes, named after the call, its output picked by the
// predicate; an invoke_subgraph by its body; inlining everything brings nested calls up too.
TEST(MinifierPasses, InlineSubgraphsReplacesCallsByTheirNodes) {
  auto parsed = ir::GraphFromJson(nlohmann::json::parse(R"JSON({"version": 3, "name": "c",
    "subgraphs": {
      "t": {"subgraphs": {"body": {"nodes": [{"name": "a", "op": "placeholder"},
               {"name": "r", "op": "call_function", "target": "aten::relu", "args": [{"node": "a"}]},
               {"name": "output", "op": "output", "args": [[{"node": "r"}]]}]}},
            "nodes": [{"name": "a", "op": "placeholder"},
              {"name": "v", "op": "call_function", "target": "hop::invoke_subgraph", "args": [{"subgraph": "body"}, "s0", {"node": "a"}]},
              {"name": "g", "op": "call_function", "target": "getitem", "args": [{"node": "v"}, 0]},
              {"name": "output", "op": "output", "args": [[{"node": "g"}]]}]},
      "f": {"nodes": [{"name": "a", "op": "placeholder"},
        {"name": "s", "op": "call_function", "target": "aten::sin", "args": [{"node": "a"}]},
        {"name": "output", "op": "output", "args": [[{"node": "s"}]]}]}},
    "nodes": [
      {"name": "x", "op": "placeholder"},
      {"name": "p", "op": "call_function", "target": "aten::gt.Scalar", "args": [{"node": "x"}, 0]},
      {"name": "c", "op": "call_function", "target": "hop::cond", "args": [{"node": "p"}, {"subgraph": "t"}, {"subgraph": "f"}, [{"node": "x"}]]},
      {"name": "g", "op": "call_function", "target": "getitem", "args": [{"node": "c"}, 0]},
      {"name": "output", "op": "output", "args": [[{"node": "g"}]]}]})JSON"), "c.json");
  ASSERT_TRUE(parsed.ok()) << parsed.error().message;
  const Graph& g = *parsed;
  EXPECT_EQ(InlinableSubgraphCalls(g), std::vector<std::string>{"c"});
  auto one = InlineSubgraphs(g, {"c"});
  ASSERT_TRUE(one.has_value());
  EXPECT_EQ(one->Find("c"), nullptr);
  ASSERT_NE(one->Find("c__where_0"), nullptr);
  EXPECT_EQ(one->Find("c__where_0")->target(), "aten::where.self");
  EXPECT_EQ(one->Find("c__s")->target(), "aten::sin");
  ASSERT_NE(one->Find("c__v"), nullptr);  // the branch's own call, now at the top, its body with it
  EXPECT_TRUE(one->Subgraph("c__body") != nullptr);
  EXPECT_EQ(one->OutputValues()[0]->name(), "c__where_0");
  const Graph all = InlineAllSubgraphs(g);
  EXPECT_TRUE(all.subgraphs.empty());
  ASSERT_NE(all.Find("c__v__r"), nullptr);
  EXPECT_EQ(all.Find("c__v__r")->target(), "aten::relu");
  EXPECT_TRUE(all.Lint().ok());
  EXPECT_FALSE(InlineSubgraphs(g, {"p"}).has_value());  // no call
}

}  // namespace
}  // namespace parity::minifier
