// RunExperiment's flow (experiment/flow.cpp) with a next experiment prepared while this one waits
// for a worker still starting (PreparedExperiment): its reference runs ahead, its record is the one
// its own turn makes, and nothing run ahead talks to the worker.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>

#include "experiment/experiment.h"
#include "late_worker.h"

namespace parity::experiment {
namespace {
using testing::InductorSpec;
using testing::RunWithLateWorker;
using testing::Steps;
using testing::WriteTwoGraphs;

// What a prepared experiment runs ahead of a two-graph dir on the CPU: its set-up, then per graph
// its plan, its eager pair and its fp64 run.
constexpr int kStepsOfTwoGraphs = 7;

// The experiment over tmp/one (written here), its worker listening once "ahead" was said `steps`
// times before "backend" (without running ahead it would wait its 20 s), `next` going ahead.
ExperimentResult RunFirst(const testing::TempDir& tmp, Steps& steps, int ahead_steps, const std::vector<PreparedExperiment*>& next) {
  WriteTwoGraphs(tmp / "one", /*b_fails=*/false);
  return RunWithLateWorker(
      tmp, InductorSpec(tmp / "one", tmp / "work1"), steps,
      [ahead_steps](const Steps& s) { return s.CountBefore("ahead", "backend") == ahead_steps; }, nullptr, next);
}

TEST(Flow, TheNextExperimentsReferenceRunsWhileThisOneWaitsForItsWorker) {
  testing::TempDir tmp;
  WriteTwoGraphs(tmp / "two", /*b_fails=*/false);
  PreparedExperiment next(InductorSpec(tmp / "two", tmp / "work2"));
  Steps first;
  // The worker listens once the next experiment has nothing left to run ahead (its last step says so).
  ExperimentResult r1 = RunFirst(tmp, first, kStepsOfTwoGraphs + 1, {&next});
  EXPECT_EQ(first.CountBefore("ahead", "backend"), kStepsOfTwoGraphs + 1) << first.Text();
  EXPECT_EQ(r1.code, Code::kExceptionRaised) << r1.error;
  EXPECT_EQ(r1.failed_graph, "a");
  EXPECT_GT(r1.phase_seconds.count("ahead"), 0u);
  // At its turn nothing of its reference is left to run, and its record is the one it makes afresh.
  Steps second;
  ExperimentResult r2 = RunWithLateWorker(tmp, next.spec(), second, nullptr, {&next});
  EXPECT_EQ(second.CountBefore("eager_2nd_run", "no such step"), 0) << second.Text();
  EXPECT_EQ(second.CountBefore("fp64_reference", "no such step"), 0) << second.Text();
  EXPECT_EQ(r2.phase_seconds.count("eager"), 0u);
  Steps fresh;
  ExperimentResult r3 = RunWithLateWorker(tmp, next.spec(), fresh, nullptr);
  EXPECT_GT(fresh.CountBefore("eager_2nd_run", "no such step"), 0) << fresh.Text();
  EXPECT_EQ(r2.code, r3.code);
  EXPECT_EQ(r2.error, r3.error);
  EXPECT_EQ(r2.failed_graph, r3.failed_graph);
  EXPECT_EQ(r2.notes, r3.notes);
}

TEST(Flow, SeveralNextExperimentsGoAheadInOrder) {
  testing::TempDir tmp;
  for (const char* d : {"two", "three"}) WriteTwoGraphs(tmp / d, /*b_fails=*/false);
  PreparedExperiment two(InductorSpec(tmp / "two", tmp / "work2")), three(InductorSpec(tmp / "three", tmp / "work3"));
  Steps first;
  ExperimentResult r1 = RunFirst(tmp, first, 2 * kStepsOfTwoGraphs + 1, {&two, &three});
  EXPECT_EQ(first.CountBefore("ahead", "backend"), 2 * kStepsOfTwoGraphs + 1) << first.Text();
  EXPECT_EQ(r1.code, Code::kExceptionRaised) << r1.error;
  for (PreparedExperiment* p : {&two, &three}) {
    Steps later;
    ExperimentResult r = RunWithLateWorker(tmp, p->spec(), later, nullptr, p);
    EXPECT_EQ(later.CountBefore("eager_2nd_run", "no such step"), 0) << later.Text();
    EXPECT_EQ(r.code, Code::kExceptionRaised) << r.error;
  }
}

TEST(Flow, AFailureOfTheNextFoundAheadIsNotThisOnes) {
  testing::TempDir tmp;
  WriteTwoGraphs(tmp / "two", /*b_fails=*/true);
  PreparedExperiment next(InductorSpec(tmp / "two", tmp / "work2"));
  Steps first;
  // Ahead: the set-up, "a" planned, its eager pair and fp64, "b" planned, its eager run failing,
  // then nothing more (a graph failed).
  ExperimentResult r1 = RunFirst(tmp, first, 7, {&next});
  EXPECT_EQ(first.CountBefore("ahead", "backend"), 7) << first.Text();
  EXPECT_EQ(r1.code, Code::kExceptionRaised) << r1.error;
  EXPECT_EQ(r1.error.find("eager"), std::string::npos) << r1.error;
  Steps second, fresh;
  ExperimentResult r2 = RunWithLateWorker(tmp, next.spec(), second, nullptr, {&next});
  ExperimentResult r3 = RunWithLateWorker(tmp, next.spec(), fresh, nullptr);
  EXPECT_EQ(r2.code, r3.code) << r2.error;
  EXPECT_EQ(r2.error, r3.error);
  EXPECT_EQ(r2.failed_graph, r3.failed_graph);
}

TEST(Flow, NothingRunAheadTalksToTheWorker) {
  testing::TempDir tmp;
  WriteTwoGraphs(tmp / "repro", /*b_fails=*/false);
  // A dynamo backend by name: its capability check asks the worker what is registered. The worker
  // never listens here; the request is refused at once instead of waiting for it.
  ExperimentSpec spec = InductorSpec(tmp / "repro", tmp / "work");
  spec.backend = "torch_compile:my_backend";
  ::setenv("PARITY_WORKER_SOCKET", (tmp / "never.sock").c_str(), 1);
  testing::DeterminismKept kept;
  PreparedExperiment next(spec);
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_FALSE(next.Step());
  EXPECT_FALSE(next.Step());  // dropped: it runs afresh at its turn
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10));
  ::unsetenv("PARITY_WORKER_SOCKET");
}

TEST(Flow, APreparedExperimentGoesAheadStepByStepThenStops) {
  testing::TempDir tmp;
  WriteTwoGraphs(tmp / "repro", /*b_fails=*/false);
  testing::DeterminismKept kept;
  PreparedExperiment next(InductorSpec(tmp / "repro", tmp / "work"));
  int steps = 0;
  while (next.Step() && steps < 100) ++steps;
  EXPECT_EQ(steps, kStepsOfTwoGraphs);
}

}  // namespace
}  // namespace parity::experiment
