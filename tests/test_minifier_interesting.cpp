// CandidateTest with fake judges: candidates are written as loadable repro dirs, verdicts are
// cached by graph text, unwritable candidates are never judged; the --check judge honours -j
// and reads exit codes.
#include "minifier/interesting.h"

#include <gtest/gtest.h>

#include <sstream>
#include <stdexcept>

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/ops/allclose.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/randn.h>

#include "minifier/delta.h"
#include "minifier/passes/passes.h"
#include "test_helpers.h"
#include "util/files.h"

namespace parity::minifier {
namespace {

namespace fs = std::filesystem;

struct Small {
  testing::TempDir dir;
  std::optional<ReproDir> repro;
  std::map<std::string, at::Tensor> tensors;
  Small() {
    testing::WriteSmallRepro(dir.path());
    repro.emplace(ReproDir::Load(dir.path()).value());
    for (const auto& info : repro->tensors().tensors()) tensors[info.name] = *repro->tensors().Get(info.name);
  }
  CandidateWriter Writer() const {
    const GraphEntry& g = repro->graphs()[0];
    return CandidateWriter(repro->manifest(), g, tensors);
  }
};

TEST(CandidateTest, WritesLoadableDirsAndCachesVerdicts) {
  Small s;
  std::vector<fs::path> judged;
  DirJudge judge = [&](const std::vector<fs::path>& dirs) {
    for (const auto& d : dirs) {
      EXPECT_TRUE(ReproDir::Load(d).ok()) << d;  // a candidate is a valid repro dir
      judged.push_back(d);
    }
    return std::vector<bool>(dirs.size(), true);
  };
  CandidateTest test(s.Writer(), judge, s.dir / "scratch", nlohmann::json{{"kind", "accuracy"}});
  const ir::Graph& g = s.repro->graphs()[0].graph;
  EXPECT_EQ(test.Test({&g}), (std::vector<bool>{true}));
  EXPECT_EQ(test.Test({&g}), (std::vector<bool>{true}));
  EXPECT_EQ(judged.size(), 1u);  // the same graph text is judged once
  EXPECT_EQ(test.runs(), 1);
  EXPECT_EQ(test.cache_hits(), 1);
  auto m = ReproDir::Load(judged[0]);
  EXPECT_EQ(m->manifest().failure["kind"], "accuracy");
}

// The values a train graph differentiates: floating values computed from a differentiated input
// (a parameter), not those of the data alone, an integer op's, or a detached one.
TEST(CandidateWriter, DifferentiatedValuesFollowTheDifferentiatedInputs) {
  ir::Graph g("g");
  auto value = [&](ir::NodeKind kind, const std::string& name, const std::string& target, std::vector<std::string> args,
                   c10::ScalarType dtype) {
    ir::Node* n = g.Append(kind, name, target);
    for (const auto& a : args) n->args.push_back(ir::Arg::Ref(g.Find(a)));
    n->meta = {ir::TensorMeta{dtype, {4, 4}, {4, 1}}};
  };
  const auto f = c10::ScalarType::Float, l = c10::ScalarType::Long;
  value(ir::NodeKind::kPlaceholder, "x", "x", {}, f);  // the data: not differentiated
  value(ir::NodeKind::kGetAttr, "w", "param/w", {}, f);
  value(ir::NodeKind::kCallFunction, "mm", "aten::mm", {"x", "w"}, f);
  value(ir::NodeKind::kCallFunction, "softmax", "aten::_safe_softmax", {"mm"}, f);
  value(ir::NodeKind::kCallFunction, "argmax", "aten::argmax", {"mm"}, l);
  value(ir::NodeKind::kCallFunction, "as_float", "aten::_to_copy", {"argmax"}, f);
  value(ir::NodeKind::kCallFunction, "detached", "aten::detach", {"mm"}, f);
  value(ir::NodeKind::kCallFunction, "relu", "aten::relu", {"x"}, f);
  std::set<std::string> requires_grad{"param/w"};
  DifferentiatedValues(g, requires_grad);
  EXPECT_EQ(requires_grad, (std::set<std::string>{"param/w", "mm", "softmax"}));
}

TEST(CandidateTest, UnwritableCandidatesAreNotJudged) {
  Small s;
  int calls = 0;
  CandidateTest test(
      s.Writer(),
      [&](const std::vector<fs::path>& d) {
        ++calls;
        return std::vector<bool>(d.size(), true);
      },
      s.dir / "scratch", nullptr);
  // A placeholder with no value anywhere (no input key, no reference value).
  ir::Graph bad("g");
  bad.Append(ir::NodeKind::kPlaceholder, "nowhere", "nowhere");
  bad.Append(ir::NodeKind::kOutput, "output", "output")->args = {ir::Arg::List({ir::Arg::Ref(bad.Find("nowhere"))})};
  EXPECT_EQ(test.Test({&bad}), (std::vector<bool>{false}));
  EXPECT_EQ(calls, 0);
}

TEST(CandidateWriter, SlicesAnInputToItsPlaceholdersShape) {
  Small s;
  const ir::Graph& g = s.repro->graphs()[0].graph;  // x (2, 3) + w (3)
  auto shrunk = ShrinkShapesPass().remove(g, 0, 1);  // halves x's first dimension
  ASSERT_TRUE(shrunk.has_value());
  EXPECT_EQ(shrunk->Find("add")->meta[0]->shape, (std::vector<int64_t>{1, 3}));
  const fs::path out = s.dir / "shrunk";
  ASSERT_TRUE(s.Writer().Write(*shrunk, out, nlohmann::json::object()).ok());
  auto loaded = ReproDir::Load(out);  // the loader checks inputs against the placeholders' metadata
  ASSERT_TRUE(loaded.ok()) << loaded.error().message;
  auto inputs = loaded->Inputs(loaded->graphs()[0]);
  ASSERT_TRUE(inputs.ok());
  const at::Tensor& x = inputs->at("x");
  EXPECT_EQ(x.sizes().vec(), (std::vector<int64_t>{1, 3}));
  EXPECT_TRUE(at::equal(x, s.tensors.at("g/input/x").narrow(0, 0, 1)));  // the captured values' leading part
}

// A train graph with a loss first: loss = sum(softmax(x + w) * -k), the program differentiating w
// only; its repro dir written and read back, the pool of its tensors and reference values.
struct SoftmaxTrain {
  testing::TempDir dir;
  GraphEntry e = testing::NewGraphEntry("g");
  Manifest m;
  at::Tensor xt, kt, wt;
  std::optional<ReproDir> repro;
  std::map<std::string, at::Tensor> pool;

  SoftmaxTrain() {
    ir::Graph& g = e.graph;
    const ir::TensorMeta m23{c10::kFloat, {2, 3}, {3, 1}};
    auto node = [&](ir::NodeKind kind, const std::string& name, const std::string& target, std::vector<ir::Arg> args,
                    ir::TensorMeta meta) {
      ir::Node* n = g.Append(kind, name, target);
      n->args = std::move(args);
      n->meta = {meta};
      return n;
    };
    ir::Node* x = node(ir::NodeKind::kPlaceholder, "x", "x", {}, m23);
    ir::Node* k = node(ir::NodeKind::kPlaceholder, "k", "k", {}, m23);
    ir::Node* w = node(ir::NodeKind::kGetAttr, "w", "param/w", {}, ir::TensorMeta{c10::kFloat, {3}, {1}});
    ir::Node* add = node(ir::NodeKind::kCallFunction, "add", "aten::add.Tensor", {ir::Arg::Ref(x), ir::Arg::Ref(w)}, m23);
    ir::Node* sm = node(ir::NodeKind::kCallFunction, "sm", "aten::_softmax", {ir::Arg::Ref(add), ir::Arg::Int(1), ir::Arg::Bool(false)}, m23);
    ir::Node* negk = node(ir::NodeKind::kCallFunction, "negk", "aten::neg", {ir::Arg::Ref(k)}, m23);
    ir::Node* mul = node(ir::NodeKind::kCallFunction, "mul", "aten::mul.Tensor", {ir::Arg::Ref(sm), ir::Arg::Ref(negk)}, m23);
    ir::Node* loss = node(ir::NodeKind::kCallFunction, "loss", "aten::sum", {ir::Arg::Ref(mul)}, ir::TensorMeta{c10::kFloat, {}, {}});
    g.Append(ir::NodeKind::kOutput, "output", "output")->args = {ir::Arg::List({ir::Arg::Ref(loss)})};
    e.inputs = {{"x", "g/input/x"}, {"k", "g/input/k"}};
    e.requires_grad = std::set<std::string>{"param/w"};  // the program differentiated w, not the data
    at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(7);
    xt = at::randn({2, 3}, gen), kt = at::randn({2, 3}, gen), wt = at::randn({3}, gen);
    m.model = "softmax";
    m.torch_version = "test";
    m.mode = "train";
    m.host_ops["mylib::gone"] = HostOp{"mylib::gone(Tensor x) -> Tensor", "mylib", "host"};  // no node calls it
    repro.emplace(Written(dir.path()));
    for (const auto& info : repro->tensors().tensors()) pool[info.name] = *repro->tensors().Get(info.name);
  }
  // `e` written to `where` and read back.
  ReproDir Written(const fs::path& where) const {
    EXPECT_TRUE(WriteReproDir(where, m, {&e}, {{"g/input/x", xt}, {"g/input/k", kt}, {"param/w", wt}}).ok());
    auto r = ReproDir::Load(where);
    if (!r.ok()) throw std::runtime_error(r.error().message);
    return std::move(*r);
  }
  const GraphEntry& entry() const { return repro->graphs()[0]; }
  // The original returning `outputs` only (what it no longer needs cut away).
  ir::Graph Cut(const std::vector<std::string>& outputs) const {
    ir::Graph cut = entry().graph.Clone();
    EXPECT_TRUE(cut.SetOutputs(outputs).ok());
    return Cleaned(std::move(cut));
  }
  // `cut` written by a CandidateWriter over `from` to dir/`name` and read back (the loader checks
  // each tangent against its output's metadata).
  ReproDir WrittenCut(const ir::Graph& cut, const std::map<std::string, at::Tensor>& from, const std::string& name) const {
    EXPECT_TRUE(CandidateWriter(repro->manifest(), entry(), from).Write(cut, dir / name, nlohmann::json::object()).ok());
    auto r = ReproDir::Load(dir / name);
    if (!r.ok()) throw std::runtime_error(r.error().message);
    return std::move(*r);
  }
};

// A cut returning the softmax is fed, as its tangent, the gradient the softmax got in the
// original's backward (-k), not a sum() loss (whose gradient through a softmax is zero: any
// rounding of it "fails").
TEST(CandidateWriter, ACutOfATrainGraphIsFedTheGradientsTheOriginalsBackwardGaveItsValues) {
  SoftmaxTrain t;
  ASSERT_TRUE(AddReferenceValues(*t.repro, t.entry(), "cpu", t.pool).ok());
  ASSERT_TRUE(t.pool.count("vjp/sm"));
  EXPECT_TRUE(at::allclose(t.pool.at("vjp/sm"), -t.kt));  // d loss / d sm
  EXPECT_TRUE(t.pool.count("vjp/add") && t.pool.count("vjp/w") && t.pool.count("vjp/loss"));
  EXPECT_FALSE(t.pool.count("vjp/k") || t.pool.count("vjp/negk"));  // not differentiated

  const ReproDir written = t.WrittenCut(t.Cut({"sm"}), t.pool, "cut");
  const GraphEntry& c = written.graphs()[0];
  ASSERT_EQ(c.tangents, (std::vector<std::string>{"vjp/sm"}));
  EXPECT_TRUE(at::equal(*written.tensors().Get("vjp/sm"), t.pool.at("vjp/sm")));
  EXPECT_EQ(c.graph.OutputValues()[0]->name(), "sm");
  EXPECT_TRUE(written.manifest().host_ops.empty());  // a host op no node calls needs no module
}

// A cut returning only values the original's backward never reached: a forward-only check.
TEST(CandidateWriter, ACutOfValuesTheBackwardNeverReachedIsCheckedForwardOnly) {
  SoftmaxTrain t;
  ASSERT_TRUE(AddReferenceValues(*t.repro, t.entry(), "cpu", t.pool).ok());
  const ReproDir forward = t.WrittenCut(t.Cut({"negk"}), t.pool, "cut3");
  EXPECT_EQ(forward.graphs()[0].tangents, (std::vector<std::string>{""}));
}

// No backward known (a pool without "vjp/" values): a sum() of the values is the loss.
TEST(CandidateWriter, WithNoBackwardKnownACutsValuesAreSummedIntoALoss) {
  SoftmaxTrain t;
  ASSERT_TRUE(AddReferenceValues(*t.repro, t.entry(), "cpu", t.pool).ok());
  std::map<std::string, at::Tensor> plain;
  for (const auto& [key, v] : t.pool)
    if (key.rfind("vjp/", 0) != 0) plain[key] = v;
  const ReproDir summed = t.WrittenCut(t.Cut({"sm"}), plain, "cut2");
  EXPECT_TRUE(summed.graphs()[0].tangents.empty());
  EXPECT_EQ(summed.graphs()[0].graph.OutputValues()[0]->target(), "aten::sum");
}

// A train graph whose backward the interpreter cannot run (its first output no scalar loss): no
// gradients, and the log says what cuts get instead.
TEST(CandidateWriter, AnOriginalWhoseBackwardCannotRunSaysWhatCutsGetInstead) {
  SoftmaxTrain t;
  ASSERT_TRUE(t.e.graph.SetOutputs({"sm"}).ok());
  const ReproDir nonscalar = t.Written(t.dir / "nonscalar");
  std::map<std::string, at::Tensor> none;
  std::ostringstream log;
  ASSERT_TRUE(AddReferenceValues(nonscalar, nonscalar.graphs()[0], "cpu", none, &log).ok());
  EXPECT_FALSE(none.count("vjp/sm"));
  EXPECT_NE(log.str().find("a cut's values get a sum() as their loss"), std::string::npos) << log.str();
}

TEST(CheckCommandJudge, ExitZeroIsInterestingAndJobsRunTogether) {
  testing::TempDir dir;
  std::vector<fs::path> dirs;
  for (int i = 0; i < 5; ++i) {
    dirs.push_back(dir / ("c" + std::to_string(i)));
    fs::create_directories(dirs.back());
    if (i % 2 == 0) testing::Spit(dirs.back() / "yes", "");
  }
  // Each check records itself in a shared log, then answers by whether its dir holds "yes".
  const std::string cmd = "sh -c 'echo $0 >> " + (dir / "log").string() + "; test -e \"$0/yes\"'";
  auto judge = CheckCommandJudge(cmd, 3, 60);
  EXPECT_EQ(judge(dirs), (std::vector<bool>{true, false, true, false, true}));
  const std::string log = testing::Slurp(dir / "log");
  EXPECT_EQ(std::count(log.begin(), log.end(), '\n'), 5);
}

}  // namespace
}  // namespace parity::minifier
