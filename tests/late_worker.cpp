#include "late_worker.h"

#include <ATen/Context.h>
#include <ATen/TensorOperators.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/mm.h>
#include <ATen/ops/relu.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <optional>
#include <thread>

#include "runtime/worker.h"

namespace parity::testing {
namespace fs = std::filesystem;

void WriteTwoGraphs(const fs::path& dir, bool b_fails) {
  using ir::Arg;
  using ir::NodeKind;
  at::Tensor x = at::arange(6, at::kFloat).reshape({2, 3}) - 2.5;
  GraphEntry a = NewGraphEntry("a");
  {
    ir::Node* in = a.graph.Append(NodeKind::kPlaceholder, "x", "x");
    in->meta = {ir::TensorMeta{c10::kFloat, {2, 3}, {3, 1}}};
    ir::Node* relu = a.graph.Append(NodeKind::kCallFunction, "relu", "aten::relu");
    relu->args = {Arg::Ref(in)};
    a.graph.Append(NodeKind::kOutput, "output", "output")->args = {Arg::List({Arg::Ref(relu)})};
    a.inputs = {{"x", "a/input/x"}};
    a.expected_outputs = {"a/output/0"};
  }
  GraphEntry b = NewGraphEntry("b");
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
  m.producer = "late_worker";
  auto st = WriteReproDir(dir, m, {&a, &b},
                          {{"a/input/x", x}, {"a/output/0", at::relu(x)}, {"b/input/x", x}, {"b/output/0", at::mm(x, x.t())}});
  ASSERT_TRUE(st.ok()) << st.error().message;
}

void Steps::Add(const std::string& step) {
  std::lock_guard<std::mutex> lock(mu_);
  steps_.push_back(step);
}

int Steps::CountBefore(const std::string& step, const std::string& until) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto end = std::find(steps_.begin(), steps_.end(), until);
  return static_cast<int>(std::count(steps_.begin(), end, step));
}

std::string Steps::Text() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::string t;
  for (const auto& s : steps_) t += s + " ";
  return t;
}

DeterminismKept::DeterminismKept() {
  const char* workspace = std::getenv("CUBLAS_WORKSPACE_CONFIG");
  if (workspace) workspace_ = workspace;
  auto& ctx = at::globalContext();
  deterministic_ = ctx.deterministicAlgorithms();
  warn_only_ = ctx.deterministicAlgorithmsWarnOnly();
}

DeterminismKept::~DeterminismKept() {
  at::globalContext().setDeterministicAlgorithms(deterministic_, warn_only_);
  if (workspace_)
    ::setenv("CUBLAS_WORKSPACE_CONFIG", workspace_->c_str(), 1);
  else
    ::unsetenv("CUBLAS_WORKSPACE_CONFIG");
}

experiment::ExperimentSpec InductorSpec(const fs::path& dir, const fs::path& work) {
  experiment::ExperimentSpec spec;
  spec.model = "two_graphs";
  spec.repro = dir.string();
  spec.backend = "inductor";
  spec.work_dir = work.string();
  fs::create_directories(spec.work_dir);
  return spec;
}

experiment::ExperimentResult RunWithLateWorker(const TempDir& tmp, const experiment::ExperimentSpec& spec, Steps& steps,
                                               const std::function<bool(const Steps&)>& listen_when,
                                               experiment::PreparedExperiment* prepared,
                                               const std::vector<experiment::PreparedExperiment*>& next) {
  static int runs = 0;  // a socket of its own per run: one left by an earlier run would listen at once
  const std::string sock = (tmp / ("w" + std::to_string(++runs) + ".sock")).string();
  ::setenv("PARITY_WORKER_SOCKET", sock.c_str(), 1);
  std::atomic<bool> over{false};
  std::thread fake;
  if (!listen_when) fake = FakeWorkerSocket(sock, {kBackendFails});
  std::thread starter([&] {
    if (!listen_when) return;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!over && !listen_when(steps) && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    fake = FakeWorkerSocket(sock, {kBackendFails});
  });
  experiment::ExperimentResult r;
  {
    DeterminismKept kept;
    r = experiment::RunExperiment(spec, [&](const std::string& step) { steps.Add(step); }, prepared, next);
  }
  over = true;
  starter.join();
  runtime::ReleaseWorker();
  (void)runtime::WorkerClient::Connect(sock);  // lets a fake worker that was never asked end
  fake.join();
  ::unsetenv("PARITY_WORKER_SOCKET");
  return r;
}

}  // namespace parity::testing
