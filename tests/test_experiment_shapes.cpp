#include "experiment/shapes.h"

#include <ATen/ops/allclose.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/mm.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/randint.h>
#include <gtest/gtest.h>

#include "interpreter/interpreter.h"
#include "repro/graph_json.h"
#include "test_helpers.h"

namespace parity::experiment {
namespace {

using nlohmann::json;
using testing::ParseGraph;

// x: f32[s0, 8] @ w + b, ids: i64[s0]; s0 recorded as 6 in [2, 10], never 9 (a guard).
const char* kGraph = R"JSON({"version": 2, "name": "g",
  "symbols": {"s0": {"hint": 6, "min": 2, "max": 10}}, "guards": ["Ne(s0, 9)"],
  "nodes": [
    {"name": "x", "op": "placeholder", "meta": {"val": [{"dtype": "float32", "shape": [6, 8], "stride": [8, 1], "sym_shape": ["s0", null]}]}},
    {"name": "ids", "op": "placeholder", "meta": {"val": [{"dtype": "int64", "shape": [6], "stride": [1], "sym_shape": ["s0"]}]}},
    {"name": "w", "op": "get_attr", "target": "param/w"},
    {"name": "m", "op": "call_function", "target": "aten::mm", "args": [{"node": "x"}, {"node": "w"}]},
    {"name": "output", "op": "output", "args": [[{"node": "m"}, {"node": "ids"}]]}]})JSON";

TEST(Shapes, ParseShapesNamesTheFlag) {
  EXPECT_EQ(*ParseShapes("recorded"), 0);
  EXPECT_EQ(*ParseShapes("sweep"), 3);
  EXPECT_EQ(*ParseShapes("sweep=5"), 5);
  for (const char* bad : {"sweep=0", "sweep=65", "sweep=x", "sweep=3x", "all"}) {
    auto p = ParseShapes(bad);
    ASSERT_FALSE(p.ok()) << bad;
    EXPECT_EQ(p.error().kind, ErrorKind::kBadInput);
    EXPECT_NE(p.error().message.find("--shapes"), std::string::npos);
  }
}

TEST(Shapes, SweepPointsStayInRangeHoldGuardsAndSkipTheRecorded) {
  ir::Graph g = ParseGraph(kGraph);
  auto points = SweepPoints(g, 6);
  ASSERT_EQ(points.size(), 6u);
  std::set<int64_t> seen;
  for (const auto& p : points) {
    const int64_t v = p.at("s0");
    EXPECT_GE(v, 2);
    EXPECT_LE(v, 10);
    EXPECT_NE(v, 9);  // the guard
    EXPECT_NE(v, 6);  // the recorded call is verified anyway
    EXPECT_TRUE(seen.insert(v).second) << "duplicate " << v;
  }
  EXPECT_EQ(points[0].at("s0"), 3);   // half first
  EXPECT_EQ(points[1].at("s0"), 10);  // twice, held to the range
  // A range of one value besides the hint leaves one point.
  ir::Graph narrow = ParseGraph(R"({"version": 2, "symbols": {"s0": {"hint": 4, "min": 4, "max": 5}}, "nodes": [
    {"name": "output", "op": "output", "args": [[]]}]})");
  EXPECT_EQ(SweepPoints(narrow, 3).size(), 1u);
  EXPECT_EQ(PointLabel({{"s0", 3}, {"s1", 12}}), "s0=3, s1=12");
  // A data-dependent symbol is no input's size: never swept, never in a point.
  ir::Graph dd = ParseGraph(R"({"version": 2, "symbols": {"s0": {"hint": 4, "min": 2, "max": null},
    "u0": {"hint": 3, "min": 0, "max": null, "unbacked": true}}, "guards": ["u0 <= 4*s0"], "nodes": [
    {"name": "output", "op": "output", "args": [[]]}]})");
  auto dd_points = SweepPoints(dd, 3);
  ASSERT_EQ(dd_points.size(), 3u);
  for (const auto& p : dd_points) EXPECT_EQ(p.count("u0"), 0u) << PointLabel(p);
  ir::Graph only = ParseGraph(R"({"version": 2, "symbols": {"u0": {"hint": 3, "min": 0, "max": null, "unbacked": true}}, "nodes": [
    {"name": "output", "op": "output", "args": [[]]}]})");
  EXPECT_TRUE(SweepPoints(only, 3).empty());
}

TEST(Shapes, AVariantRegeneratesSymbolicInputsAndKeepsParameters) {
  testing::TempDir tmp;
  GraphEntry e;
  e.name = "g";
  e.file = "graphs/g.json";
  e.inputs = {{"x", "input/x"}, {"ids", "input/ids"}};
  e.graph = ParseGraph(kGraph);
  Manifest man;
  const at::Tensor x = at::randn({6, 8}) * 3 + 10;
  const at::Tensor ids = at::randint(5, 9, {6}, at::TensorOptions().dtype(at::kLong));
  const at::Tensor w = at::randn({8, 4});
  ASSERT_TRUE(WriteReproDir(tmp / "rec", man, {&e}, {{"input/x", x}, {"input/ids", ids}, {"param/w", w}}).ok());
  auto rec = ReproDir::Load(tmp / "rec");
  ASSERT_TRUE(rec.ok()) << rec.error().message;
  ASSERT_TRUE(WriteShapeVariant(*rec, rec->graphs()[0], {{"s0", 3}}, 7, tmp / "v").ok());
  auto v = ReproDir::Load(tmp / "v");
  ASSERT_TRUE(v.ok()) << v.error().message;
  const GraphEntry& ve = v->graphs()[0];
  EXPECT_EQ(ve.graph.symbols.at("s0").hint, 3);
  auto inputs = v->Inputs(ve);
  ASSERT_TRUE(inputs.ok());
  const at::Tensor vx = inputs->at("x"), vids = inputs->at("ids");
  EXPECT_EQ(vx.sizes(), (c10::IntArrayRef{3, 8}));
  EXPECT_EQ(vids.sizes(), (c10::IntArrayRef{3}));
  EXPECT_EQ(vids.scalar_type(), at::kLong);
  EXPECT_GE(vids.min().item<int64_t>(), 5);  // the captured integers' range
  EXPECT_LE(vids.max().item<int64_t>(), 8);
  EXPECT_GT(vx.mean().item<double>(), 5.0);  // the captured distribution, not a unit normal
  EXPECT_TRUE(at::equal(*v->Tensor("param/w"), w));
  // It runs, with its symbol bound from the regenerated input.
  auto program = interp::Program::Compile(ve.graph, "v");
  ASSERT_TRUE(program.ok()) << program.error().message;
  auto attrs = v->Attrs(ve);
  ASSERT_TRUE(attrs.ok());
  auto run = program->Run(*inputs, *attrs);
  ASSERT_TRUE(run.ok()) << run.error().message;
  EXPECT_TRUE(at::allclose(run->outputs[0].toTensor(), at::mm(vx, w)));
  // The same seed gives the same inputs: a variant is reproducible.
  ASSERT_TRUE(WriteShapeVariant(*rec, rec->graphs()[0], {{"s0", 3}}, 7, tmp / "v2").ok());
  auto v2 = ReproDir::Load(tmp / "v2");
  ASSERT_TRUE(v2.ok());
  EXPECT_TRUE(at::equal(v2->Inputs(v2->graphs()[0])->at("x"), vx));
}

}  // namespace
}  // namespace parity::experiment
