// The delta driver with a fake interestingness test: chunking, invalid candidates skipped (not
// tested), the earliest interesting window winning among `jobs` parallel candidates.
#include "minifier/delta.h"

#include <gtest/gtest.h>

#include <sstream>

#include "minifier/passes/passes.h"
#include "repro/graph_json.h"
#include "repro/graph_text.h"

namespace parity::minifier {
namespace {

using ir::Arg;
using ir::Graph;
using ir::NodeKind;

// x -> neg_0 -> neg_1 -> ... -> neg_{n-1} -> out, with op k's target `bad` where k in `bad_at`.
Graph Chain(int n, std::set<int> bad_at = {}) {
  Graph g("g");
  ir::Node* prev = g.Append(NodeKind::kPlaceholder, "x", "x");
  for (int i = 0; i < n; ++i) {
    ir::Node* op = g.Append(NodeKind::kCallFunction, "op" + std::to_string(i), bad_at.count(i) ? "aten::tanh" : "aten::neg");
    op->args = {Arg::Ref(prev)};
    prev = op;
  }
  g.Append(NodeKind::kOutput, "output", "output")->args = {Arg::List({Arg::Ref(prev)})};
  return g;
}

// Interesting when the candidate still calls aten::tanh; records every batch it is asked.
class FakeTest final : public Interestingness {
 public:
  std::vector<bool> Test(const std::vector<const ir::Graph*>& candidates) override {
    batches.push_back(candidates.size());
    std::vector<bool> out;
    for (const auto* g : candidates) {
      bool tanh = false;
      for (const ir::Node* n : g->ops()) tanh = tanh || n->target() == "aten::tanh";
      out.push_back(tanh);
      ++runs_;
    }
    return out;
  }
  int runs() const override { return runs_; }
  int cache_hits() const override { return 0; }
  std::vector<size_t> batches;

 private:
  int runs_ = 0;
};

// Every pass to a fixed point, as the pipeline runs them.
Graph AllPasses(Graph g, Interestingness& test, int jobs) {
  nlohmann::json stats = nlohmann::json::array();
  std::ostringstream log;
  return RunPassesToFixedPoint(
      std::move(g), test, jobs, [](const Graph&) {}, stats, log);
}

TEST(Delta, ReducesToTheInterestingOp) {
  FakeTest test;
  PassStats st;
  int accepted = 0;
  // One pass: replacing the ops before the tanh with placeholders, in chunks. (What follows a
  // culprit is node bisection's to cut, not the passes'.)
  Graph out = RunDeltaPass(
      ReplaceWithPlaceholdersPass(), Chain(40, {39}), test, 1, [&](const Graph&) { ++accepted; }, st);
  EXPECT_EQ(out.ops().front()->target(), "aten::tanh");
  EXPECT_EQ(st.accepted, accepted);
  EXPECT_GT(st.accepted, 0);
  EXPECT_LT(test.runs(), 40);  // chunking: far fewer tests than one per op
  // All passes: the tanh alone.
  out = AllPasses(std::move(out), test, 1);
  ASSERT_EQ(out.ops().size(), 1u);
  EXPECT_EQ(out.ops()[0]->target(), "aten::tanh");
}

TEST(Delta, InvalidCandidatesAreSkippedNotTested) {
  DeltaPass broken;
  broken.name = "broken";
  broken.count = [](const Graph& g) { return static_cast<int>(g.ops().size()); };
  broken.remove = [](const Graph& g, int, int) -> std::optional<Graph> {
    Graph c = g.Clone();
    c.Append(NodeKind::kPlaceholder, "late", "late");  // a placeholder after ops: fails lint
    return c;
  };
  FakeTest test;
  PassStats st;
  Graph out = RunDeltaPass(
      broken, Chain(8, {3}), test, 2, [](const Graph&) {}, st);
  EXPECT_EQ(test.runs(), 0);
  EXPECT_EQ(st.invalid, st.candidates);
  EXPECT_GT(st.candidates, 0);
  EXPECT_EQ(out.ops().size(), 8u);
}

TEST(Delta, CandidatesWithoutOpsAreNotTested) {
  // Cutting every op leaves a graph returning its input: no op, so no op's bug to show.
  FakeTest test;
  PassStats st;
  Graph out = RunDeltaPass(
      ReplaceWithPlaceholdersPass(), Chain(1, {0}), test, 1, [](const Graph&) {}, st);
  EXPECT_EQ(test.runs(), 0);
  EXPECT_EQ(st.invalid, st.candidates);
  EXPECT_EQ(out.ops().size(), 1u);
}

TEST(Delta, JobsTestWindowsTogetherAndTheEarliestWins) {
  // Two interesting ops: with 4 windows at once, the first interesting one in order is taken.
  // (Both halves stay live: the graph returns op7 too, so cutting either leaves ops to test.)
  FakeTest test;
  Graph g = Chain(16, {2, 15});
  ASSERT_TRUE(g.SetOutputs({"op7", "op15"}).ok());
  Graph out = AllPasses(std::move(g), test, 4);
  EXPECT_GE(*std::max_element(test.batches.begin(), test.batches.end()), 2u) << ::testing::PrintToString(test.batches);
  for (size_t b : test.batches) EXPECT_LE(b, 4u);
  // Both tanh ops can be cut only while the other stays; the result keeps exactly one.
  int tanh = 0;
  for (const ir::Node* n : out.ops()) tanh += n->target() == "aten::tanh";
  EXPECT_EQ(tanh, 1);
  EXPECT_EQ(out.ops().size(), 1u);
}

TEST(Delta, SameResultWithOneOrFourJobs) {
  FakeTest a, b;
  Graph one = AllPasses(Chain(33, {32}), a, 1);
  Graph four = AllPasses(Chain(33, {32}), b, 4);
  EXPECT_EQ(ir::GraphToText(one), ir::GraphToText(four));
}

}  // namespace
}  // namespace parity::minifier
