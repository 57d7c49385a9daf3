#include "distributed/isolate.h"

#include <ATen/ops/equal.h>
#include <ATen/ops/tensor.h>
#include <gtest/gtest.h>

#include <fstream>

#include "repro/repro_dir.h"
#include "tests/test_helpers.h"

namespace parity::distributed {
namespace {

namespace fs = std::filesystem;

// y = wait(all_reduce(x * 2, sum)) + 1 on each rank of a 2-rank group "0".
const char* kGraph = R"({"format": "parity.graph", "version": 3, "name": "graph_0", "nodes": [
  {"name": "x", "op": "placeholder", "target": "x", "meta": {"val": [{"dtype": "float32", "shape": [2], "stride": [1]}]}},
  {"name": "mul", "op": "call_function", "target": "aten::mul.Scalar", "args": [{"node": "x"}, 2.0],
   "meta": {"val": [{"dtype": "float32", "shape": [2], "stride": [1]}]}},
  {"name": "all_reduce", "op": "call_function", "target": "_c10d_functional::all_reduce", "args": [{"node": "mul"}, "sum", "0"],
   "meta": {"val": [{"dtype": "float32", "shape": [2], "stride": [1]}]}},
  {"name": "wait_tensor", "op": "call_function", "target": "_c10d_functional::wait_tensor", "args": [{"node": "all_reduce"}],
   "meta": {"val": [{"dtype": "float32", "shape": [2], "stride": [1]}]}},
  {"name": "add", "op": "call_function", "target": "aten::add.Scalar", "args": [{"node": "wait_tensor"}, 1.0],
   "meta": {"val": [{"dtype": "float32", "shape": [2], "stride": [1]}]}},
  {"name": "output", "op": "output", "target": "output", "args": [[{"node": "add"}]]}]})";

fs::path WriteWorld(const fs::path& d) {
  fs::remove_all(d);
  for (int r = 0; r < 2; ++r) {
    GraphEntry e = testing::NewGraphEntry("graph_0");
    e.graph = testing::ParseGraph(kGraph);
    e.inputs["x"] = "graph_0/input/x";
    e.expected_outputs = {"graph_0/output/0"};
    const at::Tensor x = at::tensor({1.0f + r, 10.0f * (r + 1)});
    Manifest m;
    m.model = "isolate";
    m.extra["distributed"] = {{"rank", r}, {"world_size", 2}, {"process_groups", {{"0", {0, 1}}}}};
    // Both ranks' x * 2 summed, plus one: (2 + 4 + 1, 20 + 40 + 1).
    EXPECT_TRUE(WriteReproDir(d / ("rank" + std::to_string(r)), m, {&e},
                              {{"graph_0/input/x", x}, {"graph_0/output/0", at::tensor({7.0f, 61.0f})}}).ok());
  }
  std::ofstream(d / "manifest.json") << R"({"format": "parity.distributed", "version": 1, "world_size": 2, "ranks": ["rank0", "rank1"]})";
  return d;
}

TEST(Isolate, EachRanksCollectivesBecomeInputsAndWhatTheyReadOutputs) {
  const fs::path d = WriteWorld(fs::temp_directory_path() / ("parity-isolate-" + std::to_string(::getpid())));
  auto world = World::Load(d);
  ASSERT_TRUE(world.ok()) << world.error().message;
  auto isolated = IsolateRanks(*world, "cpu", std::chrono::seconds(30), d / "out");
  ASSERT_TRUE(isolated.ok()) << isolated.error().message;
  ASSERT_EQ(isolated->size(), 2u);
  for (int r = 0; r < 2; ++r) {
    const IsolatedRank& iso = (*isolated)[static_cast<size_t>(r)];
    EXPECT_EQ(iso.rank, r);
    EXPECT_EQ(iso.collectives_cut, 2);  // all_reduce and its wait
    auto repro = ReproDir::Load(iso.dir);
    ASSERT_TRUE(repro.ok()) << repro.error().message;
    EXPECT_FALSE(repro->manifest().extra.contains("distributed"));
    EXPECT_EQ(repro->manifest().extra["isolated_from"]["rank"], r);
    const GraphEntry& g = repro->graphs().at(0);
    for (const ir::Node* n : g.graph.nodes()) EXPECT_EQ(n->target().rfind("_c10d_functional", 0), std::string::npos) << n->name();
    // The wait's value on this rank is an input; what the all_reduce read (x * 2) an output.
    auto in = repro->Tensor(g.inputs.at("wait_tensor"));
    ASSERT_TRUE(in.ok());
    EXPECT_TRUE(at::equal(*in, at::tensor({6.0f, 60.0f})));
    ASSERT_EQ(g.expected_outputs.size(), 2u);
    auto sent = repro->Tensor(g.expected_outputs[1]);
    ASSERT_TRUE(sent.ok());
    EXPECT_TRUE(at::equal(*sent, at::tensor({2.0f + 2 * r, 20.0f * (r + 1)})));
  }
  fs::remove_all(d);
}

}  // namespace
}  // namespace parity::distributed
