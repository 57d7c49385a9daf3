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

// A symbolic graph: x : f32[s0] and n (a size input, s1); u = nonzero's count (u0), an unbacked
// u1 no value reads; guards over each.
TensorMeta Meta(c10::ScalarType dtype, std::vector<int64_t> shape, std::vector<std::string> sym_shape) {
  TensorMeta m;
  m.dtype = dtype;
  m.stride.assign(shape.size(), 1);
  m.shape = std::move(shape);
  m.sym_shape = std::move(sym_shape);
  return m;
}

Graph Symbolic() {
  Graph g("sym");
  Node* x = g.Append(NodeKind::kPlaceholder, "x", "x");
  x->meta = {Meta(c10::ScalarType::Float, {4}, {"s0"})};
  Node* n = g.Append(NodeKind::kPlaceholder, "n", "n");
  n->sym = "s1";
  Node* nz = g.Append(NodeKind::kCallFunction, "nz", "aten::nonzero");
  nz->args = {Arg::Ref(x)};
  nz->meta = {Meta(c10::ScalarType::Long, {2, 1}, {"u0", ""})};
  Node* r = g.Append(NodeKind::kCallFunction, "r", "aten::relu");
  r->args = {Arg::Ref(x)};
  r->meta = x->meta;
  Node* o = g.Append(NodeKind::kOutput, "output", "output");
  o->args = {Arg::List({Arg::Ref(nz), Arg::Ref(r), Arg::Ref(n)})};
  for (const char* s : {"s0", "s1", "s2", "u0", "u1"}) g.symbols[s].hint = 2;
  g.guards = {"s0 >= 2", "Eq(s1, 2*s2)", "u1 >= 0", "Ne(u0, 3)", "True"};
  return g;
}

std::vector<std::string> SymbolNames(const Graph& g) {
  std::vector<std::string> out;
  for (const auto& [name, s] : g.symbols) out.push_back(name);
  return out;
}

TEST(Graph, ASliceDeclaresTheSymbolsOfWhatItKept) {
  Graph g = Symbolic();
  g.PruneSymbols();  // u1 is read by nothing but its own guard
  EXPECT_EQ(SymbolNames(g), (std::vector<std::string>{"s0", "s1", "s2", "u0"}));
  EXPECT_EQ(g.guards, (std::vector<std::string>{"s0 >= 2", "Eq(s1, 2*s2)", "Ne(u0, 3)", "True"}));
  // Without nonzero and the size input: s0 alone (s2 goes with the guard relating it to s1).
  auto relu = Symbolic().Extract({"x", "r"}, {"r"});
  ASSERT_TRUE(relu.ok()) << relu.error().message;
  EXPECT_EQ(SymbolNames(*relu), std::vector<std::string>{"s0"});
  EXPECT_EQ(relu->guards, (std::vector<std::string>{"s0 >= 2", "True"}));
  // The size input dropped as unread, by the step that drops it.
  Graph k = Symbolic();
  k.Find("output")->args = {Arg::List({Arg::Ref(k.Find("r"))})};
  k.EliminateDeadCode();
  EXPECT_EQ(SymbolNames(k), (std::vector<std::string>{"s0", "s1", "s2"}));  // n still a placeholder
  EXPECT_EQ(k.RemoveUnusedPlaceholders(), std::vector<std::string>{"n"});
  EXPECT_EQ(SymbolNames(k), std::vector<std::string>{"s0"});
  // An expression that does not parse keeps every symbol.
  Graph bad = Symbolic();
  bad.guards.push_back("Eq(s0,");
  bad.PruneSymbols();
  EXPECT_EQ(bad.symbols.size(), 5u);
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
