// Higher-order ops in the interpreter (interpreter/hops.cpp, flex_attention.cpp): cond runs one
// branch, while_loop iterates, invoke_subgraph calls, map_impl maps; the fp64 run and autograd go
// through subgraphs; flex_attention is its math definition; an op parity cannot run is named.
#include <ATen/ops/allclose.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/full.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/relu.h>
#include <ATen/ops/sin.h>
#include <ATen/ops/softmax.h>
#include <ATen/ops/tensor.h>
#include <ATen/ops/where.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "interpreter/hops.h"
#include "interpreter/interpreter.h"
#include "repro/graph_json.h"
#include "repro/hop_check.h"
#include "test_helpers.h"

namespace parity::interp {
namespace {

using nlohmann::json;
using testing::ParseGraph;

Expected<RunResult> RunGraph(const ir::Graph& g, const TensorMap& inputs, const RunOptions& o = {}) {
  PARITY_ASSIGN_OR_RETURN(auto p, Program::Compile(g, "hops.json"));
  return p.Run(inputs, {}, o);
}

// relu(x) when x.sum() > 0, else sin(x).
const char* kCond = R"JSON({"version": 3, "name": "c",
  "subgraphs": {
    "t": {"nodes": [{"name": "a", "op": "placeholder"},
      {"name": "r", "op": "call_function", "target": "aten::relu", "args": [{"node": "a"}]},
      {"name": "output", "op": "output", "args": [[{"node": "r"}]]}]},
    "f": {"nodes": [{"name": "a", "op": "placeholder"},
      {"name": "s", "op": "call_function", "target": "aten::sin", "args": [{"node": "a"}]},
      {"name": "output", "op": "output", "args": [[{"node": "s"}]]}]}},
  "nodes": [
    {"name": "x", "op": "placeholder"},
    {"name": "sum", "op": "call_function", "target": "aten::sum", "args": [{"node": "x"}]},
    {"name": "p", "op": "call_function", "target": "aten::gt.Scalar", "args": [{"node": "sum"}, 0]},
    {"name": "c", "op": "call_function", "target": "hop::cond", "args": [{"node": "p"}, {"subgraph": "t"}, {"subgraph": "f"}, [{"node": "x"}]]},
    {"name": "g", "op": "call_function", "target": "getitem", "args": [{"node": "c"}, 0]},
    {"name": "output", "op": "output", "args": [[{"node": "g"}]]}]})JSON";

// A higher-order op's outputs are random where a subgraph it calls draws random numbers.
TEST(Hops, ACallOfASubgraphThatDrawsIsRandom) {
  std::string text = kCond;
  auto at = text.find("aten::sin");
  text.replace(at, std::string("aten::sin").size(), "aten::rand_like");
  const ir::Graph drawing = ParseGraph(text), plain = ParseGraph(kCond);  // a Program reads its graph
  auto p = Program::Compile(drawing, "test.json");
  ASSERT_TRUE(p.ok()) << p.error().message;
  EXPECT_EQ(p->RandomOutputs(), (std::vector<bool>{true}));
  auto q = Program::Compile(plain, "test.json");
  ASSERT_TRUE(q.ok()) << q.error().message;
  EXPECT_EQ(q->RandomOutputs(), (std::vector<bool>{false}));
}

TEST(Hops, CondRunsTheBranchItsPredicateChooses) {
  ir::Graph g = ParseGraph(kCond);
  const at::Tensor pos = at::arange(1.0, 7.0).sub(2.0), neg = pos.neg().sub(3.0);
  auto a = RunGraph(g, {{"x", pos}});
  ASSERT_TRUE(a.ok()) << a.error().message;
  EXPECT_TRUE(at::equal(a->outputs[0].toTensor(), at::relu(pos)));
  auto b = RunGraph(g, {{"x", neg}});
  ASSERT_TRUE(b.ok()) << b.error().message;
  EXPECT_TRUE(at::equal(b->outputs[0].toTensor(), at::sin(neg)));
  // The fp64 run goes through the branch; so does autograd.
  RunOptions fp64;
  fp64.float_dtype = c10::kDouble;
  auto c = RunGraph(g, {{"x", neg}}, fp64);
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->outputs[0].toTensor().scalar_type(), at::kDouble);
  RunOptions grad;
  grad.grad = true;
  const at::Tensor x = neg.clone().requires_grad_(true);
  auto d = RunGraph(g, {{"x", x}}, grad);
  ASSERT_TRUE(d.ok()) << d.error().message;
  d->outputs[0].toTensor().sum().backward();
  EXPECT_TRUE(at::allclose(x.grad(), neg.cos()));
}

TEST(Hops, WhileLoopIteratesAndInvokeSubgraphCalls) {
  // while i < 3: (i, x) = (i + 1, x * 2 + 1); then invoke_subgraph(body=relu) on x.
  ir::Graph g = ParseGraph(R"JSON({"version": 3, "name": "w",
    "subgraphs": {
      "cond": {"nodes": [{"name": "i", "op": "placeholder"}, {"name": "x", "op": "placeholder"},
        {"name": "lt", "op": "call_function", "target": "aten::lt.Scalar", "args": [{"node": "i"}, 3]},
        {"name": "output", "op": "output", "args": [{"node": "lt"}]}]},
      "body": {"nodes": [{"name": "i", "op": "placeholder"}, {"name": "x", "op": "placeholder"},
        {"name": "i1", "op": "call_function", "target": "aten::add.Tensor", "args": [{"node": "i"}, 1]},
        {"name": "m", "op": "call_function", "target": "aten::mul.Tensor", "args": [{"node": "x"}, 2]},
        {"name": "x1", "op": "call_function", "target": "aten::add.Tensor", "args": [{"node": "m"}, 1]},
        {"name": "output", "op": "output", "args": [[{"node": "i1"}, {"node": "x1"}]]}]},
      "relu": {"nodes": [{"name": "a", "op": "placeholder"},
        {"name": "r", "op": "call_function", "target": "aten::relu", "args": [{"node": "a"}]},
        {"name": "output", "op": "output", "args": [[{"node": "r"}]]}]}},
    "nodes": [
      {"name": "i0", "op": "placeholder"}, {"name": "x", "op": "placeholder"},
      {"name": "w", "op": "call_function", "target": "hop::while_loop", "args": [{"subgraph": "cond"}, {"subgraph": "body"}, [{"node": "i0"}, {"node": "x"}], []]},
      {"name": "i", "op": "call_function", "target": "getitem", "args": [{"node": "w"}, 0]},
      {"name": "y", "op": "call_function", "target": "getitem", "args": [{"node": "w"}, 1]},
      {"name": "v", "op": "call_function", "target": "hop::invoke_subgraph", "args": [{"subgraph": "relu"}, "subgraph_0", {"node": "y"}]},
      {"name": "z", "op": "call_function", "target": "getitem", "args": [{"node": "v"}, 0]},
      {"name": "output", "op": "output", "args": [[{"node": "i"}, {"node": "z"}]]}]})JSON");
  const at::Tensor x = at::arange(-4.0, 4.0);
  auto r = RunGraph(g, {{"i0", at::tensor(0)}, {"x", x}});
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->outputs[0].toTensor().item<int64_t>(), 3);
  EXPECT_TRUE(at::equal(r->outputs[1].toTensor(), at::relu(x.mul(8).add(7))));
}

TEST(Hops, WhatCannotRunIsNamed) {
  // A file calling an op parity does not know, or a branch with other operands than the call
  // gives, is refused when it is read (repro/hop_check.h), naming the node and the field.
  json j = json::parse(kCond);
  j["nodes"][3]["target"] = "hop::a_future_op";
  auto unknown = ir::GraphFromJson(j, "hops.json");
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.error().kind, ErrorKind::kBadInput);
  EXPECT_NE(unknown.error().message.find("field \"target\": hop::a_future_op is no higher-order op parity knows"), std::string::npos)
      << unknown.error().message;
  json arity = json::parse(kCond);
  arity["nodes"][3]["args"][3] = json::array({{{"node", "x"}}, {{"node", "x"}}});
  auto bad = ir::GraphFromJson(arity, "hops.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("takes 1 operands, the call gives it 2"), std::string::npos) << bad.error().message;
  // A graph made in memory (a pass's candidate) that calls one is Unsupported when compiled.
  ir::Graph g = ParseGraph(kCond);
  g.Find(j["nodes"][3]["name"].get<std::string>())->set_target("hop::a_future_op");
  auto p = Program::Compile(g, "hops.json");
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.error().kind, ErrorKind::kUnsupported);
  EXPECT_NE(p.error().message.find("the higher-order op a_future_op is not one parity runs"), std::string::npos) << p.error().message;
}

TEST(Hops, TheOpsAFileMayCallAreTheOpsTheInterpreterRuns) {
  std::vector<std::string> known = ir::KnownHigherOrderOps();
  std::sort(known.begin(), known.end());
  EXPECT_EQ(known, detail::RunnableHigherOrderOps());
}

TEST(Hops, AWhileLoopStopsAtALimitDerivedFromWhatTheProgramRan) {
  EXPECT_EQ(WhileLimit(4, 0), kWhileFloor);         // 16 x 4 is below the floor
  EXPECT_EQ(WhileLimit(1000, 0), 16000);            // 16 x what the program ran
  EXPECT_EQ(WhileLimit(std::nullopt, 0), kWhileCeiling);  // nothing recorded: the ceiling
  EXPECT_EQ(WhileLimit(int64_t{1} << 40, 0), kWhileCeiling);
  EXPECT_EQ(WhileLimit(4, 7), 7);                   // --while-limit
}

// flex_attention with a causal score function and an all-true mask function: softmax over the
// scaled scores where q_idx >= kv_idx, as the math definition.
TEST(Hops, FlexAttentionIsItsMathDefinition) {
  ir::Graph g = ParseGraph(R"JSON({"version": 3, "name": "flex",
    "subgraphs": {
      "score": {"nodes": [{"name": "s", "op": "placeholder"}, {"name": "b", "op": "placeholder"}, {"name": "h", "op": "placeholder"},
        {"name": "q", "op": "placeholder"}, {"name": "kv", "op": "placeholder"},
        {"name": "ge", "op": "call_function", "target": "aten::ge.Tensor", "args": [{"node": "q"}, {"node": "kv"}]},
        {"name": "w", "op": "call_function", "target": "aten::where.ScalarOther", "args": [{"node": "ge"}, {"node": "s"}, {"float": "-inf"}]},
        {"name": "output", "op": "output", "args": [{"node": "w"}]}]},
      "mask": {"nodes": [{"name": "b", "op": "placeholder"}, {"name": "h", "op": "placeholder"},
        {"name": "q", "op": "placeholder"}, {"name": "kv", "op": "placeholder"},
        {"name": "t", "op": "call_function", "target": "aten::new_ones", "args": [{"node": "b"}, []], "kwargs": {"dtype": {"dtype": "bool"}}},
        {"name": "output", "op": "output", "args": [{"node": "t"}]}]}},
    "nodes": [
      {"name": "q", "op": "placeholder"}, {"name": "k", "op": "placeholder"}, {"name": "v", "op": "placeholder"},
      {"name": "fa", "op": "call_function", "target": "hop::flex_attention", "args": [{"node": "q"}, {"node": "k"}, {"node": "v"},
        {"subgraph": "score"}, [1, 1, null, null, 1073741824, 1073741824, {"subgraph": "mask"}], 0.25,
        {"dict": {"BACKEND": "AUTO"}}, [], []]},
      {"name": "o", "op": "call_function", "target": "getitem", "args": [{"node": "fa"}, 0]},
      {"name": "output", "op": "output", "args": [[{"node": "o"}]]}]})JSON");
  const at::Tensor q = at::randn({1, 2, 6, 4}), k = at::randn({1, 2, 6, 4}), v = at::randn({1, 2, 6, 4});
  auto r = RunGraph(g, {{"q", q}, {"k", k}, {"v", v}});
  ASSERT_TRUE(r.ok()) << r.error().message;
  const at::Tensor scores = at::matmul(q, k.transpose(-2, -1)).mul(0.25);
  const at::Tensor causal = at::arange(6).view({6, 1}).ge(at::arange(6).view({1, 6}));
  const at::Tensor expected = at::matmul(at::softmax(at::where(causal, scores, at::full({}, -INFINITY)), -1), v);
  EXPECT_TRUE(at::allclose(r->outputs[0].toTensor(), expected, 1e-5, 1e-6));
  RunOptions fp64;
  fp64.float_dtype = c10::kDouble;
  auto r64 = RunGraph(g, {{"q", q}, {"k", k}, {"v", v}}, fp64);
  ASSERT_TRUE(r64.ok()) << r64.error().message;
  EXPECT_EQ(r64->outputs[0].toTensor().scalar_type(), at::kDouble);
}

}  // namespace
}  // namespace parity::interp
