#include "interpreter/interpreter.h"

#include <ATen/TensorIndexing.h>
#include <ATen/ops/allclose.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/max_pool2d.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/tensor.h>
#include <ATen/ops/zeros.h>
#include <gtest/gtest.h>

#include "repro/graph_json.h"
#include "repro/repro_dir.h"
#include "test_helpers.h"

namespace parity::interp {
namespace {

using ir::Arg;
using ir::Graph;
using ir::NodeKind;
using nlohmann::json;
using testing::ParseGraph;

Expected<RunResult> CompileAndRun(const Graph& g, const TensorMap& inputs, const RunOptions& o = {}) {
  PARITY_ASSIGN_OR_RETURN(auto p, Program::Compile(g, "test.json"));
  return p.Run(inputs, {}, o);
}

TEST(Interpreter, WrappedNumbersDefaultsAndBroadcastLists) {
  // add(x, 2) puts a Python int in a Tensor position; max_pool2d's kernel_size=2 fills int[2];
  // sum.dim_IntList takes its keepdim default from the schema.
  Graph g = ParseGraph(R"({"version": 1, "nodes": [
    {"name": "x", "op": "placeholder"},
    {"name": "a", "op": "call_function", "target": "aten::add.Tensor", "args": [{"node": "x"}, 2]},
    {"name": "p", "op": "call_function", "target": "aten::max_pool2d", "args": [{"node": "a"}, 2]},
    {"name": "s", "op": "call_function", "target": "aten::sum.dim_IntList", "args": [{"node": "p"}, [-1]]},
    {"name": "output", "op": "output", "args": [[{"node": "a"}, {"node": "p"}, {"node": "s"}]]}]})");
  at::Tensor x = at::randn({1, 2, 4, 4});
  auto r = CompileAndRun(g, {{"x", x}});
  ASSERT_TRUE(r.ok()) << r.error().message;
  at::Tensor a = x + 2;
  at::Tensor p = at::max_pool2d(a, {2, 2});
  EXPECT_TRUE(at::equal(r->outputs[0].toTensor(), a));
  EXPECT_EQ(r->outputs[0].toTensor().scalar_type(), at::kFloat);  // wrapped numbers do not promote
  EXPECT_TRUE(at::equal(r->outputs[1].toTensor(), p));
  EXPECT_TRUE(at::equal(r->outputs[2].toTensor(), p.sum({-1})));
}

TEST(Interpreter, TensorListsOptionalTensorListsAndGetItem) {
  Graph g = ParseGraph(R"({"version": 1, "nodes": [
    {"name": "x", "op": "placeholder"},
    {"name": "i", "op": "placeholder"},
    {"name": "c", "op": "call_function", "target": "aten::cat", "args": [[{"node": "x"}, {"node": "x"}]], "kwargs": {"dim": 1}},
    {"name": "ix", "op": "call_function", "target": "aten::index.Tensor", "args": [{"node": "c"}, [null, {"node": "i"}]]},
    {"name": "mx", "op": "call_function", "target": "aten::max.dim", "args": [{"node": "ix"}, 1]},
    {"name": "v", "op": "call_function", "target": "getitem", "args": [{"node": "mx"}, 0]},
    {"name": "k", "op": "call_function", "target": "getitem", "args": [{"node": "mx"}, 1]},
    {"name": "output", "op": "output", "args": [[{"node": "v"}, {"node": "k"}]]}]})");
  at::Tensor x = at::randn({3, 4});
  at::Tensor i = at::tensor(std::vector<int64_t>{0, 5, 7});
  auto r = CompileAndRun(g, {{"x", x}, {"i", i}});
  ASSERT_TRUE(r.ok()) << r.error().message;
  at::Tensor c = at::cat({x, x}, 1);
  auto [v, k] = c.index({at::indexing::Slice(), i}).max(1);
  EXPECT_TRUE(at::equal(r->outputs[0].toTensor(), v));
  EXPECT_TRUE(at::equal(r->outputs[1].toTensor(), k));
}

TEST(Interpreter, Float64ModeWidensDataAndDtypeArguments) {
  Graph g = ParseGraph(R"({"version": 1, "nodes": [
    {"name": "x", "op": "placeholder"},
    {"name": "f", "op": "call_function", "target": "aten::full", "args": [[2], 0.1], "kwargs": {"dtype": {"dtype": "float32"}, "device": {"device": "cpu"}}},
    {"name": "i", "op": "call_function", "target": "aten::ones", "args": [[2]], "kwargs": {"dtype": {"dtype": "int64"}}},
    {"name": "a", "op": "call_function", "target": "aten::add.Tensor", "args": [{"node": "x"}, {"node": "f"}]},
    {"name": "output", "op": "output", "args": [[{"node": "a"}, {"node": "i"}]]}]})");
  RunOptions o;
  o.float_dtype = c10::kDouble;
  auto r = CompileAndRun(g, {{"x", at::randn({2})}}, o);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->outputs[0].toTensor().scalar_type(), at::kDouble);
  EXPECT_EQ(r->outputs[1].toTensor().scalar_type(), at::kLong);
}

TEST(Interpreter, RecordsIntermediatesOnlyWhenAsked) {
  Graph g = ParseGraph(R"({"version": 1, "nodes": [
    {"name": "x", "op": "placeholder"},
    {"name": "a", "op": "call_function", "target": "aten::neg", "args": [{"node": "x"}]},
    {"name": "b", "op": "call_function", "target": "aten::exp", "args": [{"node": "a"}]},
    {"name": "output", "op": "output", "args": [[{"node": "b"}]]}]})");
  at::Tensor x = at::randn({5});
  auto plain = CompileAndRun(g, {{"x", x}});
  ASSERT_TRUE(plain.ok());
  EXPECT_TRUE(plain->values.empty());
  RunOptions o;
  o.record = {"a"};
  auto some = CompileAndRun(g, {{"x", x}}, o);
  ASSERT_TRUE(some.ok());
  ASSERT_EQ(some->values.size(), 1u);
  EXPECT_TRUE(at::equal(some->values.at("a").toTensor(), -x));
  o.record_all = true;
  auto all = CompileAndRun(g, {{"x", x}}, o);
  EXPECT_EQ(all->values.size(), 3u);
  o.record = {"nope"};
  EXPECT_FALSE(CompileAndRun(g, {{"x", x}}, o).ok());
}

TEST(Interpreter, RuntimeErrorsNameTheNode) {
  Graph g = ParseGraph(R"({"version": 1, "nodes": [
    {"name": "x", "op": "placeholder"},
    {"name": "mm", "op": "call_function", "target": "aten::mm", "args": [{"node": "x"}, {"node": "x"}]},
    {"name": "output", "op": "output", "args": [[{"node": "mm"}]]}]})");
  auto r = CompileAndRun(g, {{"x", at::randn({2, 3})}});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().kind, ErrorKind::kRuntime);
  EXPECT_NE(r.error().message.find("node \"mm\" (aten::mm)"), std::string::npos) << r.error().message;
  EXPECT_FALSE(CompileAndRun(g, {}).ok());  // a missing input is reported, not a crash
}

TEST(Interpreter, OpsTheDispatcherLacksAreNamedBeforeARun) {
  Graph g = ParseGraph(R"({"version": 1, "nodes": [
    {"name": "x", "op": "placeholder"},
    {"name": "r", "op": "call_function", "target": "aten::relu", "args": [{"node": "x"}]},
    {"name": "h", "op": "call_function", "target": "mylib::scale", "args": [{"node": "r"}]},
    {"name": "output", "op": "output", "args": [[{"node": "h"}]]}]})");
  const Status st = CheckOpsKnown(g, "g.json", {});
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().kind, ErrorKind::kBadInput);
  EXPECT_NE(st.error().message.find("g.json: node \"h\": unknown op \"mylib::scale\""), std::string::npos) << st.error().message;
  EXPECT_TRUE(CheckOpsKnown(g, "g.json", {"mylib::scale"}).ok());  // a host op: the worker registers it
}

TEST(Interpreter, HookSeesAndReplacesValues) {
  Graph g = ParseGraph(R"({"version": 1, "nodes": [
    {"name": "x", "op": "placeholder"},
    {"name": "r", "op": "call_function", "target": "aten::relu", "args": [{"node": "x"}]},
    {"name": "n", "op": "call_function", "target": "aten::neg", "args": [{"node": "r"}]},
    {"name": "output", "op": "output", "args": [[{"node": "n"}]]}]})");
  RunOptions o;
  std::vector<std::string> seen;
  o.hook = [&](const ir::Node& n, c10::IValue& v) {
    seen.push_back(n.name());
    if (n.target() == "aten::relu") v = v.toTensor() + 1;
    return Status::Ok();
  };
  at::Tensor x = at::randn({4});
  auto r = CompileAndRun(g, {{"x", x}}, o);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(seen, (std::vector<std::string>{"r", "n"}));
  EXPECT_TRUE(at::equal(r->outputs[0].toTensor(), -(x.relu() + 1)));
}

TEST(Interpreter, GradModeBuildsAnAutogradGraph) {
  Graph g = ParseGraph(R"({"version": 1, "nodes": [
    {"name": "x", "op": "placeholder"},
    {"name": "w", "op": "get_attr", "target": "w"},
    {"name": "m", "op": "call_function", "target": "aten::mul.Tensor", "args": [{"node": "x"}, {"node": "w"}]},
    {"name": "s", "op": "call_function", "target": "aten::sum", "args": [{"node": "m"}]},
    {"name": "output", "op": "output", "args": [[{"node": "s"}]]}]})");
  auto p = Program::Compile(g, "test.json");
  ASSERT_TRUE(p.ok());
  at::Tensor x = at::randn({3});
  at::Tensor w = at::randn({3}).requires_grad_(true);
  RunOptions o;
  o.grad = true;
  auto r = p->Run({{"x", x}}, {{"w", w}}, o);
  ASSERT_TRUE(r.ok()) << r.error().message;
  r->outputs[0].toTensor().backward();
  EXPECT_TRUE(at::allclose(w.grad(), x));
}

// The captured graphs of real models run and match the Python eager outputs stored at capture.
class CapturedModel : public ::testing::TestWithParam<std::string> {};

TEST_P(CapturedModel, MatchesPythonEager) {
  PARITY_REQUIRE_TEST_DATA();
  auto repro = ReproDir::Load(testing::TestData() / "models" / GetParam());
  ASSERT_TRUE(repro.ok()) << repro.error().message;
  for (const GraphEntry& g : repro->graphs()) {
    auto p = Program::Compile(g.graph, g.file);
    ASSERT_TRUE(p.ok()) << p.error().message;
    auto r = p->Run(*repro->Inputs(g), *repro->Attrs(g));
    ASSERT_TRUE(r.ok()) << r.error().message;
    auto expected = repro->ExpectedOutputs(g);
    ASSERT_TRUE(expected.ok());
    ASSERT_EQ(r->outputs.size(), expected->size());
    for (size_t k = 0; k < expected->size(); ++k) {
      const at::Tensor& want = (*expected)[k];
      const at::Tensor got = r->outputs[k].toTensor();
      ASSERT_EQ(got.sizes(), want.sizes());
      EXPECT_TRUE(at::equal(got, want) || at::allclose(got, want, 1e-6, 0)) << GetParam() << " output " << k;
    }
    RunOptions o;
    o.float_dtype = c10::kDouble;
    auto r64 = p->Run(*repro->Inputs(g), *repro->Attrs(g), o);
    ASSERT_TRUE(r64.ok()) << r64.error().message;
    EXPECT_TRUE(at::allclose(r64->outputs[0].toTensor().to(at::kFloat), (*expected)[0], 1e-3, 1e-3));
  }
}

INSTANTIATE_TEST_SUITE_P(Suite, CapturedModel, ::testing::Values("mlp", "resnet", "llama", "bert"));


// x: f32[s0, 4], s0 also passed as a SymInt; the graph flattens x with a size it computes.
const char* kSymbolic = R"JSON({"version": 2, "name": "sym",
  "symbols": {"s0": {"hint": 3, "min": 2, "max": 16}},
  "guards": ["Ne(s0, 7)"],
  "nodes": [
    {"name": "s0", "op": "placeholder", "meta": {"sym": "s0"}},
    {"name": "x", "op": "placeholder", "meta": {"val": [{"dtype": "float32", "shape": [3, 4], "stride": [4, 1], "sym_shape": ["s0", null]}]}},
    {"name": "n", "op": "call_function", "target": "sym::mul", "args": [{"node": "s0"}, 4], "meta": {"sym": "4*s0"}},
    {"name": "v", "op": "call_function", "target": "aten::view", "args": [{"node": "x"}, [{"node": "n"}]]},
    {"name": "h", "op": "call_function", "target": "sym::floordiv", "args": [{"node": "s0"}, 2], "meta": {"sym": "(s0//2)"}},
    {"name": "k", "op": "call_function", "target": "aten::narrow", "args": [{"node": "x"}, 0, 0, {"node": "h"}]},
    {"name": "output", "op": "output", "args": [[{"node": "v"}, {"node": "k"}]]}]})JSON";

TEST(Interpreter, SymbolicGraphRunsAtEverySizeItsRangeAllows) {
  Graph g = ParseGraph(kSymbolic);
  ASSERT_TRUE(g.symbolic());
  for (int64_t rows : {3, 5, 16}) {
    at::Tensor x = at::randn({rows, 4});
    auto r = CompileAndRun(g, {{"x", x}});
    ASSERT_TRUE(r.ok()) << rows << ": " << r.error().message;
    EXPECT_TRUE(at::equal(r->outputs[0].toTensor(), x.reshape({rows * 4})));
    EXPECT_TRUE(at::equal(r->outputs[1].toTensor(), x.narrow(0, 0, rows / 2)));
  }
}

TEST(Interpreter, BindSymbolsRefusesRangesGuardsAndDisagreement) {
  Graph g = ParseGraph(kSymbolic);
  auto bound = BindSymbols(g, {{"x", at::randn({5, 4})}});
  ASSERT_TRUE(bound.ok()) << bound.error().message;
  EXPECT_EQ(bound->at("s0"), 5);
  auto low = CompileAndRun(g, {{"x", at::randn({1, 4})}});
  ASSERT_FALSE(low.ok());
  EXPECT_EQ(low.error().kind, ErrorKind::kBadInput);
  EXPECT_NE(low.error().message.find("symbol s0 = 1 is outside its range [2, 16]"), std::string::npos) << low.error().message;
  auto guard = CompileAndRun(g, {{"x", at::randn({7, 4})}});
  ASSERT_FALSE(guard.ok());
  EXPECT_NE(guard.error().message.find("guard Ne(s0, 7) does not hold for s0 = 7"), std::string::npos) << guard.error().message;
  // An input with no tensor binding its symbol keeps the recorded hint.
  Graph two = ParseGraph(R"({"version": 2, "symbols": {"s0": {"hint": 3, "min": 2, "max": null}}, "nodes": [
    {"name": "a", "op": "placeholder", "meta": {"val": [{"dtype": "float32", "shape": [3], "stride": [1], "sym_shape": ["s0"]}]}},
    {"name": "b", "op": "placeholder", "meta": {"val": [{"dtype": "float32", "shape": [3], "stride": [1], "sym_shape": ["s0"]}]}},
    {"name": "c", "op": "call_function", "target": "aten::add.Tensor", "args": [{"node": "a"}, {"node": "b"}]},
    {"name": "output", "op": "output", "args": [[{"node": "c"}]]}]})");
  auto differ = BindSymbols(two, {{"a", at::randn({4})}, {"b", at::randn({5})}});
  ASSERT_FALSE(differ.ok());
  EXPECT_NE(differ.error().message.find("symbol s0 is 4 by one input and 5 by input \"b\""), std::string::npos) << differ.error().message;
}

// Size arithmetic as programs write it (`round(n / 2)`, `n << 1`, `n ^ 3`, `n & 6`,
// `math.sqrt(n)`, `torch.sym_sum([...])`), each with Python's value at every size.
TEST(Interpreter, SizeArithmeticHasPythonsValues) {
  Graph g = ParseGraph(R"JSON({"version": 2, "name": "arith", "symbols": {"s0": {"hint": 5, "min": 2, "max": null}},
  "nodes": [
    {"name": "x", "op": "placeholder", "meta": {"val": [{"dtype": "float32", "shape": [5], "stride": [1], "sym_shape": ["s0"]}]}},
    {"name": "n", "op": "call_function", "target": "aten::sym_size.int", "args": [{"node": "x"}, 0], "meta": {"sym": "s0"}},
    {"name": "half", "op": "call_function", "target": "sym::truediv", "args": [{"node": "n"}, 2], "meta": {"sym": "IntTrueDiv(s0, 2)", "sym_type": "float"}},
    {"name": "r", "op": "call_function", "target": "sym::round", "args": [{"node": "half"}, null], "meta": {"sym": "RoundToInt(IntTrueDiv(s0, 2))"}},
    {"name": "l", "op": "call_function", "target": "sym::lshift", "args": [{"node": "n"}, 1], "meta": {"sym": "2*s0"}},
    {"name": "rs", "op": "call_function", "target": "sym::rshift", "args": [{"node": "n"}, 1], "meta": {"sym": "RShift(s0, 1)"}},
    {"name": "xo", "op": "call_function", "target": "sym::xor", "args": [{"node": "n"}, 3], "meta": {"sym": "BitwiseFn_bitwise_xor(s0, 3)"}},
    {"name": "an", "op": "call_function", "target": "sym::and", "args": [{"node": "n"}, 6], "meta": {"sym": "BitwiseFn_bitwise_and(s0, 6)"}},
    {"name": "sm", "op": "call_function", "target": "sym::sym_sum", "args": [[{"node": "r"}, {"node": "l"}, {"node": "rs"}, {"node": "xo"}, {"node": "an"}]], "meta": {"sym": "RoundToInt(IntTrueDiv(s0, 2)) + 2*s0 + RShift(s0, 1) + BitwiseFn_bitwise_xor(s0, 3) + BitwiseFn_bitwise_and(s0, 6)"}},
    {"name": "f", "op": "call_function", "target": "sym::float", "args": [{"node": "n"}], "meta": {"sym": "ToFloat(s0)", "sym_type": "float"}},
    {"name": "q", "op": "call_function", "target": "sym::sqrt", "args": [{"node": "f"}], "meta": {"sym": "OpaqueUnaryFn_sqrt(ToFloat(s0))", "sym_type": "float"}},
    {"name": "big", "op": "call_function", "target": "sym::gt", "args": [{"node": "n"}, 4], "meta": {"sym": "s0 > 4", "sym_type": "bool"}},
    {"name": "nb", "op": "call_function", "target": "sym::sym_not", "args": [{"node": "big"}], "meta": {"sym": "s0 <= 4", "sym_type": "bool"}},
    {"name": "y", "op": "call_function", "target": "aten::mul.Tensor", "args": [{"node": "x"}, {"node": "q"}]},
    {"name": "output", "op": "output", "args": [[{"node": "sm"}, {"node": "y"}, {"node": "nb"}]]}]})JSON");
  for (int64_t n : {5, 6, 7}) {
    at::Tensor x = at::randn({n});
    auto r = CompileAndRun(g, {{"x", x}});
    ASSERT_TRUE(r.ok()) << n << ": " << r.error().message;
    const int64_t rounded = n == 5 ? 2 : n == 6 ? 3 : 4;  // round(2.5) = 2, round(3.5) = 4: halves to even
    EXPECT_EQ(r->outputs[0].toTensor().item<int64_t>(), rounded + (n << 1) + (n >> 1) + (n ^ 3) + (n & 6)) << n;
    EXPECT_TRUE(at::allclose(r->outputs[1].toTensor(), x * std::sqrt(static_cast<double>(n))));
    EXPECT_EQ(r->outputs[2].toTensor().item<bool>(), n <= 4);  // a number the graph returns: a 0-dim tensor
  }
}

TEST(Interpreter, ASizeFloatPastInt64IsAnErrorNotAnInteger) {
  Graph g = ParseGraph(R"JSON({"version": 2, "name": "big", "symbols": {"s0": {"hint": 5, "min": 2, "max": null}},
  "nodes": [
    {"name": "x", "op": "placeholder", "meta": {"val": [{"dtype": "float32", "shape": [5], "stride": [1], "sym_shape": ["s0"]}]}},
    {"name": "n", "op": "call_function", "target": "aten::sym_size.int", "args": [{"node": "x"}, 0], "meta": {"sym": "s0"}},
    {"name": "f", "op": "call_function", "target": "sym::mul", "args": [{"node": "n"}, 1e300], "meta": {"sym": "s0", "sym_type": "float"}},
    {"name": "i", "op": "call_function", "target": "sym::int", "args": [{"node": "f"}], "meta": {"sym": "s0"}},
    {"name": "output", "op": "output", "args": [[{"node": "i"}]]}]})JSON");
  auto r = CompileAndRun(g, {{"x", at::randn({5})}});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("outside int64"), std::string::npos) << r.error().message;
}

// `out * x.shape[0]` and `out / x.shape[0]` of a symbolic graph: a size value (SymInt, SymFloat)
// in a Tensor position is a wrapped number, as Python makes it, in the float32 run and the fp64
// reference alike.
TEST(Interpreter, SizesFlowIntoTensorArgumentsAsWrappedNumbers) {
  Graph g = ParseGraph(R"({"version": 2, "symbols": {"s0": {"hint": 8, "min": 2, "max": null}}, "nodes": [
    {"name": "x", "op": "placeholder", "meta": {"val": [{"dtype": "float32", "shape": [8, 3], "stride": [3, 1], "sym_shape": ["s0", null]}]}},
    {"name": "n", "op": "call_function", "target": "aten::sym_size.int", "args": [{"node": "x"}, 0], "meta": {"sym": "s0"}},
    {"name": "h", "op": "call_function", "target": "sym::truediv", "args": [{"node": "n"}, 2], "meta": {"sym": "s0/2", "sym_type": "float"}},
    {"name": "m", "op": "call_function", "target": "aten::mul.Tensor", "args": [{"node": "x"}, {"node": "n"}]},
    {"name": "d", "op": "call_function", "target": "aten::div.Tensor", "args": [{"node": "x"}, {"node": "h"}]},
    {"name": "output", "op": "output", "args": [[{"node": "m"}, {"node": "d"}]]}]})");
  for (int64_t rows : {8, 5, 3}) {
    at::Tensor x = at::randn({rows, 3});
    auto r = CompileAndRun(g, {{"x", x}});
    ASSERT_TRUE(r.ok()) << rows << ": " << r.error().message;
    EXPECT_TRUE(at::equal(r->outputs[0].toTensor(), x * rows));
    EXPECT_EQ(r->outputs[0].toTensor().scalar_type(), at::kFloat);  // an int size does not promote
    EXPECT_TRUE(at::allclose(r->outputs[1].toTensor(), x / (rows / 2.0)));
    EXPECT_EQ(r->outputs[1].toTensor().scalar_type(), at::kFloat);
    RunOptions fp64;
    fp64.float_dtype = c10::kDouble;
    auto r64 = CompileAndRun(g, {{"x", x}}, fp64);
    ASSERT_TRUE(r64.ok()) << r64.error().message;
    EXPECT_EQ(r64->outputs[0].toTensor().scalar_type(), at::kDouble);
  }
}

// A value the graph makes from data (nonzero's size u0, `.item()`) is no input's size: binding
// leaves it to the node that makes it (a guard over it is not checked before the run), and a
// number the graph returns leaves the run as a 0-dim tensor of its type.
TEST(Interpreter, DataDependentValuesAndNumberOutputs) {
  Graph g = ParseGraph(R"({"version": 2, "symbols": {"u0": {"hint": 2, "min": 0, "max": 6, "unbacked": true},
      "zuf0": {"hint": 1.5, "min": null, "max": null, "unbacked": true}},
    "guards": ["u0 >= 1"],
    "nodes": [
    {"name": "x", "op": "placeholder", "meta": {"val": [{"dtype": "float32", "shape": [6], "stride": [1]}]}},
    {"name": "nz", "op": "call_function", "target": "aten::nonzero", "args": [{"node": "x"}],
     "meta": {"val": [{"dtype": "int64", "shape": [2, 1], "stride": [1, 1], "sym_shape": ["u0", null]}]}},
    {"name": "n", "op": "call_function", "target": "aten::sym_size.int", "args": [{"node": "nz"}, 0], "meta": {"sym": "u0"}},
    {"name": "m", "op": "call_function", "target": "aten::max", "args": [{"node": "x"}]},
    {"name": "f", "op": "call_function", "target": "aten::_local_scalar_dense", "args": [{"node": "m"}], "meta": {"sym": "zuf0", "sym_type": "float"}},
    {"name": "t", "op": "call_function", "target": "sym::gt", "args": [{"node": "f"}, 0], "meta": {"sym": "zuf0 > 0", "sym_type": "bool"}},
    {"name": "y", "op": "call_function", "target": "aten::mul.Tensor", "args": [{"node": "x"}, {"node": "n"}]},
    {"name": "output", "op": "output", "args": [[{"node": "y"}, {"node": "n"}, {"node": "f"}, {"node": "t"}]]}]})");
  const at::Tensor x = at::tensor({0.0, 3.0, 0.0, 0.0, 0.0, 0.0}, at::kFloat);  // one nonzero: u0 = 1 here, 2 recorded
  auto r = CompileAndRun(g, {{"x", x}});
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_TRUE(at::equal(r->outputs[0].toTensor(), x));
  const at::Tensor n = r->outputs[1].toTensor(), f = r->outputs[2].toTensor(), t = r->outputs[3].toTensor();
  EXPECT_EQ(n.dim(), 0);
  EXPECT_EQ(n.scalar_type(), at::kLong);
  EXPECT_EQ(n.item<int64_t>(), 1);
  EXPECT_EQ(f.scalar_type(), at::kDouble);
  EXPECT_EQ(f.item<double>(), 3.0);
  EXPECT_EQ(t.scalar_type(), at::kBool);
  EXPECT_TRUE(t.item<bool>());
  auto bound = BindSymbols(g, {{"x", x}});
  ASSERT_TRUE(bound.ok()) << bound.error().message;  // "u0 >= 1" is the graph's own business
}

TEST(Interpreter, NoneInATensorPositionIsAnUndefinedTensor) {
  // As torch's Python binding passes it: AOTAutograd's backward on CUDA calls
  // _scaled_dot_product_efficient_attention_backward with attn_bias None (a Tensor, not Tensor?).
  // cudnn_is_acceptable takes a Tensor and says false of an undefined one.
  Graph g = ParseGraph(R"({"version": 1, "nodes": [
    {"name": "x", "op": "placeholder"},
    {"name": "ok", "op": "call_function", "target": "aten::cudnn_is_acceptable", "args": [null]},
    {"name": "y", "op": "call_function", "target": "aten::mul.Tensor", "args": [{"node": "x"}, 2]},
    {"name": "output", "op": "output", "args": [[{"node": "y"}, {"node": "ok"}]]}]})");
  auto r = CompileAndRun(g, {{"x", at::ones({2})}});
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_FALSE(r->outputs[1].toTensor().item<bool>());
  // The attention backward's graph compiles (its kernel is CUDA's: not run here).
  Graph a = ParseGraph(R"({"version": 1, "nodes": [
    {"name": "g", "op": "placeholder"}, {"name": "q", "op": "placeholder"}, {"name": "lse", "op": "placeholder"},
    {"name": "seed", "op": "placeholder"}, {"name": "off", "op": "placeholder"},
    {"name": "b", "op": "call_function", "target": "aten::_scaled_dot_product_efficient_attention_backward",
     "args": [{"node": "g"}, {"node": "q"}, {"node": "q"}, {"node": "q"}, null, {"node": "g"}, {"node": "lse"},
              {"node": "seed"}, {"node": "off"}, 0.0, [true, true, true, false]], "kwargs": {"is_causal": true}},
    {"name": "output", "op": "output", "args": [[{"node": "b"}]]}]})");
  auto p = Program::Compile(a, "test.json");
  EXPECT_TRUE(p.ok()) << p.error().message;
}

// Outputs that depend on random numbers or uninitialized memory, however far upstream, are
// known as such (a replay draws its own numbers); the others are not.
TEST(Interpreter, KnowsWhichOutputsAreRandom) {
  Graph g = ParseGraph(R"({"version": 1, "nodes": [
    {"name": "x", "op": "placeholder"},
    {"name": "r", "op": "call_function", "target": "aten::rand_like", "args": [{"node": "x"}]},
    {"name": "e", "op": "call_function", "target": "aten::empty_like", "args": [{"node": "x"}]},
    {"name": "b", "op": "call_function", "target": "aten::bernoulli_.float", "args": [{"node": "e"}, 0.5]},
    {"name": "a", "op": "call_function", "target": "aten::add.Tensor", "args": [{"node": "x"}, {"node": "r"}]},
    {"name": "m", "op": "call_function", "target": "aten::mul.Tensor", "args": [{"node": "x"}, 2]},
    {"name": "output", "op": "output", "args": [[{"node": "a"}, {"node": "m"}, {"node": "b"}, {"node": "x"}]]}]})");
  auto p = Program::Compile(g, "test.json");
  ASSERT_TRUE(p.ok()) << p.error().message;
  EXPECT_EQ(p->RandomOutputs(), (std::vector<bool>{true, false, true, false}));
}

// Attention's ops carry the random tag for their dropout: with dropout_p 0 (given or defaulted)
// their outputs are compared by value like any other; with dropout they are random.
TEST(Interpreter, AttentionIsRandomOnlyWithDropout) {
  Graph g = ParseGraph(R"({"version": 1, "nodes": [
    {"name": "q", "op": "placeholder"},
    {"name": "a", "op": "call_function", "target": "aten::scaled_dot_product_attention", "args": [{"node": "q"}, {"node": "q"}, {"node": "q"}]},
    {"name": "b", "op": "call_function", "target": "aten::scaled_dot_product_attention", "args": [{"node": "q"}, {"node": "q"}, {"node": "q"}, null, 0.0]},
    {"name": "c", "op": "call_function", "target": "aten::scaled_dot_product_attention", "args": [{"node": "q"}, {"node": "q"}, {"node": "q"}], "kwargs": {"dropout_p": 0.1}},
    {"name": "output", "op": "output", "args": [[{"node": "a"}, {"node": "b"}, {"node": "c"}]]}]})");
  auto p = Program::Compile(g, "test.json");
  ASSERT_TRUE(p.ok()) << p.error().message;
  EXPECT_EQ(p->RandomOutputs(), (std::vector<bool>{false, false, true}));
}

// A ZeroTensor (autograd's zero gradient) has no storage: it leaves a run as ordinary zeros, so
// every consumer (comparators, files) can read it.
TEST(Interpreter, ZeroTensorOutputsAreMaterialized) {
  Graph g = ParseGraph(R"({"version": 1, "nodes": [
    {"name": "z", "op": "call_function", "target": "aten::_efficientzerotensor", "args": [[2, 3]], "kwargs": {"dtype": {"dtype": "float32"}}},
    {"name": "output", "op": "output", "args": [[{"node": "z"}]]}]})");
  auto r = CompileAndRun(g, {});
  ASSERT_TRUE(r.ok()) << r.error().message;
  const at::Tensor z = r->outputs[0].toTensor();
  EXPECT_FALSE(z._is_zerotensor());
  ASSERT_NE(z.const_data_ptr(), nullptr);
  EXPECT_TRUE(at::equal(z, at::zeros({2, 3})));
}

// The fp64 reference follows one rule for what the graph makes itself: a buffer made by a factory
// op with its default dtype (float32), filled by index_put_ from a widened source and checked by
// _assert_tensor_metadata, runs in float64 where the float32 run runs.
TEST(Interpreter, Float64ModeWidensWhatTheGraphMakes) {
  Graph g = ParseGraph(R"({"version": 1, "nodes": [
    {"name": "x", "op": "placeholder"},
    {"name": "i", "op": "placeholder"},
    {"name": "z", "op": "call_function", "target": "aten::zeros", "args": [[5]], "kwargs": {"device": {"device": "cpu"}, "pin_memory": false}},
    {"name": "p", "op": "call_function", "target": "aten::index_put_", "args": [{"node": "z"}, [{"node": "i"}], {"node": "x"}]},
    {"name": "s", "op": "call_function", "target": "aten::scalar_tensor", "args": [0.5]},
    {"name": "a", "op": "call_function", "target": "aten::add.Tensor", "args": [{"node": "p"}, {"node": "s"}]},
    {"name": "c", "op": "call_function", "target": "aten::_assert_tensor_metadata", "args": [{"node": "a"}], "kwargs": {"dtype": {"dtype": "float32"}}},
    {"name": "output", "op": "output", "args": [[{"node": "a"}]]}]})");
  at::Tensor x = at::randn({2});
  at::Tensor i = at::tensor(std::vector<int64_t>{1, 3});
  auto r32 = CompileAndRun(g, {{"x", x}, {"i", i}});
  ASSERT_TRUE(r32.ok()) << r32.error().message;
  RunOptions fp64;
  fp64.float_dtype = c10::kDouble;
  auto r64 = CompileAndRun(g, {{"x", x}, {"i", i}}, fp64);
  ASSERT_TRUE(r64.ok()) << r64.error().message;
  const at::Tensor out = r64->outputs[0].toTensor();
  EXPECT_EQ(out.scalar_type(), at::kDouble);
  EXPECT_TRUE(at::allclose(out.to(at::kFloat), r32->outputs[0].toTensor()));
}

}  // namespace
}  // namespace parity::interp

namespace parity::interp {
namespace {

TEST(WithCapturedLayout, RestoresTheRecordedStridesWithTheSameValues) {
  at::Tensor t = at::arange(24, at::kFloat).reshape({2, 3, 4});
  const ir::TensorMeta transposed{c10::kFloat, {2, 3, 4}, {1, 8, 2}};  // dims (0, 2, 1) innermost first
  at::Tensor out = WithCapturedLayout(t, transposed);
  EXPECT_EQ(out.strides(), c10::IntArrayRef({1, 8, 2}));
  EXPECT_TRUE(at::equal(out, t));
}

TEST(WithCapturedLayout, LeavesWhatItCannotOrNeedNotRelayout) {
  at::Tensor t = at::arange(6, at::kFloat).reshape({2, 3});
  EXPECT_TRUE(WithCapturedLayout(t, std::nullopt).is_same(t));
  EXPECT_TRUE(WithCapturedLayout(t, ir::TensorMeta{c10::kFloat, {2, 3}, {3, 1}}).is_same(t));     // already so
  EXPECT_TRUE(WithCapturedLayout(t, ir::TensorMeta{c10::kFloat, {3, 2}, {1, 3}}).is_same(t));     // another shape
  EXPECT_TRUE(WithCapturedLayout(t, ir::TensorMeta{c10::kFloat, {2, 3}, {0, 1}}).is_same(t));     // expanded: overlaps
  EXPECT_TRUE(WithCapturedLayout(t, ir::TensorMeta{c10::kFloat, {2, 3}, {6, 1}}).is_same(t));     // gaps: not dense
  EXPECT_TRUE(WithCapturedLayout(t, ir::TensorMeta{c10::kFloat, {2, 3}, {}}).is_same(t));         // no strides recorded
  at::Tensor one = at::ones({1, 3});
  EXPECT_TRUE(WithCapturedLayout(one, ir::TensorMeta{c10::kFloat, {1, 3}, {7, 1}}).is_same(one));  // size-1 dims: any stride
}


}  // namespace
}  // namespace parity::interp
