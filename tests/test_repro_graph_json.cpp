#include "repro/graph_json.h"
#include "repro/graph_text.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "test_helpers.h"

namespace parity::ir {
namespace {

using nlohmann::json;
using parity::testing::FailsWith;

const char* kAllKinds = R"JSON({
  "format": "parity.graph", "version": 1, "name": "kinds",
  "nodes": [
    {"name": "x", "op": "placeholder", "target": "x", "meta": {"val": [{"dtype": "float32", "shape": [2, 3], "stride": [3, 1]}]}},
    {"name": "w", "op": "get_attr", "target": "param/w"},
    {"name": "f", "op": "call_function", "target": "aten::full",
     "args": [[2, 3], {"float": "-inf"}],
     "kwargs": {"dtype": {"dtype": "bfloat16"}, "layout": {"layout": "strided"}, "device": {"device": "cpu"}, "pin_memory": false}},
    {"name": "c", "op": "call_function", "target": "aten::clone", "args": [{"node": "x"}], "kwargs": {"memory_format": {"memory_format": "contiguous_format"}}},
    {"name": "s", "op": "call_function", "target": "aten::split.Tensor", "args": [{"node": "c"}, 1, 1],
     "meta": {"val": [{"dtype": "float32", "shape": [2, 1]}, null], "stack_trace": "File \"m.py\", line 3\n  y = x.split(1)", "module_path": "blk.0"}},
    {"name": "g", "op": "call_function", "target": "getitem", "args": [{"node": "s"}, 0]},
    {"name": "d", "op": "call_function", "target": "aten::div.Tensor_mode", "args": [{"node": "g"}, 2.5], "kwargs": {"rounding_mode": "floor"}},
    {"name": "n", "op": "call_function", "target": "aten::add.Tensor", "args": [{"node": "d"}, {"float": "nan"}], "kwargs": {"alpha": 1.0}},
    {"name": "output", "op": "output", "args": [[{"node": "n"}, {"node": "f"}]]}
  ]})JSON";

TEST(GraphJson, ParsesEveryArgumentKind) {
  auto g = GraphFromJson(json::parse(kAllKinds), "kinds.json");
  ASSERT_TRUE(g.ok()) << g.error().message;
  const Node* f = g->Find("f");
  EXPECT_EQ(f->args[1].kind, Arg::Kind::kFloat);
  EXPECT_TRUE(std::isinf(f->args[1].f) && f->args[1].f < 0);
  auto kwarg = [](const Node* n, const std::string& k) {
    for (const auto& [name, a] : n->kwargs)
      if (name == k) return a;
    return Arg::None();
  };
  EXPECT_EQ(kwarg(f, "dtype").kind, Arg::Kind::kDtype);
  EXPECT_EQ(kwarg(f, "dtype").dtype, c10::kBFloat16);
  EXPECT_EQ(kwarg(f, "device").kind, Arg::Kind::kDevice);
  EXPECT_EQ(kwarg(f, "layout").kind, Arg::Kind::kLayout);
  EXPECT_EQ(kwarg(g->Find("c"), "memory_format").kind, Arg::Kind::kMemoryFormat);
  EXPECT_EQ(g->Find("n")->args[1].kind, Arg::Kind::kFloat);
  EXPECT_TRUE(std::isnan(g->Find("n")->args[1].f));
  EXPECT_EQ(g->Find("n")->kwargs[0].second.kind, Arg::Kind::kFloat);  // 1.0 stays a float
  EXPECT_EQ(g->Find("d")->kwargs[0].second.kind, Arg::Kind::kString);
  EXPECT_EQ(g->Find("s")->meta.size(), 2u);
  EXPECT_FALSE(g->Find("s")->meta[1].has_value());
  EXPECT_EQ(g->Find("s")->module_path, "blk.0");
}

TEST(GraphJson, RoundTripsThroughJson) {
  auto g = GraphFromJson(json::parse(kAllKinds), "kinds.json");
  ASSERT_TRUE(g.ok());
  json again = GraphToJson(*g);
  auto g2 = GraphFromJson(again, "again.json");
  ASSERT_TRUE(g2.ok()) << g2.error().message;
  EXPECT_EQ(GraphToJson(*g2).dump(), again.dump());
  EXPECT_EQ(GraphToText(*g2, true), GraphToText(*g, true));
}

TEST(GraphJson, TextFormIsStable) {
  auto g = GraphFromJson(json::parse(kAllKinds), "kinds.json");
  ASSERT_TRUE(g.ok());
  const std::string expected =
      "graph kinds {\n"
      "  %x : f32[2, 3] = placeholder\n"
      "  %w = get_attr[param/w]\n"
      "  %f = aten::full([2, 3], -inf, device=cpu, dtype=bfloat16, layout=strided, pin_memory=False)\n"
      "  %c = aten::clone(%x, memory_format=contiguous_format)\n"
      "  %s : (f32[2, 1], _) = aten::split.Tensor(%c, 1, 1)  # blk.0\n"
      "  %g = getitem(%s, 0)\n"
      "  %d = aten::div.Tensor_mode(%g, 2.5, rounding_mode=\"floor\")\n"
      "  %n = aten::add.Tensor(%d, nan, alpha=1.0)\n"
      "  return [%n, %f]\n"
      "}\n";
  EXPECT_EQ(GraphToText(*g), expected);
}

TEST(GraphJson, ErrorsNameTheFileAndTheField) {
  auto bad = [](const std::string& text) { return GraphFromJson(json::parse(text), "bad.json"); };
  EXPECT_TRUE(FailsWith(bad(R"({"version": 4, "nodes": []})"), {"bad.json", "\"version\" is 4"}));
  EXPECT_TRUE(FailsWith(bad(R"({"version": 1})"), {"bad.json", "\"nodes\""}));
  EXPECT_TRUE(FailsWith(bad(R"({"version": 1, "nodes": [{"op": "placeholder"}]})"), {"bad.json", "nodes[0].name"}));
  EXPECT_TRUE(FailsWith(bad(R"({"version": 1, "nodes": [{"name": "a", "op": "call_method", "target": "t"}]})"),
                        {"nodes[0] (\"a\").op", "unknown op kind \"call_method\""}));
  EXPECT_TRUE(FailsWith(
      bad(R"({"version": 1, "nodes": [{"name": "a", "op": "call_function", "target": "aten::neg", "args": [{"node": "zz"}]}]})"),
      {"nodes[0] (\"a\").args[0].node", "unknown node \"zz\""}));
  EXPECT_TRUE(
      FailsWith(bad(R"({"version": 1, "nodes": [{"name": "a", "op": "placeholder"}, {"name": "a", "op": "placeholder"}]})"),
                {"nodes[1] (\"a\").name", "duplicate"}));
  EXPECT_TRUE(FailsWith(
      bad(R"({"version": 1, "nodes": [{"name": "a", "op": "call_function", "target": "aten::neg", "args": [{"dtype": "float99"}]}]})"),
      {"args[0].dtype", "unknown dtype \"float99\""}));
  EXPECT_TRUE(FailsWith(
      bad(R"({"version": 1, "nodes": [{"name": "a", "op": "call_function", "target": "aten::neg", "args": [{"float": "big"}]}]})"),
      {"args[0].float"}));
  EXPECT_TRUE(FailsWith(bad(R"({"version": 1, "nodes": [{"name": "x", "op": "placeholder"}]})"), {"bad.json", "0 output nodes"}));
}


const char* kSymbolicGraph = R"JSON({
  "format": "parity.graph", "version": 2, "name": "sym",
  "symbols": {"s77": {"hint": 5, "min": 2, "max": null}},
  "guards": ["Ne(s77, 1)"],
  "nodes": [
    {"name": "s77", "op": "placeholder", "meta": {"sym": "s77"}},
    {"name": "x", "op": "placeholder", "meta": {"val": [{"dtype": "float32", "shape": [5, 8], "stride": [8, 1], "sym_shape": ["s77", null]}]}},
    {"name": "n", "op": "call_function", "target": "sym::mul", "args": [{"node": "s77"}, 8], "meta": {"sym": "8*s77"}},
    {"name": "v", "op": "call_function", "target": "aten::view", "args": [{"node": "x"}, [{"node": "n"}]]},
    {"name": "output", "op": "output", "args": [[{"node": "v"}]]}
  ]})JSON";

// A node's recorded iteration count (a while_loop's, meta.iterations) reads back from what the
// writer writes: a signed JSON integer as well as a file's unsigned one (found by fuzz_graph_hops).
TEST(GraphJson, IterationsRoundTripAndNegativesAreRefused) {
  json j = json::parse(R"JSON({"version": 3, "name": "g", "nodes": [
    {"name": "x", "op": "placeholder", "target": "x"},
    {"name": "t", "op": "call_function", "target": "aten::tanh", "args": [{"node": "x"}], "meta": {"iterations": 4}},
    {"name": "output", "op": "output", "args": [[{"node": "t"}]]}]})JSON");
  auto g = GraphFromJson(j, "g.json");
  ASSERT_TRUE(g.ok()) << g.error().message;
  auto again = GraphFromJson(GraphToJson(*g), "round trip");
  ASSERT_TRUE(again.ok()) << again.error().message;
  EXPECT_EQ(again->Find("t")->iterations, 4);
  j["nodes"][1]["meta"]["iterations"] = -1;
  EXPECT_TRUE(FailsWith(GraphFromJson(j, "g.json"), {"nodes[1] (\"t\").meta.iterations: not a non-negative integer"}));
}

TEST(GraphJson, SymbolicGraphRoundTrips) {
  auto g = GraphFromJson(json::parse(kSymbolicGraph), "sym.json");
  ASSERT_TRUE(g.ok()) << g.error().message;
  ASSERT_TRUE(g->symbolic());
  EXPECT_EQ(g->symbols.at("s77").hint, 5);
  EXPECT_EQ(g->symbols.at("s77").min, 2);
  EXPECT_FALSE(g->symbols.at("s77").max.has_value());
  EXPECT_EQ(g->guards, std::vector<std::string>{"Ne(s77, 1)"});
  EXPECT_EQ(g->Find("x")->meta[0]->sym_shape, (std::vector<std::string>{"s77", ""}));
  EXPECT_EQ(g->Find("n")->sym, "8*s77");
  auto again = GraphFromJson(GraphToJson(*g), "again.json");
  ASSERT_TRUE(again.ok()) << again.error().message;
  EXPECT_EQ(GraphToJson(*again), GraphToJson(*g));
  const std::string text = GraphToText(*g, false);
  EXPECT_NE(text.find("symbol s77 = 5  # in [2, inf]"), std::string::npos) << text;
  EXPECT_NE(text.find("f32[s77, 8]"), std::string::npos) << text;
}

// Data-dependent values (`.item()`, nonzero's size) are unbacked symbols: declared with the value
// they took in the recorded call (a float one may hold a float), read like any symbol.
TEST(GraphJson, UnbackedSymbolsRoundTrip) {
  json j = json::parse(R"JSON({"version": 2, "name": "dd",
    "symbols": {"u0": {"hint": 3, "min": 0, "max": 6, "unbacked": true}, "zuf0": {"hint": 2.5, "min": null, "max": null, "unbacked": true},
                "u1": {"hint": -4, "min": null, "max": null, "unbacked": true}},
    "nodes": [
      {"name": "x", "op": "placeholder", "meta": {"val": [{"dtype": "float32", "shape": [6], "stride": [1]}]}},
      {"name": "nz", "op": "call_function", "target": "aten::nonzero", "args": [{"node": "x"}],
       "meta": {"val": [{"dtype": "int64", "shape": [3, 1], "stride": [1, 1], "sym_shape": ["u0", null]}]}},
      {"name": "m", "op": "call_function", "target": "aten::max", "args": [{"node": "x"}]},
      {"name": "f", "op": "call_function", "target": "aten::_local_scalar_dense", "args": [{"node": "m"}], "meta": {"sym": "zuf0", "sym_type": "float"}},
      {"name": "g", "op": "call_function", "target": "sym::mul", "args": [{"node": "f"}, 2], "meta": {"sym": "2*zuf0", "sym_type": "float"}},
      {"name": "output", "op": "output", "args": [[{"node": "nz"}, {"node": "g"}]]}]})JSON");
  auto g = GraphFromJson(j, "dd.json");
  ASSERT_TRUE(g.ok()) << g.error().message;
  EXPECT_TRUE(g->symbols.at("u0").unbacked);
  EXPECT_EQ(g->symbols.at("u0").hint, 3);
  EXPECT_EQ(g->symbols.at("u1").min, ir::kUnboundedBelow);
  ASSERT_TRUE(g->symbols.at("zuf0").float_hint.has_value());
  EXPECT_DOUBLE_EQ(*g->symbols.at("zuf0").float_hint, 2.5);
  auto again = GraphFromJson(GraphToJson(*g), "again.json");
  ASSERT_TRUE(again.ok()) << again.error().message;
  EXPECT_EQ(GraphToJson(*again), GraphToJson(*g));
  const std::string text = GraphToText(*g, false);
  EXPECT_NE(text.find("symbol u0 = 3  # data-dependent, in [0, 6]"), std::string::npos) << text;
  EXPECT_NE(text.find("symbol u1 = -4  # data-dependent, in [-inf, inf]"), std::string::npos) << text;
  EXPECT_NE(text.find("symbol zuf0 = 2.5  # data-dependent float"), std::string::npos) << text;
  // Only a data-dependent symbol may hold a float; a size's value must still lie in its range.
  json backed = j;
  backed["symbols"]["zuf0"].erase("unbacked");
  EXPECT_TRUE(FailsWith(GraphFromJson(backed, "dd.json"), {"symbols.zuf0.hint", "not an integer"}));
  json outside = j;
  outside["symbols"]["u0"]["hint"] = 7;
  EXPECT_TRUE(FailsWith(GraphFromJson(outside, "dd.json"), {"symbols.u0.hint", "outside"}));
}

TEST(GraphJson, SymbolicFieldsAreCheckedWhereTheyAre) {
  json undeclared = json::parse(kSymbolicGraph);
  undeclared["nodes"][2]["meta"]["sym"] = "8*s9";
  EXPECT_TRUE(FailsWith(GraphFromJson(undeclared, "sym.json"), {"nodes[2]", "symbol \"s9\" is not declared"}));
  json dims = json::parse(kSymbolicGraph);
  dims["nodes"][1]["meta"]["val"][0]["sym_shape"] = json::array({"s77"});
  EXPECT_TRUE(FailsWith(GraphFromJson(dims, "sym.json"), {"sym_shape", "one entry per dim"}));
  json hint = json::parse(kSymbolicGraph);
  hint["symbols"]["s77"].erase("hint");
  EXPECT_TRUE(FailsWith(GraphFromJson(hint, "sym.json"), {"symbols.s77"}));
  json future = json::parse(kSymbolicGraph);
  future["version"] = 4;
  EXPECT_TRUE(FailsWith(GraphFromJson(future, "sym.json"), {"\"version\" is 4"}));
}

// Sizes that cannot hold at the recorded call are bad input where they are read (every command
// loads through here), never a run that fails later and blames eager.
TEST(GraphJson, HostileSizesAreBadInputNamingTheField) {
  auto with = [](const std::function<void(json&)>& edit) {
    json j = json::parse(kSymbolicGraph);
    edit(j);
    return GraphFromJson(j, "sym.json");
  };
  auto shape = [](json& j, const std::string& e) { j["nodes"][1]["meta"]["val"][0]["sym_shape"][0] = e; };
  EXPECT_TRUE(FailsWith(with([&](json& j) { shape(j, "s77 // (s77 - 5)"); }), {"sym_shape", "division by zero"}));
  EXPECT_TRUE(FailsWith(with([&](json& j) { shape(j, "s77 * 99999999999999999999"); }), {"sym_shape", "overflows int64"}));
  EXPECT_TRUE(FailsWith(with([&](json& j) { shape(j, "s77 ** 100000"); }), {"sym_shape", "overflows int64"}));
  EXPECT_TRUE(FailsWith(with([&](json& j) { shape(j, "1 - s77"); }), {"sym_shape", "not a size"}));
  EXPECT_TRUE(FailsWith(with([&](json& j) { j["nodes"][2]["meta"]["sym"] = "s77 / 0"; }), {"nodes[2]", "meta.sym", "division by zero"}));
  EXPECT_TRUE(FailsWith(with([](json& j) { j["symbols"]["s77"]["max"] = 1; }), {"symbols.s77", "min > max"}));
  EXPECT_TRUE(FailsWith(with([](json& j) { j["symbols"]["s77"]["max"] = 4; }), {"symbols.s77.hint", "outside"}));
  EXPECT_TRUE(FailsWith(with([](json& j) { j["guards"][0] = "Eq(s77, 8)"; }), {"guards[0]", "does not hold", "s77 = 5"}));
}

// A cond whose branches are subgraphs (format version 3): they round-trip, show in the text form,
// and what names them is checked: a missing subgraph, a subgraph named by an op that is no
// higher-order op, subgraphs in a version-2 file, nesting past the limit.
const char* kCondGraph = R"JSON({
  "format": "parity.graph", "version": 3, "name": "c",
  "subgraphs": {
    "true_graph_0": {"nodes": [
      {"name": "a", "op": "placeholder"},
      {"name": "r", "op": "call_function", "target": "aten::relu", "args": [{"node": "a"}]},
      {"name": "output", "op": "output", "args": [[{"node": "r"}]]}]},
    "false_graph_0": {"nodes": [
      {"name": "a", "op": "placeholder"},
      {"name": "s", "op": "call_function", "target": "aten::sin", "args": [{"node": "a"}]},
      {"name": "output", "op": "output", "args": [[{"node": "s"}]]}]}},
  "nodes": [
    {"name": "x", "op": "placeholder"},
    {"name": "p", "op": "call_function", "target": "aten::gt.Scalar", "args": [{"node": "x"}, 0]},
    {"name": "c", "op": "call_function", "target": "hop::cond",
     "args": [{"node": "p"}, {"subgraph": "true_graph_0"}, {"subgraph": "false_graph_0"}, [{"node": "x"}]],
     "kwargs": {"opts": {"dict": {"BACKEND": "AUTO", "N": 2}}}},
    {"name": "g", "op": "call_function", "target": "getitem", "args": [{"node": "c"}, 0]},
    {"name": "output", "op": "output", "args": [[{"node": "g"}]]}]})JSON";

TEST(GraphJson, SubgraphsRoundTripAndAreChecked) {
  auto g = GraphFromJson(json::parse(kCondGraph), "c.json");
  ASSERT_TRUE(g.ok()) << g.error().message;
  ASSERT_EQ(g->subgraphs.size(), 2u);
  EXPECT_EQ(g->Subgraph("true_graph_0")->ops().size(), 1u);
  const ir::Node* c = g->Find("c");
  EXPECT_TRUE(c->IsHigherOrder());
  EXPECT_EQ(c->SubgraphNames(), (std::vector<std::string>{"true_graph_0", "false_graph_0"}));
  EXPECT_EQ(g->SubgraphDepth(), 1);
  auto again = GraphFromJson(GraphToJson(*g), "again.json");
  ASSERT_TRUE(again.ok()) << again.error().message;
  EXPECT_EQ(GraphToJson(*again), GraphToJson(*g));
  const std::string text = GraphToText(*g, false);
  EXPECT_NE(text.find("subgraph @true_graph_0 {"), std::string::npos) << text;
  EXPECT_NE(text.find("hop::cond(%p, @true_graph_0, @false_graph_0, [%x], opts={BACKEND: \"AUTO\", N: 2})"), std::string::npos)
      << text;
  // A clone is deep; a prefix before the cond keeps no subgraph.
  ir::Graph copy = g->Clone();
  EXPECT_EQ(GraphToJson(copy), GraphToJson(*g));
  auto prefix = g->Prefix(1, {"p"});
  ASSERT_TRUE(prefix.ok()) << prefix.error().message;
  EXPECT_TRUE(prefix->subgraphs.empty());

  json missing = json::parse(kCondGraph);
  missing["subgraphs"].erase("false_graph_0");
  EXPECT_TRUE(FailsWith(GraphFromJson(missing, "c.json"), {"c.json", "node \"c\"", "false_graph_0", "does not hold"}));
  json not_hop = json::parse(kCondGraph);
  not_hop["nodes"][2]["target"] = "aten::where.self";
  EXPECT_TRUE(FailsWith(GraphFromJson(not_hop, "c.json"), {"no higher-order op"}));
  json v2 = json::parse(kCondGraph);
  v2["version"] = 2;
  EXPECT_TRUE(FailsWith(GraphFromJson(v2, "c.json"), {"\"subgraphs\" needs format version 3"}));
  json bad_node = json::parse(kCondGraph);
  bad_node["subgraphs"]["true_graph_0"]["nodes"][1]["args"][0] = {{"node", "zz"}};
  EXPECT_TRUE(FailsWith(GraphFromJson(bad_node, "c.json"), {"subgraphs.true_graph_0.nodes[1]", "unknown node \"zz\""}));
  // Nesting: each level a cond whose branch holds the next.
  json deep = json::parse(kCondGraph);
  json* level = &deep;
  for (int d = 0; d < ir::kMaxSubgraphDepth + 2; ++d) {
    json inner = json::parse(kCondGraph);
    inner.erase("format");
    inner.erase("version");
    inner.erase("name");
    (*level)["subgraphs"]["true_graph_0"] = inner;
    level = &(*level)["subgraphs"]["true_graph_0"];
  }
  EXPECT_TRUE(FailsWith(GraphFromJson(deep, "deep.json"), {"deep.json", "nested deeper than"}));
}

TEST(GraphJson, NestingHasALimitNotARecursion) {
  const int deep = 20000;
  json paren = json::parse(kSymbolicGraph);
  paren["guards"][0] = std::string(deep, '(') + "s77" + std::string(deep, ')') + " >= 2";
  EXPECT_TRUE(FailsWith(GraphFromJson(paren, "sym.json"), {"guards[0]", "nested deeper than"}));
  std::string sum = "s77";
  for (int k = 0; k < deep; ++k) sum += " + 1";  // a flat text, a deep tree
  json chain = json::parse(kSymbolicGraph);
  chain["nodes"][1]["meta"]["val"][0]["sym_shape"][0] = sum;
  EXPECT_TRUE(FailsWith(GraphFromJson(chain, "sym.json"), {"sym_shape", "nested deeper than"}));
  json unary = json::parse(kSymbolicGraph);
  unary["guards"][0] = std::string(deep, '-') + "s77 != 0";
  EXPECT_TRUE(FailsWith(GraphFromJson(unary, "sym.json"), {"guards[0]", "nested deeper than"}));
  json args = json::parse(kSymbolicGraph);
  args["nodes"][3]["args"][1] = json::parse(std::string(1000, '[') + std::string(1000, ']'));
  EXPECT_TRUE(FailsWith(GraphFromJson(args, "sym.json"), {"nodes[3]", "nested deeper than"}));
}

}  // namespace
}  // namespace parity::ir
