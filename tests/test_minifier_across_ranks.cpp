// minifier/across_ranks.h: how a world's real run fails, the one fact a candidate of a reduction
// across ranks is judged by.
#include <gtest/gtest.h>

#include "minifier/across_ranks.h"

namespace parity::minifier {
namespace {

using distributed::WorldReport;

// A two-rank report: rank r's graphs pass or fail as `fails[r]` says ("" passes, "values": an
// output off, else a graph that raised that error).
WorldReport Report(const std::vector<std::vector<std::string>>& fails) {
  WorldReport w;
  w.world_size = static_cast<int>(fails.size());
  w.mode = "real";
  for (size_t r = 0; r < fails.size(); ++r) {
    distributed::RankReport rr;
    rr.rank = static_cast<int>(r);
    for (size_t g = 0; g < fails[r].size(); ++g) {
      verify::GraphRunReport gr;
      gr.graph = "g" + std::to_string(g);
      gr.pass = fails[r][g].empty();
      if (!gr.pass && fails[r][g] != "values") gr.error = fails[r][g];
      rr.report.pass = rr.report.pass && gr.pass;
      rr.report.graphs.push_back(gr);
    }
    w.pass = w.pass && rr.report.pass;
    w.ranks.push_back(rr);
  }
  return w;
}

TEST(AcrossRanks, APassingWorldOrOneThatCannotRunIsNoFailure) {
  EXPECT_EQ(FailureOf(Report({{"", ""}, {"", ""}})).kind, "");
  EXPECT_EQ(FailureOf(Error::BadInput("x: no such op")).kind, "");
  EXPECT_FALSE(FailureOf(Report({{""}, {""}})).Matches(FailureOf(Report({{""}, {""}}))));  // no failure matches nothing
}

TEST(AcrossRanks, TheFirstFailingRankAndItsFirstFailingGraphDecide) {
  const WorldFailure f = FailureOf(Report({{"", ""}, {"", "values"}}));
  EXPECT_EQ(f.rank, 1);
  EXPECT_EQ(f.graph, 1u);
  EXPECT_EQ(f.kind, "accuracy");
  EXPECT_EQ(f.Describe(), "rank 1: accuracy");
  // Another graph of the same rank failing the same way matches; another rank does not.
  EXPECT_TRUE(FailureOf(Report({{""}, {"values"}})).Matches(f));
  EXPECT_FALSE(FailureOf(Report({{"values"}, {"values"}})).Matches(f));
}

TEST(AcrossRanks, AnExceptionMatchesOnlyTheSameErrorNotAnAccuracyFailure) {
  const WorldFailure f = FailureOf(Report({{"RuntimeError: size 16 is not 32\nmore"}, {""}}));
  EXPECT_EQ(f.rank, 0);
  EXPECT_EQ(f.kind.rfind("exception: ", 0), 0u) << f.kind;
  EXPECT_TRUE(FailureOf(Report({{"RuntimeError: size 8 is not 4"}, {""}})).Matches(f));  // numbers normalized away
  EXPECT_FALSE(FailureOf(Report({{"ValueError: bad"}, {""}})).Matches(f));
  EXPECT_FALSE(FailureOf(Report({{"values"}, {""}})).Matches(f));
}

TEST(AcrossRanks, ACrashOfTheRanksProcessesIsItsOwnKind) {
  WorldReport w;
  w.pass = false;
  w.error = "rank 1's process ended by signal 11";
  const WorldFailure f = FailureOf(w);
  EXPECT_EQ(f.rank, -1);
  EXPECT_EQ(f.kind, "crash");
  EXPECT_EQ(f.Describe(), "the ranks' processes: crash");
  EXPECT_FALSE(FailureOf(Report({{"values"}, {""}})).Matches(f));
}

// x -> all_reduce -> [wait_tensor] -> relu -> out; `waited`: the relu reads the wait, else the
// all_reduce itself; `returned`: the graph returns the all_reduce too.
ir::Graph AllReduce(bool waited, bool returned) {
  using ir::Arg;
  using ir::NodeKind;
  ir::Graph g("g");
  ir::Node* x = g.Append(NodeKind::kPlaceholder, "x", "x");
  ir::Node* ar = g.Append(NodeKind::kCallFunction, "all_reduce", "_c10d_functional::all_reduce");
  ar->args = {Arg::Ref(x), Arg::String("sum"), Arg::String("0")};
  ir::Node* read = ar;
  if (waited) {
    read = g.Append(NodeKind::kCallFunction, "wait_tensor", "_c10d_functional::wait_tensor");
    read->args = {Arg::Ref(ar)};
  }
  ir::Node* relu = g.Append(NodeKind::kCallFunction, "relu", "aten::relu");
  relu->args = {Arg::Ref(read)};
  std::vector<Arg> outs = {Arg::Ref(relu)};
  if (returned) outs.push_back(Arg::Ref(ar));
  g.Append(NodeKind::kOutput, "output", "output")->args = {Arg::List(outs)};
  return g;
}

TEST(AcrossRanks, ACandidateReadingACollectiveUnwaitedIsNoProgram) {
  EXPECT_TRUE(CollectivesWaited(AllReduce(/*waited=*/true, /*returned=*/false)));
  EXPECT_FALSE(CollectivesWaited(AllReduce(/*waited=*/false, /*returned=*/false)));  // relu reads it unwaited
  EXPECT_FALSE(CollectivesWaited(AllReduce(/*waited=*/true, /*returned=*/true)));    // the graph returns it unwaited
}

}  // namespace
}  // namespace parity::minifier
