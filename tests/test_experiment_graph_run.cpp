// A dir's graphs in order (experiment/graph_run.cpp), through RunExperiment with a backend that
// runs in the Python worker and a fake worker on the slot's socket: while a graph's backend waits
// for a worker still starting, the later graphs' references run ahead; the record is the one the
// graphs' turns make (a later graph's failure found ahead is not said before an earlier graph's).
#include <gtest/gtest.h>

#include "experiment/experiment.h"
#include "late_worker.h"

namespace parity::experiment {
namespace {
using testing::RunWithLateWorker;
using testing::Steps;
using testing::WriteTwoGraphs;

// RunWithLateWorker over `dir` with Inductor.
ExperimentResult RunWithLateWorker(const testing::TempDir& tmp, const std::filesystem::path& dir, Steps& steps,
                                   const std::function<bool(const Steps&)>& listen_when) {
  return testing::RunWithLateWorker(tmp, testing::InductorSpec(dir, tmp / "work"), steps, listen_when);
}

TEST(GraphRun, ALaterGraphsReferenceRunsWhileTheBackendWaitsForItsWorker) {
  testing::TempDir tmp;
  WriteTwoGraphs(tmp / "repro", /*b_fails=*/false);
  Steps steps;
  // The worker listens once both graphs' references ran: without running ahead it would have
  // waited its 20 s, the flow waiting for it after "a"'s reference.
  ExperimentResult r = RunWithLateWorker(tmp, tmp / "repro", steps, [](const Steps& s) {
    return s.CountBefore("fp64_reference", "backend") == 2;
  });
  EXPECT_EQ(r.code, Code::kExceptionRaised) << r.error;
  EXPECT_EQ(r.failed_graph, "a");
  EXPECT_EQ(steps.CountBefore("fp64_reference", "backend"), 2) << steps.Text();
  EXPECT_EQ(steps.CountBefore("eager_2nd_run", "backend"), 2) << steps.Text();
}

TEST(GraphRun, AFailureFoundAheadIsSaidOnlyAtItsGraphsTurn) {
  testing::TempDir tmp;
  WriteTwoGraphs(tmp / "repro", /*b_fails=*/true);
  Steps steps;
  // "b"'s eager run (planned, then run: two "eager" steps after "a"'s two) fails ahead; "a"'s
  // backend fails first in graph order, and that is what the record says.
  ExperimentResult r = RunWithLateWorker(tmp, tmp / "repro", steps, [](const Steps& s) {
    return s.CountBefore("eager", "backend") == 4;
  });
  EXPECT_EQ(steps.CountBefore("eager", "backend"), 4) << steps.Text();
  EXPECT_EQ(r.code, Code::kExceptionRaised) << r.error;
  EXPECT_EQ(r.failed_graph, "a");
  EXPECT_NE(r.error.find("boom"), std::string::npos) << r.error;
}

TEST(GraphRun, NothingRunsAheadOfAWorkerThatListens) {
  testing::TempDir tmp;
  WriteTwoGraphs(tmp / "repro", /*b_fails=*/false);
  Steps steps;
  ExperimentResult r = RunWithLateWorker(tmp, tmp / "repro", steps, nullptr);
  // The socket was there before the experiment started: "b" never started ("a"'s backend failed).
  EXPECT_EQ(r.code, Code::kExceptionRaised) << r.error;
  EXPECT_EQ(steps.CountBefore("fp64_reference", "backend"), 1) << steps.Text();
  EXPECT_EQ(steps.CountBefore("fp64_reference", "no such step"), 1) << steps.Text();
}

}  // namespace
}  // namespace parity::experiment
