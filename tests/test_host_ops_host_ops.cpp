// Host ops in the C++ interpreter, with the worker faked in-process: a graph mixing ATen ops
// and a host op runs (forward in float32 and float64, and backward through the host op), the
// dispatcher reaches the host op only through the worker, and approval is checked first.
#include "host_ops/host_ops.h"

#include <ATen/TensorOperators.h>
#include <ATen/core/grad_mode.h>
#include <ATen/ops/allclose.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/tanh.h>
#include <gtest/gtest.h>

#include <functional>
#include <optional>

#include "interpreter/interpreter.h"
#include "repro/safetensors.h"
#include "runtime/shm.h"
#include "test_helpers.h"

namespace parity::host_ops {
using namespace parity::runtime;  // the fake worker speaks shm.h
namespace {

using ir::Arg;
using ir::NodeKind;
using nlohmann::json;

// x -> tanh -> parity_unit::scale(t, 3.0) -> mul(w) -> out
constexpr const char* kScaleSchema = "parity_unit::scale(Tensor x, float s) -> Tensor";

void WriteHostRepro(const std::filesystem::path& dir, const std::string& module) {
  GraphEntry e = testing::NewGraphEntry("g");
  ir::Graph& g = e.graph;
  ir::Node* x = g.Append(NodeKind::kPlaceholder, "x", "x");
  ir::Node* w = g.Append(NodeKind::kGetAttr, "w", "param/w");
  ir::Node* t = g.Append(NodeKind::kCallFunction, "tanh", "aten::tanh");
  t->args = {Arg::Ref(x)};
  ir::Node* s = g.Append(NodeKind::kCallFunction, "scale", "parity_unit::scale");
  s->args = {Arg::Ref(t), Arg::Float(3.0)};
  ir::Node* m = g.Append(NodeKind::kCallFunction, "mul", "aten::mul.Tensor");
  m->args = {Arg::Ref(s), Arg::Ref(w)};
  g.Append(NodeKind::kOutput, "output", "output")->args = {Arg::List({Arg::Ref(m)})};
  e.inputs = {{"x", "input/x"}};
  Manifest man;
  man.model = "host";
  man.host_ops["parity_unit::scale"] = {kScaleSchema, module, "host"};
  ASSERT_TRUE(WriteReproDir(dir, man, {&e}, {{"input/x", at::randn({3, 4})}, {"param/w", at::randn({4})}}).ok());
}

// The worker, in-process: host_call computes x * s; host_backward returns grad * s.
struct FakeWorker {
  int calls = 0, backward_calls = 0, batches = 0, requests = 0, replays = 0, same_answers = 0;
  std::vector<std::string> imported;
  std::map<int, json> plans;  // as the worker keeps them: a request with only "plan" repeats one
  std::map<int, json> placed;  // each plan's last full answer ({"shm", "outputs"})
  // A repeated plan whose results land where they did last time is answered {"same": true}, as
  // the Python worker does (shm.py, Places).
  Expected<json> operator()(const json& given) {
    auto answer = Answer(given);
    if (!answer.ok() || !given.contains("plan")) return answer;
    const int plan = given["plan"].get<int>();
    json where = {answer->value("shm", json()), answer->value("outputs", json())};
    if (!given.contains("op") && placed.count(plan) && placed[plan] == where) {
      ++same_answers;
      return json{{"same", true}};
    }
    placed[plan] = where;
    return answer;
  }
  Expected<json> Answer(const json& given) {
    ++requests;
    json req = given;
    if (req.contains("plan") && !req.contains("op")) {
      if (!plans.count(req["plan"].get<int>())) {
        Error e = Error::Runtime("unknown plan");
        e.exception_type = "UnknownPlan";
        return e;
      }
      req = plans[req["plan"].get<int>()];
      ++replays;
    } else if (req.contains("plan")) {
      plans[req["plan"].get<int>()] = req;
    }
    if (req["cmd"] == "import_modules") {
      for (const auto& m : req["modules"]) imported.push_back(m);
      return json::object();
    }
    // The tensors in parity's segment, as the Python worker views them (shm.py).
    auto seg = ShmSegment::Open(req["shm"]["path"].get<std::string>(), req["shm"]["size"].get<size_t>());
    EXPECT_TRUE(seg.ok());
    auto in = ReadTensors(*seg, req["tensors"], "request");
    EXPECT_TRUE(in.ok());
    std::map<std::string, at::Tensor> t;
    for (size_t k = 0; k < in->size(); ++k) t["t" + std::to_string(k)] = (*in)[k];
    if (req["cmd"] == "host_batch") {  // each call x * s, a {"result": [call, output]} taken from earlier ones
      ++batches;
      std::vector<at::Tensor> outs;
      for (const auto& c : req["calls"]) {
        const json& x = c["args"][0];
        at::Tensor in = x.contains("result") ? outs.at(x["result"][0].get<size_t>()) : t[x["tensor"]["key"].get<std::string>()];
        outs.push_back(in * c["args"][1].get<double>());
        ++calls;
      }
      const ShmLayout layout = LayOut(outs);
      if (!results.valid() || results.size() < layout.bytes) results = ShmSegment::Create(layout.bytes).value();
      return json{{"counts", std::vector<int>(outs.size(), 1)}, {"shm", results.Describe()}, {"outputs", WriteTensors(results, layout, outs)}};
    }
    const double s = req["args"][1].get<double>();
    at::Tensor r;
    if (req["cmd"] == "host_call") {
      ++calls;
      r = t[req["args"][0]["tensor"]["key"].get<std::string>()] * s;
    } else {
      ++backward_calls;
      r = t[req["grads"][0]["tensor"]["key"].get<std::string>()] * s;
    }
    // The results in a segment of the worker's own.
    const ShmLayout layout = LayOut({r});
    if (!results.valid() || results.size() < layout.bytes) results = ShmSegment::Create(layout.bytes).value();
    json outputs = WriteTensors(results, layout, {r});
    return json{{"returns", 1}, {"shm", results.Describe()}, {"outputs", outputs}};
  }
  ShmSegment results;
};

// A repro dir of graph "g" whose only input is x (3x4) and whose host op is parity_unit::scale
// (module unit_pkg.ops): `build` appends the body and the output after x. Loaded into `repro`, its
// host ops prepared against `fake`, compiled into `program`.
void LoadScaleGraph(const std::filesystem::path& dir, const std::function<void(ir::Graph&, ir::Node* x)>& build,
                    const std::shared_ptr<FakeWorker>& fake, std::optional<ReproDir>& repro,
                    std::optional<interp::Program>& program) {
  GraphEntry e = testing::NewGraphEntry("g");
  build(e.graph, e.graph.Append(NodeKind::kPlaceholder, "x", "x"));
  e.inputs = {{"x", "input/x"}};
  Manifest man;
  man.model = "host";
  man.host_ops["parity_unit::scale"] = {kScaleSchema, "unit_pkg.ops", "host"};
  ASSERT_TRUE(WriteReproDir(dir, man, {&e}, {{"input/x", at::randn({3, 4})}}).ok());
  auto r = ReproDir::Load(dir);
  ASSERT_TRUE(r.ok()) << r.error().message;
  repro.emplace(std::move(*r));
  ASSERT_TRUE(PrepareHostOps(*repro, {"unit_pkg"}, [fake](const json& req) { return (*fake)(req); }).ok());
  auto p = interp::Program::Compile(repro->graphs()[0].graph, "g");
  ASSERT_TRUE(p.ok()) << p.error().message;
  program.emplace(std::move(*p));
}

TEST(HostOps, UnapprovedModuleIsBadInputNamingOpNodeModuleAndFlag) {
  testing::TempDir dir;
  WriteHostRepro(dir.path(), "unit_mod");
  auto r = ReproDir::Load(dir.path());
  ASSERT_TRUE(r.ok()) << r.error().message;
  Status st = CheckHostOpsApproved(*r, {"other"});
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().kind, ErrorKind::kBadInput);
  for (const char* needle : {"parity_unit::scale", "%scale", "unit_mod", "--import unit_mod"})
    EXPECT_NE(st.error().message.find(needle), std::string::npos) << st.error().message;
  EXPECT_TRUE(CheckHostOpsApproved(*r, {"unit_mod"}).ok());
  EXPECT_TRUE(CheckHostOpsApproved(*r, {"unit"}).ok() == false);  // a prefix approves submodules only
  FakeWorker fake;
  EXPECT_FALSE(PrepareHostOps(*r, {}, std::ref(fake)).ok());
  EXPECT_TRUE(fake.imported.empty());  // nothing imported without approval
}

TEST(HostOps, InterpreterDispatchesBetweenAtenAndTheHostOp) {
  testing::TempDir dir;
  WriteHostRepro(dir.path(), "unit_pkg.ops");
  auto r = ReproDir::Load(dir.path());
  ASSERT_TRUE(r.ok());
  auto fake = std::make_shared<FakeWorker>();
  ASSERT_TRUE(PrepareHostOps(*r, {"unit_pkg"}, [fake](const json& req) { return (*fake)(req); }).ok());
  EXPECT_EQ(fake->imported, std::vector<std::string>{"unit_pkg.ops"});
  const GraphEntry& g = r->graphs()[0];
  auto program = interp::Program::Compile(g.graph, "g");
  ASSERT_TRUE(program.ok()) << program.error().message;
  auto inputs = *r->Inputs(g);
  auto attrs = *r->Attrs(g);
  const at::Tensor want = at::tanh(inputs["x"]) * 3.0 * attrs["param/w"];
  for (auto dtype : {std::optional<c10::ScalarType>(), std::optional<c10::ScalarType>(c10::kDouble)}) {
    interp::RunOptions ro;
    ro.float_dtype = dtype;
    auto out = program->Run(inputs, attrs, ro);
    ASSERT_TRUE(out.ok()) << out.error().message;
    at::Tensor got = out->outputs[0].toTensor();
    EXPECT_EQ(got.scalar_type(), dtype.value_or(c10::kFloat));  // the worker saw float64 in fp64 mode
    EXPECT_TRUE(at::allclose(got.to(c10::kFloat), want, 1e-5, 1e-5));
  }
  EXPECT_EQ(fake->calls, 2);
  // Backward through the host op: d/dx (tanh(x) * 3 * w) = (1 - tanh^2) * 3 * w.
  at::Tensor x = inputs["x"].clone().requires_grad_(true);
  inputs["x"] = x;
  interp::RunOptions ro;
  ro.grad = true;
  at::AutoGradMode grad(true);
  auto out = program->Run(inputs, attrs, ro);
  ASSERT_TRUE(out.ok()) << out.error().message;
  out->outputs[0].toTensor().sum().backward();
  EXPECT_EQ(fake->backward_calls, 1);
  const at::Tensor th = at::tanh(inputs["x"].detach());
  EXPECT_TRUE(at::allclose(x.grad(), (1 - th * th) * 3.0 * attrs["param/w"], 1e-5, 1e-5));
}

// x -> scale(x, 2) -> scale(., 3) -> tanh -> scale(., 0.5) -> out: the first two host ops are
// adjacent (one worker request), the third is alone.
TEST(HostOps, AdjacentHostOpsGoToTheWorkerInOneRequest) {
  testing::TempDir dir;
  auto fake = std::make_shared<FakeWorker>();
  std::optional<ReproDir> r;
  std::optional<interp::Program> program;
  ASSERT_NO_FATAL_FAILURE(LoadScaleGraph(
      dir.path(),
      [](ir::Graph& g, ir::Node* x) {
        ir::Node* a = g.Append(NodeKind::kCallFunction, "scale_a", "parity_unit::scale");
        a->args = {Arg::Ref(x), Arg::Float(2.0)};
        ir::Node* b = g.Append(NodeKind::kCallFunction, "scale_b", "parity_unit::scale");
        b->args = {Arg::Ref(a), Arg::Float(3.0)};
        ir::Node* t = g.Append(NodeKind::kCallFunction, "tanh", "aten::tanh");
        t->args = {Arg::Ref(b)};
        ir::Node* c = g.Append(NodeKind::kCallFunction, "scale_c", "parity_unit::scale");
        c->args = {Arg::Ref(t), Arg::Float(0.5)};
        g.Append(NodeKind::kOutput, "output", "output")->args = {Arg::List({Arg::Ref(c), Arg::Ref(a)})};
      },
      fake, r, program));
  auto inputs = *r->Inputs(r->graphs()[0]);
  const at::Tensor want = at::tanh(inputs["x"] * 6.0) * 0.5;
  const int before = fake->requests;
  auto out = program->Run(inputs, {}, {});
  ASSERT_TRUE(out.ok()) << out.error().message;
  EXPECT_TRUE(at::allclose(out->outputs[0].toTensor(), want, 1e-5, 1e-5));
  EXPECT_TRUE(at::allclose(out->outputs[1].toTensor(), inputs["x"] * 2.0, 1e-6, 1e-6));  // a batched call's own value
  EXPECT_EQ(fake->requests - before, 2);  // scale_a + scale_b in one host_batch, scale_c alone
  EXPECT_EQ(fake->batches, 1);
  EXPECT_EQ(fake->calls, 3);
  // With a node hook each call is its own request (a hook may replace a value the next call takes).
  interp::RunOptions hooked;
  hooked.hook = [](const ir::Node&, c10::IValue&) { return Status::Ok(); };
  ASSERT_TRUE(program->Run(inputs, {}, hooked).ok());
  EXPECT_EQ(fake->batches, 1);
  EXPECT_EQ(fake->calls, 6);
  EXPECT_EQ(fake->replays, 1);  // scale_c's request was the same as in the first run: only its plan was sent
  // A worker that lost its plans (restarted) gets the request whole again.
  fake->plans.clear();
  auto again = program->Run(inputs, {}, {});
  ASSERT_TRUE(again.ok()) << again.error().message;
  EXPECT_TRUE(at::allclose(again->outputs[0].toTensor(), want, 1e-5, 1e-5));
}

// x -> scale(x, 2) -> tanh -> scale(., 5) -> out: two calls of one op on tensors of one shape,
// apart (two requests). Run again with other values: each call repeats its own plan (the scalar
// is part of what a plan is), the results come from where the worker placed them last time
// ({"same": true}) and hold the new values; another input shape makes new plans.
TEST(HostOps, RepeatedCallsGoByPlanAndCarryTheirNewValues) {
  testing::TempDir dir;
  auto fake = std::make_shared<FakeWorker>();
  std::optional<ReproDir> r;
  std::optional<interp::Program> program;
  ASSERT_NO_FATAL_FAILURE(LoadScaleGraph(
      dir.path(),
      [](ir::Graph& g, ir::Node* x) {
        ir::Node* a = g.Append(NodeKind::kCallFunction, "scale_a", "parity_unit::scale");
        a->args = {Arg::Ref(x), Arg::Float(2.0)};
        ir::Node* t = g.Append(NodeKind::kCallFunction, "tanh", "aten::tanh");
        t->args = {Arg::Ref(a)};
        ir::Node* b = g.Append(NodeKind::kCallFunction, "scale_b", "parity_unit::scale");
        b->args = {Arg::Ref(t), Arg::Float(5.0)};
        g.Append(NodeKind::kOutput, "output", "output")->args = {Arg::List({Arg::Ref(b)})};
      },
      fake, r, program));
  const int before = fake->requests;  // import_modules
  for (int run = 0; run < 3; ++run) {
    const at::Tensor in = at::randn({3, 4});
    auto out = program->Run({{"x", in}}, {}, {});
    ASSERT_TRUE(out.ok()) << out.error().message;
    EXPECT_TRUE(at::allclose(out->outputs[0].toTensor(), at::tanh(in * 2.0) * 5.0, 1e-5, 1e-5)) << "run " << run;
  }
  EXPECT_EQ(fake->requests - before, 6);
  EXPECT_EQ(fake->replays, 4);       // runs 2 and 3 sent plan ids only
  EXPECT_EQ(fake->same_answers, 4);  // and read their results where they were
  const at::Tensor wide = at::randn({2, 8});
  auto out = program->Run({{"x", wide}}, {}, {});
  ASSERT_TRUE(out.ok()) << out.error().message;
  EXPECT_TRUE(at::allclose(out->outputs[0].toTensor(), at::tanh(wide * 2.0) * 5.0, 1e-5, 1e-5));
  EXPECT_EQ(fake->replays, 4);  // a new shape: new plans, sent whole
  EXPECT_EQ(fake->plans.size(), 4u);
}

}  // namespace
}  // namespace parity::host_ops

namespace parity::host_ops {
using namespace parity::runtime;  // the fake worker speaks shm.h
namespace {

// A host op that writes its argument (a custom op's mutates_args, recorded as the clone it writes
// and its call): x -> clone -> scale_(clone, 3) -> add(clone, x). The worker answers with the
// written value; the interpreter's clone holds it afterwards, x is untouched, and calls of such an
// op are not batched (two adjacent ones are two requests).
TEST(HostOps, AnOpThatWritesItsArgumentLeavesItWritten) {
  testing::TempDir dir;
  GraphEntry e = testing::NewGraphEntry("g");
  ir::Graph& g = e.graph;
  ir::Node* x = g.Append(NodeKind::kPlaceholder, "x", "x");
  ir::Node* c = g.Append(NodeKind::kCallFunction, "clone", "aten::clone");
  c->args = {Arg::Ref(x)};
  for (const char* name : {"scale_a", "scale_b"})
    g.Append(NodeKind::kCallFunction, name, "parity_unit::scale_")->args = {Arg::Ref(c), Arg::Float(3.0)};
  ir::Node* a = g.Append(NodeKind::kCallFunction, "add", "aten::add.Tensor");
  a->args = {Arg::Ref(c), Arg::Ref(x)};
  g.Append(NodeKind::kOutput, "output", "output")->args = {Arg::List({Arg::Ref(a)})};
  e.inputs = {{"x", "input/x"}};
  Manifest man;
  man.model = "host";
  man.host_ops["parity_unit::scale_"] = {"parity_unit::scale_(Tensor(a!) x, float s) -> ()", "unit_pkg.ops", "host"};
  ASSERT_TRUE(WriteReproDir(dir.path(), man, {&e}, {{"input/x", at::randn({3, 4})}}).ok());
  auto r = ReproDir::Load(dir.path());
  ASSERT_TRUE(r.ok()) << r.error().message;
  auto fake = std::make_shared<FakeWorker>();  // host_call answers x * s: here, the written value
  ASSERT_TRUE(PrepareHostOps(*r, {"unit_pkg"}, [fake](const json& req) { return (*fake)(req); }).ok());
  auto program = interp::Program::Compile(r->graphs()[0].graph, "g");
  ASSERT_TRUE(program.ok()) << program.error().message;
  auto inputs = *r->Inputs(r->graphs()[0]);
  const at::Tensor before = inputs["x"].clone();
  auto out = program->Run(inputs, {}, interp::RunOptions{});
  ASSERT_TRUE(out.ok()) << out.error().message;
  EXPECT_TRUE(at::allclose(out->outputs[0].toTensor(), before * 9.0 + before, 1e-5, 1e-5));
  EXPECT_TRUE(at::equal(inputs["x"], before));
  EXPECT_EQ(fake->calls, 2);
  EXPECT_EQ(fake->batches, 0);
}

}  // namespace
}  // namespace parity::host_ops
