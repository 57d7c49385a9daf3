// The minify steps over a fake experiment runner and fake interestingness tests: confirm
// (reliable, flaky, --majority, not failing), stage bisection, graph bisection, node bisection
// with 1 and 4 jobs, and the checkpointed state's round trip.
#include "minifier/steps/steps.h"

#include <gtest/gtest.h>

#include <sstream>

#include "minifier/steps/loss.h"
#include "repro/graph_json.h"
#include "repro/graph_text.h"
#include "test_helpers.h"

namespace parity::minifier {
namespace {

using ir::Arg;
using ir::Graph;
using ir::NodeKind;
using experiment::Code;
using experiment::ExperimentResult;

// Answers each experiment from a table keyed by backend (cycling through its list).
class FakeRunner final : public experiment::ExperimentRunner {
 public:
  std::map<std::string, std::vector<Code>> codes;
  std::vector<std::string> asked, dirs;
  int slots = 2;
  std::vector<ExperimentResult> RunMany(experiment::ExperimentBatch batch) override {
    std::vector<ExperimentResult> out;
    for (const auto& [spec, dir] : batch) {
      asked.push_back(spec.backend);
      dirs.push_back(dir.filename().string());
      auto& list = codes[spec.backend];
      ExperimentResult r;
      r.code = list.empty() ? Code::kPass : list[(seen_[spec.backend]++) % list.size()];
      out.push_back(r);
    }
    return out;
  }
  int jobs() const override { return slots; }

 private:
  std::map<std::string, size_t> seen_;
};

// Interesting when the candidate holds an op named `needle` (and one named `also`, when given: a
// failure that needs the culprit's context).
class HasNode final : public Interestingness {
 public:
  explicit HasNode(std::string needle, std::string also = "") : needle_(std::move(needle)), also_(std::move(also)) {}
  std::vector<bool> Test(const std::vector<const Graph*>& cands) override {
    std::vector<bool> out;
    for (const auto* g : cands) {
      auto op = [g](const std::string& n) { return g->Find(n) != nullptr && g->Find(n)->kind() == NodeKind::kCallFunction; };
      out.push_back(op(needle_) && (also_.empty() || op(also_)));
      ++runs_;
      batch_max = std::max(batch_max, cands.size());
    }
    return out;
  }
  int runs() const override { return runs_; }
  int cache_hits() const override { return 0; }
  size_t batch_max = 0;

 private:
  std::string needle_, also_;
  int runs_ = 0;
};

Graph NegChain(int n) {
  Graph g("g");
  ir::Node* prev = g.Append(NodeKind::kPlaceholder, "x", "x");
  ir::TensorMeta meta;
  meta.shape = {4};
  meta.stride = {1};
  prev->meta = {meta};
  for (int i = 0; i < n; ++i) {
    ir::Node* op = g.Append(NodeKind::kCallFunction, "op" + std::to_string(i), "aten::neg");
    op->args = {Arg::Ref(prev)};
    op->meta = {meta};
    prev = op;
  }
  g.Append(NodeKind::kOutput, "output", "output")->args = {Arg::List({Arg::Ref(prev)})};
  return g;
}

struct Fixture {
  testing::TempDir dir;
  std::optional<ReproDir> repro;
  MinifyOptions options;
  FakeRunner runner;
  std::ostringstream log;
  ReductionState state;
  Fixture() {
    testing::WriteSmallRepro(dir.path());
    repro.emplace(ReproDir::Load(dir.path()).value());
    state.source = dir.path().string();
    state.base.backend = "inductor";
    options.confirm_runs = 3;
  }
  StepContext Context() {
    return StepContext{*repro,  options,      runner, log, [](size_t) { return std::make_unique<HasNode>("relu"); },
                       nullptr, dir / "work", nullptr};
  }
};

TEST(MinifySteps, ConfirmReliableFailure) {
  Fixture f;
  f.runner.codes["inductor"] = {Code::kFail};
  auto ctx = f.Context();
  ASSERT_TRUE(Confirm(ctx, f.state).ok());
  EXPECT_EQ(f.state.original.kind, FailureKind::kAccuracy);
  EXPECT_EQ(f.state.confirm["runs"], 3);
  EXPECT_EQ(f.state.confirm["failing"], 3);
  EXPECT_EQ(f.state.backend_runs, 3);
}

TEST(MinifySteps, ConfirmStopsOnAnOriginalThatPasses) {
  Fixture f;
  auto ctx = f.Context();
  Status st = Confirm(ctx, f.state);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("does not fail"), std::string::npos);
}

TEST(MinifySteps, ConfirmFlakyNeedsMajority) {
  Fixture f;
  f.runner.codes["inductor"] = {Code::kFail, Code::kFail, Code::kPass};
  auto ctx = f.Context();
  Status st = Confirm(ctx, f.state);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("2/3"), std::string::npos);
  Fixture g;
  g.runner.codes["inductor"] = {Code::kFail, Code::kFail, Code::kPass};
  g.options.majority = true;
  auto gctx = g.Context();
  EXPECT_TRUE(Confirm(gctx, g.state).ok());
  EXPECT_NE(g.log.str().find("majority"), std::string::npos);
}

TEST(MinifySteps, ConfirmWithCheckRunsTheCheckOnce) {
  Fixture f;
  int calls = 0;
  auto ctx = f.Context();
  ctx.check = [&](const std::vector<std::filesystem::path>& dirs) {
    ++calls;
    return std::vector<bool>(dirs.size(), true);
  };
  ASSERT_TRUE(Confirm(ctx, f.state).ok());
  EXPECT_EQ(calls, 1);
  EXPECT_TRUE(f.runner.asked.empty());
}

TEST(MinifySteps, StageBisectNamesTheFirstFailingStage) {
  Fixture f;
  f.state.original.kind = FailureKind::kAccuracy;
  f.runner.codes["aot_eager"] = {Code::kPass};
  f.runner.codes["aot_eager_decomp_partition"] = {Code::kFail};
  auto ctx = f.Context();
  ASSERT_TRUE(StageBisect(ctx, f.state).ok());
  EXPECT_EQ(f.state.first_failing_stage, "aot_eager_decomp_partition");
  EXPECT_EQ(f.state.stages.size(), 3u);
  EXPECT_NE(f.log.str().find("decompositions or the partitioner"), std::string::npos);
  // A stage failing another way does not count.
  Fixture g;
  g.state.original.kind = FailureKind::kAccuracy;
  g.runner.codes["aot_eager"] = {Code::kExceptionRaised};
  auto gctx = g.Context();
  ASSERT_TRUE(StageBisect(gctx, g.state).ok());
  EXPECT_EQ(g.state.first_failing_stage, "inductor");
}

TEST(MinifySteps, GraphBisectTakesTheOnlyGraph) {
  Fixture f;
  auto ctx = f.Context();
  ASSERT_TRUE(GraphBisect(ctx, f.state).ok());
  EXPECT_EQ(f.state.graph_index, 0u);
  ASSERT_TRUE(f.state.current.has_value());
  EXPECT_EQ(f.state.current->size(), f.repro->graphs()[0].graph.size());
}

TEST(MinifySteps, NodeBisectFindsTheCulpritWithOneOrFourJobs) {
  for (int jobs : {1, 4}) {
    Fixture f;
    f.options.experiment.jobs = jobs;
    f.state.current = NegChain(50);
    HasNode test("op37");
    auto ctx = f.Context();
    ASSERT_TRUE(NodeBisect(ctx, f.state, test).ok());
    EXPECT_EQ(f.state.culprit["node"], "op37") << "jobs " << jobs;
    EXPECT_EQ(f.state.current->ops().size(), 1u);  // the culprit alone fails: op36's value is its input
    EXPECT_EQ(f.state.current->ops().back()->name(), "op37");
    EXPECT_EQ(f.state.current->Find("op36")->kind(), NodeKind::kPlaceholder);
    EXPECT_LE(test.runs(), 20) << "O(log n) probes";
    EXPECT_LE(test.batch_max, static_cast<size_t>(jobs));
  }
}

TEST(MinifySteps, NodeBisectKeepsThePrefixWhenTheCulpritNeedsIt) {
  Fixture f;
  f.state.current = NegChain(50);
  HasNode test("op37", "op36");  // fails only with op36 computed too
  auto ctx = f.Context();
  ASSERT_TRUE(NodeBisect(ctx, f.state, test).ok());
  EXPECT_EQ(f.state.culprit["node"], "op37");
  EXPECT_EQ(f.state.current->ops().size(), 38u);  // the prefix ending at the culprit
}

TEST(MinifySteps, NodeBisectSkipsWhenTheFullGraphDoesNotFail) {
  Fixture f;
  f.state.current = NegChain(10);
  HasNode test("absent");
  auto ctx = f.Context();
  ASSERT_TRUE(NodeBisect(ctx, f.state, test).ok());
  EXPECT_TRUE(f.state.culprit.is_null());
  EXPECT_EQ(f.state.current->ops().size(), 10u);
  EXPECT_NE(f.log.str().find("skipped"), std::string::npos);
}

TEST(MinifySteps, NodeBisectInTrainModeEndsAtTheCulpritReturningIt) {
  // The candidates return values, no loss: their backward is the writer's (each value fed the
  // gradient the original's backward gave it: test_minifier_interesting.cpp).
  Fixture f;
  f.state.base.test = "train";
  f.state.current = NegChain(50);
  HasNode alone("op37");
  auto ctx = f.Context();
  ASSERT_TRUE(NodeBisect(ctx, f.state, alone).ok());
  EXPECT_EQ(f.state.current->ops().size(), 1u);  // op37 on its input value
  EXPECT_EQ(f.state.current->OutputValues()[0]->name(), "op37");
  // A failure that needs the culprit's context keeps its path.
  f.state.current = NegChain(50);
  HasNode test("op37", "op36");
  ASSERT_TRUE(NodeBisect(ctx, f.state, test).ok());
  EXPECT_EQ(f.state.culprit["node"], "op37");
  const Graph& g = *f.state.current;
  EXPECT_TRUE(g.Lint().ok());
  const auto outs = g.OutputValues();
  ASSERT_EQ(outs.size(), 1u);
  EXPECT_EQ(outs[0]->name(), "op37");
  EXPECT_EQ(g.ops().size(), 38u);  // op0..op37
  EXPECT_NE(f.log.str().find("the culprit on its path fails"), std::string::npos) << f.log.str();
}

TEST(MinifySteps, APrefixEndingAtATupleOpTakesItsElements) {
  // x -> max.dim (a tuple) -> getitem 0 -> neg: a prefix cut at max keeps getitem 0 as a value
  // (else max's output would be no sink, and a bug upstream of it would vanish from the test).
  Graph g("g");
  ir::Node* x = g.Append(NodeKind::kPlaceholder, "x", "x");
  x->meta = {ir::TensorMeta{c10::ScalarType::Float, {4, 4}, {4, 1}}};
  ir::Node* mx = g.Append(NodeKind::kCallFunction, "max", "aten::max.dim");
  mx->args = {Arg::Ref(x), Arg::Int(0)};
  mx->meta = {ir::TensorMeta{c10::ScalarType::Float, {4}, {1}}, ir::TensorMeta{c10::ScalarType::Long, {4}, {1}}};
  ir::Node* gi = g.Append(NodeKind::kCallFunction, "getitem", ir::kGetItem);
  gi->args = {Arg::Ref(mx), Arg::Int(0)};
  gi->meta = {mx->meta[0]};
  ir::Node* neg = g.Append(NodeKind::kCallFunction, "neg", "aten::neg");
  neg->args = {Arg::Ref(gi)};
  neg->meta = gi->meta;
  g.Append(NodeKind::kOutput, "output", "output")->args = {Arg::List({Arg::Ref(neg)})};
  auto p = SinksPrefix(g, mx->index());
  ASSERT_TRUE(p.has_value());
  std::vector<std::string> outs;
  for (const ir::Node* o : p->OutputValues()) outs.push_back(o->name());
  EXPECT_NE(std::find(outs.begin(), outs.end(), "getitem"), outs.end());
  EXPECT_EQ(p->Find("neg"), nullptr);
}

TEST(MinifySteps, WithSumLossSumsTheFloatingValues) {
  Graph g = NegChain(3);
  auto c = WithSumLoss(g, {"op0", "op2"});
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_TRUE(c->Lint().ok());
  const auto outs = c->OutputValues();
  ASSERT_EQ(outs.size(), 3u);
  EXPECT_EQ(outs[0]->target(), "aten::add.Tensor");  // sum(op0) + sum(op2)
  EXPECT_TRUE(outs[0]->meta[0]->shape.empty());
  EXPECT_EQ(outs[1]->name(), "op0");
  // No floating value: no loss to make.
  Graph ints = NegChain(1);
  ints.Find("op0")->meta[0]->dtype = c10::ScalarType::Long;
  EXPECT_FALSE(WithSumLoss(ints, {"op0"}).ok());
}

// A scan result for NegChain(n): the graph's output, then op0..op{n-1} exposed; values from
// `first_bad` on fail same().
ExperimentResult ScanResult(int n, int first_bad, Code code = Code::kFail) {
  ExperimentResult r;
  r.code = code;
  r.outputs.push_back({{"path", "output"}, {"pass", first_bad >= n}});
  for (int i = 0; i < n; ++i)
    r.outputs.push_back({{"path", "output/" + std::to_string(i + 1)},
                         {"pass", i < first_bad},
                         {"stats",
                          {{"max_abs_err", i < first_bad ? 0.0 : 1.0},
                           {"rmse_ref_vs_fp64", 1e-7},
                           {"rmse_res_vs_fp64", i < first_bad ? 1e-7 : 0.5}}}});
  return r;
}

// A segment's run (ScanSegments) of a Chain: each value it returns (opK) fails same() from
// op`first_bad` on; FAIL where one does.
ExperimentResult SegmentResult(const Graph& g, int first_bad) {
  ExperimentResult r;
  r.code = Code::kPass;
  for (const ir::Node* o : g.OutputValues()) {
    const bool pass = std::stoi(o->name().substr(2)) < first_bad;
    if (!pass) r.code = Code::kFail;
    r.outputs.push_back({{"path", "output"},
                         {"pass", pass},
                         {"stats", {{"max_abs_err", pass ? 0.0 : 1.0}, {"rmse_ref_vs_fp64", 1e-7}, {"rmse_res_vs_fp64", pass ? 1e-7 : 0.5}}}});
  }
  return r;
}

struct ScanFixture : Fixture {
  int scans = 0;
  ExperimentResult answer;  // the whole graph's run
  // A segment's run (a graph not ending in the chain's last op); unset: segments are not expected.
  std::function<ExperimentResult(const Graph&)> segment;
  std::vector<size_t> batches;
  size_t chain = 10;
  StepContext ScanContext() {
    StepContext ctx = Context();
    ctx.run_candidates = [this](const std::vector<const Graph*>& gs) {
      batches.push_back(gs.size());
      std::vector<ExperimentResult> out;
      for (const Graph* g : gs) {
        ++scans;
        const bool whole = g->OutputValues().size() == chain + 1;  // the output and op0..op{n-1}
        EXPECT_TRUE(whole || segment) << ir::GraphToText(*g);
        out.push_back(whole || !segment ? answer : segment(*g));
      }
      return out;
    };
    return ctx;
  }
};

TEST(MinifySteps, DivergenceScanFindsAndConfirmsTheFirstDivergentNode) {
  ScanFixture f;
  f.state.original.kind = FailureKind::kAccuracy;
  f.state.current = NegChain(10);
  f.answer = ScanResult(10, 6);
  HasNode test("op6");  // prefixes holding op6 fail the same way
  auto ctx = f.ScanContext();
  ASSERT_TRUE(DivergenceScan(ctx, f.state, test).ok());
  EXPECT_EQ(f.scans, 1);
  EXPECT_EQ(test.runs(), 2);  // the confirmation: op6 alone fails, prefix(op5) does not
  EXPECT_EQ(f.state.culprit["node"], "op6");
  EXPECT_EQ(f.state.localization["path"], "scan");
  EXPECT_EQ(f.state.current->ops().size(), 1u);  // op6 alone on op5's value
  EXPECT_EQ(f.state.current->ops().back()->name(), "op6");
  ASSERT_EQ(f.state.divergence.size(), 10u);
  EXPECT_EQ(f.state.divergence[6]["node"], "op6");
  EXPECT_FALSE(f.state.divergence[6]["pass"].get<bool>());
  EXPECT_NEAR(f.state.divergence[6]["error_ratio"].get<double>(), 0.5 / 1e-7, 1);
  EXPECT_NEAR(f.state.divergence[5]["error_ratio"].get<double>(), 1.0, 1e-9);
}

TEST(MinifySteps, DivergenceScanKeepsThePrefixWhenTheCulpritNeedsIt) {
  ScanFixture f;
  f.state.original.kind = FailureKind::kAccuracy;
  f.state.current = NegChain(10);
  f.answer = ScanResult(10, 6);
  HasNode test("op6", "op5");  // op6 fails only with op5 computed before it
  auto ctx = f.ScanContext();
  ASSERT_TRUE(DivergenceScan(ctx, f.state, test).ok());
  EXPECT_EQ(f.state.culprit["node"], "op6");
  EXPECT_EQ(test.runs(), 3);  // alone and the prefix before (one batch), then its own prefix
  EXPECT_EQ(f.state.current->ops().size(), 7u);
}

TEST(MinifySteps, DivergenceScanFallsBackToBisection) {
  {  // exposing the values made the failure go away (fusion changed)
    ScanFixture f;
    f.state.original.kind = FailureKind::kAccuracy;
    f.state.current = NegChain(10);
    f.answer = ScanResult(10, 10, Code::kPass);
    HasNode test("op6");
    auto ctx = f.ScanContext();
    ASSERT_TRUE(DivergenceScan(ctx, f.state, test).ok());
    EXPECT_TRUE(f.state.culprit.is_null());
    EXPECT_EQ(f.state.localization["path"], "bisection");
    EXPECT_NE(f.state.localization["why"].get<std::string>().find("changed the failure"), std::string::npos);
    EXPECT_EQ(f.state.current->ops().size(), 10u);  // untouched: bisection's turn
  }
  {  // the scan points at op4, but op4's prefix does not fail: not confirmed
    ScanFixture f;
    f.state.original.kind = FailureKind::kAccuracy;
    f.state.current = NegChain(10);
    f.answer = ScanResult(10, 4);
    HasNode test("op6");
    auto ctx = f.ScanContext();
    ASSERT_TRUE(DivergenceScan(ctx, f.state, test).ok());
    EXPECT_TRUE(f.state.culprit.is_null());
    EXPECT_NE(f.state.localization["why"].get<std::string>().find("does not fail"), std::string::npos);
    EXPECT_FALSE(f.state.divergence.is_null());  // the map stays
  }
  {  // not an accuracy failure, or train: no scan run at all
    for (const char* test_mode : {"eval", "train"}) {
      ScanFixture f;
      f.state.original.kind = std::string(test_mode) == "train" ? FailureKind::kAccuracy : FailureKind::kCrash;
      f.state.base.test = test_mode;
      f.state.current = NegChain(10);
      HasNode test("op6");
      auto ctx = f.ScanContext();
      ASSERT_TRUE(DivergenceScan(ctx, f.state, test).ok());
      EXPECT_EQ(f.scans, 0);
      EXPECT_EQ(f.state.localization["path"], "bisection");
    }
  }
}

// A 40-op chain (40 values: four segments of 10 at -j 2) that failed on accuracy.
void FortyOps(ScanFixture& f) {
  f.chain = 40;
  f.state.original.kind = FailureKind::kAccuracy;
  f.state.current = NegChain(40);
}

// On a graph big enough to split (40 values, -j 2: 4 segments of 10), the segments run two at a
// time in graph order until one fails; its first failing value, confirmed alone and against its
// segment's part before it, is the culprit, and the whole graph never runs.
TEST(MinifySteps, DivergenceScanFindsTheCulpritSegmentBySegment) {
  for (const int bad : {12, 35}) {
    ScanFixture f;
    FortyOps(f);
    f.segment = [bad](const Graph& g) { return SegmentResult(g, bad); };
    const std::string culprit = "op" + std::to_string(bad);
    HasNode test(culprit);
    auto ctx = f.ScanContext();
    ASSERT_TRUE(DivergenceScan(ctx, f.state, test).ok());
    const size_t ran = bad < 20 ? 2 : 4;  // op12 is in the first pair of segments, op35 in the second
    EXPECT_EQ(f.batches, std::vector<size_t>(ran / 2, 2));
    EXPECT_EQ(test.runs(), 2);  // alone, and the segment's part before it: one batch
    EXPECT_EQ(f.state.culprit["node"], culprit);
    EXPECT_EQ(f.state.current->ops().size(), 1u);
    EXPECT_EQ(f.state.localization["path"], "scan");
    EXPECT_EQ(f.state.localization["segments"]["count"], 4);
    EXPECT_EQ(f.state.localization["segments"]["run"], ran);
    EXPECT_EQ(f.state.localization["segments"]["failing"], bad / 10 + 1);
    EXPECT_EQ(f.state.localization["scan_runs"], ran + 2);
    EXPECT_EQ(f.state.backend_runs, static_cast<int>(ran));  // the probes count in the test's runs
    ASSERT_EQ(f.state.divergence.size(), ran * 10);  // the values of the segments run, in order
    EXPECT_EQ(f.state.divergence[bad]["node"], culprit);
    EXPECT_FALSE(f.state.divergence[bad]["pass"].get<bool>());
    EXPECT_TRUE(f.state.divergence[bad - 1]["pass"].get<bool>());
  }
}

// Where the segments cannot decide, the whole graph's run does.
TEST(MinifySteps, DivergenceScanFallsBackToTheWholeGraph) {
  {  // every segment passes on the reference's values (the error builds up across them)
    ScanFixture f;
    FortyOps(f);
    f.segment = [](const Graph& g) { return SegmentResult(g, 1000); };
    f.answer = ScanResult(40, 12);
    HasNode test("op12");
    auto ctx = f.ScanContext();
    ASSERT_TRUE(DivergenceScan(ctx, f.state, test).ok());
    EXPECT_EQ(f.batches, (std::vector<size_t>{2, 2, 1}));
    EXPECT_EQ(f.state.culprit["node"], "op12");
    EXPECT_FALSE(f.state.localization.contains("segments"));
    EXPECT_EQ(f.state.localization["scan_runs"], 4 + 1 + 2);
    EXPECT_EQ(f.state.divergence.size(), 40u);  // the whole graph's map
    EXPECT_NE(f.log.str().find("no segment fails"), std::string::npos);
  }
  {  // a segment that crashes leaves the values after it unjudged
    ScanFixture f;
    FortyOps(f);
    f.segment = [](const Graph& g) {
      ExperimentResult r = SegmentResult(g, 35);
      if (g.Find("op0") != nullptr) r = ExperimentResult{};  // VERIFIER_DIDNT_RUN
      return r;
    };
    f.answer = ScanResult(40, 35);
    HasNode test("op35");
    auto ctx = f.ScanContext();
    ASSERT_TRUE(DivergenceScan(ctx, f.state, test).ok());
    EXPECT_EQ(f.batches, (std::vector<size_t>{2, 1}));
    EXPECT_EQ(f.state.culprit["node"], "op35");
    EXPECT_FALSE(f.state.localization.contains("segments"));
  }
  {  // the candidate does not fail alone: not confirmed on its segment, the whole graph's run
    ScanFixture f;
    FortyOps(f);
    f.segment = [](const Graph& g) { return SegmentResult(g, 12); };
    f.answer = ScanResult(40, 12);
    HasNode test("op12", "op11");  // op12 fails only with op11 computed before it
    auto ctx = f.ScanContext();
    ASSERT_TRUE(DivergenceScan(ctx, f.state, test).ok());
    EXPECT_EQ(f.batches, (std::vector<size_t>{2, 1}));
    EXPECT_EQ(f.state.culprit["node"], "op12");
    EXPECT_EQ(f.state.current->ops().size(), 13u);  // the whole run's answer: its prefix
  }
}

// Segments cut at their values; what a segment reads from before it is a placeholder, except
// parameters and values that are no single tensor (a tuple its getitem takes apart), which come
// along with what they read.
TEST(MinifySteps, ScanSegmentsCutsTheGraphAtItsValues) {
  Graph g("g");
  ir::TensorMeta meta;
  meta.shape = {4};
  meta.stride = {1};
  ir::Node* prev = g.Append(NodeKind::kPlaceholder, "x", "x");
  prev->meta = {meta};
  ir::Node* w = g.Append(NodeKind::kGetAttr, "w", "w");
  w->meta = {meta};
  auto op = [&](const std::string& name, const std::string& target, std::vector<Arg> args) {
    ir::Node* n = g.Append(NodeKind::kCallFunction, name, target);
    n->args = std::move(args);
    n->meta = {meta};
    return n;
  };
  for (int i = 0; i < 7; ++i) prev = op("op" + std::to_string(i), "aten::neg", {Arg::Ref(prev)});
  ir::Node* tup = op("tup", "aten::unbind.int", {Arg::Ref(prev)});
  tup->meta = {meta, meta};  // two values: no single tensor
  op("g0", ir::kGetItem, {Arg::Ref(tup), Arg::Int(0)});
  prev = op("g1", ir::kGetItem, {Arg::Ref(tup), Arg::Int(1)});
  for (int i = 7; i < 14; ++i) prev = op("op" + std::to_string(i), i == 10 ? "aten::mul.Tensor" : "aten::neg",
                                         i == 10 ? std::vector<Arg>{Arg::Ref(prev), Arg::Ref(w)} : std::vector<Arg>{Arg::Ref(prev)});
  g.Append(NodeKind::kOutput, "output", "output")->args = {Arg::List({Arg::Ref(prev)})};
  ASSERT_TRUE(g.Lint().ok());

  std::vector<std::vector<const ir::Node*>> exposed;
  const auto segs = ScanSegments(g, 4, 1024, &exposed);
  ASSERT_EQ(segs.size(), 2u);  // 16 values: two segments of 8 at most
  ASSERT_EQ(exposed.size(), 2u);
  EXPECT_EQ(exposed[0].back()->name(), "g0");
  EXPECT_EQ(exposed[1].front()->name(), "g1");
  const Graph& second = segs[1];
  EXPECT_EQ(second.OutputValues().size(), 8u);
  EXPECT_EQ(second.Find("op6")->kind(), NodeKind::kPlaceholder);  // fed with the reference's value
  EXPECT_EQ(second.Find("tup")->kind(), NodeKind::kCallFunction);  // the tuple comes along
  EXPECT_EQ(second.Find("w")->kind(), NodeKind::kGetAttr);        // the parameter stays one
  EXPECT_EQ(second.Find("op5"), nullptr);
  EXPECT_EQ(segs[0].Find("op13"), nullptr);
  EXPECT_TRUE(ScanSegments(g, 1, 1024).empty());  // one segment is the whole graph's run
  EXPECT_TRUE(ScanSegments(NegChain(15), 4, 1024).empty());  // under 16 values: too small to split
  EXPECT_EQ(ScanSegments(NegChain(40), 8, 1024).size(), 5u);  // 8 values a segment at least
}

// The repro dir records an accuracy failure (as verify's failure dirs do), and its ops their
// values' metadata (what the scan exposes).
void RecordAccuracyFailure(Fixture& f) {
  const auto path = f.dir.path() / "manifest.json";
  auto m = nlohmann::json::parse(testing::Slurp(path));
  m["failure"] = {{"kind", "accuracy"}, {"verification_code", "FAIL"}};
  testing::Spit(path, m.dump());
  const auto graph = f.dir.path() / "graphs" / "g.json";
  auto g = nlohmann::json::parse(testing::Slurp(graph));
  for (auto& n : g["nodes"])
    if (n["name"] == "add" || n["name"] == "relu")
      n["meta"] = {{"val", {{{"dtype", "float32"}, {"shape", {2, 3}}, {"stride", {3, 1}}}}}};
  testing::Spit(graph, g.dump());
  f.repro.emplace(ReproDir::Load(f.dir.path()).value());
}

struct AheadFixture : Fixture {
  AheadRunner ahead{runner};
  int written = 0;
  StepContext AheadContext() {
    StepContext ctx{*repro,  options,      ahead, log, [](size_t) { return std::make_unique<HasNode>("relu"); },
                    nullptr, dir / "work", nullptr};
    ctx.ahead = &ahead;
    ctx.cpus = 4;  // two per slot: the scan runs ahead too
    ctx.candidate_run = [this](const Graph& g) {
      ++written;
      EXPECT_GT(g.OutputValues().size(), 1u);  // the graph's output and the values it exposes
      auto spec = state.base;
      spec.repro = (dir / "work" / "scan").string();
      return std::optional(std::make_pair(spec, dir / "work" / "scan-run"));
    };
    return ctx;
  }
};

TEST(MinifySteps, RunAheadRunsTheScanFirstThenTheConfirmationsAndStagesInOneBatch) {
  AheadFixture f;
  RecordAccuracyFailure(f);
  f.runner.codes["inductor"] = {Code::kFail};
  auto ctx = f.AheadContext();
  ASSERT_TRUE(RunAhead(ctx, f.state).ok());
  EXPECT_EQ(f.runner.dirs, (std::vector<std::string>{"scan-run", "confirm0", "confirm1", "confirm2", "stage-aot_eager",
                                                     "stage-aot_eager_decomp_partition"}));
  // The steps get those results: no experiment runs again.
  ASSERT_TRUE(Confirm(ctx, f.state).ok());
  ASSERT_TRUE(StageBisect(ctx, f.state).ok());
  EXPECT_EQ(f.runner.dirs.size(), 6u);
  EXPECT_EQ(f.state.confirm["failing"], 3);
  EXPECT_EQ(f.state.first_failing_stage, "inductor");
  EXPECT_EQ(f.ahead.DropUnused(), 1);  // the scan's (this test runs no scan)
}

TEST(MinifySteps, RunAheadLeavesOutWhatItCannotKnowAndRunsNothingWithOneJob) {
  {  // no recorded accuracy failure: the scan may not run, so it is not run ahead
    AheadFixture f;
    auto ctx = f.AheadContext();
    ASSERT_TRUE(RunAhead(ctx, f.state).ok());
    EXPECT_EQ(f.written, 0);
    EXPECT_EQ(f.runner.dirs.front(), "confirm0");
  }
  {  // --no-scan and --no-stage-bisect: only the confirmations
    AheadFixture f;
    RecordAccuracyFailure(f);
    f.options.scan = false;
    f.options.stage_bisect = false;
    auto ctx = f.AheadContext();
    ASSERT_TRUE(RunAhead(ctx, f.state).ok());
    EXPECT_EQ(f.runner.dirs, (std::vector<std::string>{"confirm0", "confirm1", "confirm2"}));
  }
  {  // one core per slot: the scan's compile would only slow the others; the rest runs ahead
    AheadFixture f;
    RecordAccuracyFailure(f);
    auto ctx = f.AheadContext();
    ctx.cpus = 2;
    ASSERT_TRUE(RunAhead(ctx, f.state).ok());
    EXPECT_EQ(f.written, 0);
    EXPECT_EQ(f.runner.dirs.size(), 5u);
  }
  {  // one job: nothing to overlap, nothing run ahead
    AheadFixture f;
    RecordAccuracyFailure(f);
    f.runner.slots = 1;
    auto ctx = f.AheadContext();
    ASSERT_TRUE(RunAhead(ctx, f.state).ok());
    EXPECT_TRUE(f.runner.dirs.empty());
  }
}

TEST(MinifySteps, CheckpointStateRoundTrips) {
  ReductionState s;
  s.source = "/src";
  s.base.backend = "fault";
  s.original.kind = FailureKind::kException;
  s.original.exception_type = "RuntimeError";
  s.original.message = "boom #";
  s.graph_index = 1;
  s.culprit = {{"node", "tanh"}};
  s.first_failing_stage = "fault";
  auto back = ReductionState::FromJson(s.ToJson(), "/src", "fault");
  ASSERT_TRUE(back.has_value());
  EXPECT_TRUE(back->original.Matches(s.original));
  EXPECT_EQ(back->graph_index, 1u);
  EXPECT_EQ(back->culprit["node"], "tanh");
  // Another source's or backend's checkpoint is not resumed.
  EXPECT_FALSE(ReductionState::FromJson(s.ToJson(), "/other", "fault").has_value());
  EXPECT_FALSE(ReductionState::FromJson(s.ToJson(), "/src", "inductor").has_value());
}

// The compiler bisection asks the worker (faked here) on the minified graph, then on the original
// when the minified one fails in no stage; a backend that is no torch.compile backend is said so
// and nothing is asked; a worker that cannot finish never fails the minify.
TEST(MinifySteps, CompilerBisectNamesTheCompilersPart) {
  Fixture f;
  f.state.original.kind = FailureKind::kAccuracy;
  f.state.current = NegChain(3);
  std::vector<nlohmann::json> asked;
  std::vector<Expected<nlohmann::json>> answers;
  auto ctx = f.Context();
  ctx.ask = [&](const nlohmann::json& req) {
    asked.push_back(req);
    Expected<nlohmann::json> a = answers.front();
    answers.erase(answers.begin());
    return a;
  };
  std::vector<std::filesystem::path> written;
  ctx.write_graph = [&](const Graph&, const std::filesystem::path& dir) {
    written.push_back(dir);
    return Status::Ok();
  };
  const nlohmann::json relu = {{"backend", "inductor"}, {"subsystem", "lowerings"}, {"bisect_number", 9}, {"detail", "relu"},
                               {"config", nullptr}};
  answers = {nlohmann::json{{"bisected", true}, {"runs", 12}, {"seconds", 1.5}, {"result", relu}}};
  ASSERT_TRUE(CompilerBisect(ctx, f.state).ok());
  ASSERT_EQ(asked.size(), 1u);
  EXPECT_EQ(asked[0]["cmd"], "compiler_bisect");
  EXPECT_EQ(asked[0]["backend"], "inductor");
  EXPECT_EQ(asked[0]["signature"]["kind"], "accuracy");
  EXPECT_EQ(asked[0]["repro"], std::filesystem::absolute(written.at(0)).string());
  EXPECT_EQ(f.state.compiler_culprit["sentence"], "inside inductor: lowerings #9 (relu): falling back to ATen for it removes the failure");
  EXPECT_EQ(f.state.compiler_culprit["on"], "minified");
  EXPECT_NE(f.log.str().find("lowerings #9 (relu)"), std::string::npos);

  // Nothing on the minified graph: the original is bisected.
  asked.clear();
  answers = {nlohmann::json{{"bisected", true}, {"runs", 5}, {"seconds", 0.5}, {"result", nullptr}},
             nlohmann::json{{"bisected", true}, {"runs", 8}, {"seconds", 2.0}, {"result", relu}}};
  ASSERT_TRUE(CompilerBisect(ctx, f.state).ok());
  ASSERT_EQ(asked.size(), 2u);
  EXPECT_EQ(asked[1]["repro"], std::filesystem::absolute(f.state.source).string());
  EXPECT_EQ(f.state.compiler_culprit["on"], "original");
  EXPECT_EQ(f.state.compiler_culprit["runs"], 13);

  // A worker that fails: recorded, the minify goes on.
  answers = {Expected<nlohmann::json>(Error::Runtime("python worker: died"))};
  ASSERT_TRUE(CompilerBisect(ctx, f.state).ok());
  EXPECT_NE(f.state.compiler_culprit["sentence"].get<std::string>().find("did not finish"), std::string::npos);

  // A backend that is no torch.compile backend: said, nothing asked.
  asked.clear();
  f.state.base.backend = "fault";
  ASSERT_TRUE(CompilerBisect(ctx, f.state).ok());
  EXPECT_TRUE(asked.empty());
  EXPECT_NE(f.state.compiler_culprit["sentence"].get<std::string>().find("fault is no torch.compile backend"), std::string::npos);
}

TEST(MinifySteps, CompilerCulpritSentences) {
  EXPECT_EQ(CompilerCulpritSentence({{"backend", "inductor"}, {"subsystem", "fallback_random"}, {"bisect_number", 0},
                                     {"config", "torch._inductor.config.fallback_random = True"}}),
            "inside inductor: fallback_random: setting torch._inductor.config.fallback_random = True removes the failure");
  EXPECT_EQ(CompilerCulpritSentence({{"backend", "inductor"}, {"subsystem", "post_grad_passes"}, {"bisect_number", 8},
                                     {"detail", "post_grad_custom_post_pass"},
                                     {"config", "torch._inductor.config.post_grad_custom_post_pass = None"}}),
            "inside inductor: post_grad_passes #8 (post_grad_custom_post_pass): skipping this pass removes the failure "
            "(torch._inductor.config.post_grad_custom_post_pass = None)");
  EXPECT_EQ(CompilerCulpritSentence({{"backend", "my_backend"}, {"subsystem", nullptr}}),
            "inside my_backend, but no subsystem the bisector knows removes the failure alone");
  EXPECT_NE(CompilerCulpritSentence({{"runs", 3}}).find("not in what PyTorch's compiler bisector knows"), std::string::npos);
}

}  // namespace
}  // namespace parity::minifier
