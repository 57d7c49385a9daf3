// A dir's graphs in order (experiment/graph_run.cpp), through RunExperiment with a backend that
// runs in the Python worker and a fake worker on the slot's socket: while a graph's backend waits
// for a worker still starting, the later graphs' references run ahead; the record is the one the
// graphs' turns make (a later graph's failure found ahead is not said before an earlier graph's).
#include <ATen/Context.h>
#include <ATen/ops/mm.h>
#include <ATen/ops/relu.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>

#include "experiment/experiment.h"
#include "runtime/worker.h"
#include "test_helpers.h"

namespace parity::experiment {
namespace {
namespace fs = std::filesystem;

// Two graphs over one input x [2, 3]: "a" relu(x), then "b": x @ x.t() (or, with `b_fails`, x @ x,
// which the eager run refuses: a [2, 3] by [2, 3] product).
void WriteTwoGraphs(const fs::path& dir, bool b_fails) {
  using ir::Arg;
  using ir::NodeKind;
  at::Tensor x = at::arange(6, at::kFloat).reshape({2, 3}) - 2.5;
  GraphEntry a = testing::NewGraphEntry("a");
  {
    ir::Node* in = a.graph.Append(NodeKind::kPlaceholder, "x", "x");
    in->meta = {ir::TensorMeta{c10::kFloat, {2, 3}, {3, 1}}};
    ir::Node* relu = a.graph.Append(NodeKind::kCallFunction, "relu", "aten::relu");
    relu->args = {Arg::Ref(in)};
    a.graph.Append(NodeKind::kOutput, "output", "output")->args = {Arg::List({Arg::Ref(relu)})};
    a.inputs = {{"x", "a/input/x"}};
    a.expected_outputs = {"a/output/0"};
  }
  GraphEntry b = testing::NewGraphEntry("b");
  {
    ir::Node* in = b.graph.Append(NodeKind::kPlaceholder, "x", "x");
    in->meta = {ir::TensorMeta{c10::kFloat, {2, 3}, {3, 1}}};
    ir::Node* rhs = in;
    if (!b_fails) {
      rhs = b.graph.Append(NodeKind::kCallFunction, "t", "aten::t");
      rhs->args = {Arg::Ref(in)};
    }
    ir::Node* mm = b.graph.Append(NodeKind::kCallFunction, "mm", "aten::mm");
    mm->args = {Arg::Ref(in), Arg::Ref(rhs)};
    b.graph.Append(NodeKind::kOutput, "output", "output")->args = {Arg::List({Arg::Ref(mm)})};
    b.inputs = {{"x", "b/input/x"}};
    b.expected_outputs = {"b/output/0"};
  }
  Manifest m;
  m.model = "two_graphs";
  m.torch_version = "test";
  m.producer = "test_experiment_graph_run";
  auto st = WriteReproDir(dir, m, {&a, &b},
                          {{"a/input/x", x}, {"a/output/0", at::relu(x)}, {"b/input/x", x}, {"b/output/0", at::mm(x, x.t())}});
  ASSERT_TRUE(st.ok()) << st.error().message;
}

// The steps an experiment said, in order, as its on_phase callback heard them.
class Steps {
 public:
  void Add(const std::string& step) {
    std::lock_guard<std::mutex> lock(mu_);
    steps_.push_back(step);
  }
  // How often `step` was said before the first `until`.
  int CountBefore(const std::string& step, const std::string& until) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto end = std::find(steps_.begin(), steps_.end(), until);
    return static_cast<int>(std::count(steps_.begin(), end, step));
  }
  std::string Text() const {
    std::lock_guard<std::mutex> lock(mu_);
    std::string t;
    for (const auto& s : steps_) t += s + " ";
    return t;
  }

 private:
  mutable std::mutex mu_;
  std::vector<std::string> steps_;
};

// The worker's answer to the backend's compile and first run of "a": an Inductor failure.
const char* const kBackendFails = R"({"ok": false, "error_type": "BackendCompilerFailed", "error": "boom", "traceback": ""})";

// An experiment over `dir` with Inductor, its worker at a socket of `tmp` that listens once
// `listen_when` says so of the steps heard (checked every 10 ms; after 20 s regardless), or
// before the experiment starts where there is no `listen_when`.
ExperimentResult RunWithLateWorker(const testing::TempDir& tmp, const fs::path& dir, Steps& steps,
                                   const std::function<bool(const Steps&)>& listen_when) {
  const std::string sock = (tmp / "w.sock").string();
  ::setenv("PARITY_WORKER_SOCKET", sock.c_str(), 1);
  std::atomic<bool> over{false};
  std::thread fake;
  if (!listen_when) fake = testing::FakeWorkerSocket(sock, {kBackendFails});
  std::thread starter([&] {
    if (!listen_when) return;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!over && !listen_when(steps) && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    fake = testing::FakeWorkerSocket(sock, {kBackendFails});
  });
  ExperimentSpec spec;
  spec.model = "two_graphs";
  spec.repro = dir.string();
  spec.backend = "inductor";
  spec.work_dir = (tmp / "work").string();
  fs::create_directories(spec.work_dir);
  // The flow sets up determinism as PyTorch's runner does, for the process: put back after.
  const char* workspace = std::getenv("CUBLAS_WORKSPACE_CONFIG");
  const std::optional<std::string> had_workspace = workspace ? std::optional<std::string>(workspace) : std::nullopt;
  auto& ctx = at::globalContext();
  const bool deterministic = ctx.deterministicAlgorithms(), warn_only = ctx.deterministicAlgorithmsWarnOnly();
  ExperimentResult r = RunExperiment(spec, [&](const std::string& step) { steps.Add(step); });
  ctx.setDeterministicAlgorithms(deterministic, warn_only);
  if (had_workspace)
    ::setenv("CUBLAS_WORKSPACE_CONFIG", had_workspace->c_str(), 1);
  else
    ::unsetenv("CUBLAS_WORKSPACE_CONFIG");
  over = true;
  starter.join();
  runtime::ReleaseWorker();
  (void)runtime::WorkerClient::Connect(sock);  // lets a fake worker that was never asked end
  fake.join();
  ::unsetenv("PARITY_WORKER_SOCKET");
  return r;
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
