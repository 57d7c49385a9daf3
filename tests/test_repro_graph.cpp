#include "repro/graph.h"

#include <gtest/gtest.h>

#include "test_helpers.h"

#include "repro/graph_json.h"
#include "repro/graph_text.h"

namespace parity::ir {
namespace {

// x, w -> a = add(x, w) -> b = mul(a, a) -> c = relu(b), d = neg(x) (dead) -> out(c)
Graph Chain() {
  Graph g("chain");
  Node* x = g.Append(NodeKind::kPlaceholder, "x", "x");
  Node* w = g.Append(NodeKind::kPlaceholder, "w", "w");
  Node* a = g.Append(NodeKind::kCallFunction, "a", "aten::add.Tensor");
  a->args = {Arg::Ref(x), Arg::Ref(w)};
  Node* b = g.Append(NodeKind::kCallFunction, "b", "aten::mul.Tensor");
  b->args = {Arg::Ref(a), Arg::Ref(a)};
  Node* c = g.Append(NodeKind::kCallFunction, "c", "aten::relu");
  c->args = {Arg::Ref(b)};
  Node* d = g.Append(NodeKind::kCallFunction, "d", "aten::neg");
  d->args = {Arg::Ref(x)};
  Node* o = g.Append(NodeKind::kOutput, "output", "output");
  o->args = {Arg::List({Arg::Ref(c)})};
  return g;
}

std::vector<std::string> Names(const Graph& g) {
  std::vector<std::string> out;
  for (const Node* n : g.nodes()) out.push_back(n->name());
  return out;
}

TEST(Graph, LintAcceptsAWellFormedGraph) { EXPECT_TRUE(Chain().Lint().ok()); }

TEST(Graph, LintRejectsAPlaceholderAfterAnOp) {
  Graph g("late");
  Node* x = g.Append(NodeKind::kPlaceholder, "x", "x");
  g.Append(NodeKind::kCallFunction, "a", "aten::neg")->args = {Arg::Ref(x)};
  g.Append(NodeKind::kPlaceholder, "late", "late");
  g.Append(NodeKind::kOutput, "output", "output")->args = {Arg::List({Arg::Ref(x)})};
  auto st = g.Lint();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("placeholder after a non-placeholder"), std::string::npos) << st.error().message;
}

TEST(Graph, LintRejectsForwardReferencesAndMissingOutput) {
  Graph g("fwd");
  Node* x = g.Append(NodeKind::kPlaceholder, "x", "x");
  Node* a = g.Append(NodeKind::kCallFunction, "a", "aten::neg");
  Node* b = g.Append(NodeKind::kCallFunction, "b", "aten::neg");
  a->args = {Arg::Ref(b)};
  b->args = {Arg::Ref(x)};
  auto st = g.Lint();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("not an earlier node"), std::string::npos) << st.error().message;
  a->args = {Arg::Ref(x)};
  st = g.Lint();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("0 output nodes"), std::string::npos) << st.error().message;
}

TEST(Graph, LintChecksGetItemShape) {
  Graph g("gi");
  Node* x = g.Append(NodeKind::kPlaceholder, "x", "x");
  Node* gi = g.Append(NodeKind::kCallFunction, "gi", kGetItem);
  gi->args = {Arg::Ref(x), Arg::String("0")};
  g.Append(NodeKind::kOutput, "output", "output")->args = {Arg::List({Arg::Ref(gi)})};
  EXPECT_FALSE(g.Lint().ok());
}

TEST(Graph, CloneIsDeepAndIndependent) {
  Graph g = Chain();
  Graph c = g.Clone();
  ASSERT_TRUE(c.Lint().ok());
  EXPECT_EQ(GraphToText(g), GraphToText(c));
  c.Find("c")->set_target("aten::sigmoid");
  EXPECT_EQ(g.Find("c")->target(), "aten::relu");
  EXPECT_EQ(c.Find("b")->args[0].node, c.Find("a"));
}

TEST(Graph, DeadCodeEliminationKeepsPlaceholders) {
  Graph g = Chain();
  g.EliminateDeadCode();
  EXPECT_EQ(Names(g), (std::vector<std::string>{"x", "w", "a", "b", "c", "output"}));
  EXPECT_TRUE(g.Lint().ok());
}

TEST(Graph, PrefixReturnsChosenValuesAndDropsTheRest) {
  Graph g = Chain();
  auto p = g.Prefix(g.Find("b")->index(), {"a", "b"});
  ASSERT_TRUE(p.ok()) << p.error().message;
  EXPECT_EQ(Names(*p), (std::vector<std::string>{"x", "w", "a", "b", "output"}));
  EXPECT_EQ(p->OutputValues().size(), 2u);
  EXPECT_FALSE(g.Prefix(g.Find("a")->index(), {"c"}).ok());
}

TEST(Graph, ExtractTurnsBoundaryValuesIntoPlaceholders) {
  Graph g = Chain();
  auto s = g.Extract({"b", "c"}, {"c"});
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_EQ(Names(*s), (std::vector<std::string>{"a", "b", "c", "output"}));
  EXPECT_EQ(s->Find("a")->kind(), NodeKind::kPlaceholder);
  EXPECT_EQ(s->Find("b")->args[0].node, s->Find("a"));
  EXPECT_TRUE(s->Lint().ok());
}

TEST(Graph, RemoveUnusedPlaceholders) {
  Graph g = Chain();
  g.Find("d")->args = {Arg::Ref(g.Find("w"))};
  auto p = g.Prefix(g.Find("c")->index(), {"c"});
  ASSERT_TRUE(p.ok());
  Graph q = std::move(*p);
  auto e = q.Extract({"c"}, {"c"});
  ASSERT_TRUE(e.ok());
  Graph h = std::move(*e);
  EXPECT_TRUE(h.RemoveUnusedPlaceholders().empty());
  Graph k = Chain();
  k.Find("a")->args = {Arg::Ref(k.Find("x")), Arg::Ref(k.Find("x"))};
  k.EliminateDeadCode();
  EXPECT_EQ(k.RemoveUnusedPlaceholders(), std::vector<std::string>{"w"});
  EXPECT_TRUE(k.Lint().ok());
}

TEST(Graph, OperatorNameSplitsOverloads) {
  Graph g("n");
  Node* a = g.Append(NodeKind::kCallFunction, "a", "aten::add.Tensor");
  Node* b = g.Append(NodeKind::kCallFunction, "b", "aten::relu.default");
  Node* c = g.Append(NodeKind::kCallFunction, "c", "aten::relu");
  EXPECT_EQ(a->OperatorName(), (std::pair<std::string, std::string>{"aten::add", "Tensor"}));
  EXPECT_EQ(b->OperatorName(), (std::pair<std::string, std::string>{"aten::relu", ""}));
  EXPECT_EQ(c->OperatorName(), (std::pair<std::string, std::string>{"aten::relu", ""}));
}

}  // namespace
}  // namespace parity::ir
