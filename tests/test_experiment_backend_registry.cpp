#include <ATen/ops/allclose.h>
#include <ATen/ops/equal.h>
#include <gtest/gtest.h>

#include "repro/repro_dir.h"
#include "test_helpers.h"
#include "experiment/backend.h"
#include "experiment/reference.h"

namespace parity::experiment {
namespace {

TEST(BackendRegistry, KnowsEveryListedBackend) {
  for (const auto& info : Backends()) {
    std::string name = info.name;
    if (name.find('<') != std::string::npos) name = name.substr(0, name.find('<')) + "my_vendor";
    EXPECT_TRUE(MakeBackend(name).ok()) << name;
  }
  EXPECT_TRUE(testing::FailsWith(MakeBackend("tensorrt"), {"unknown backend \"tensorrt\"", "inductor"}));
}

TEST(BackendRegistry, ParsesOptions) {
  auto o = ParseBackendOptions({"max_autotune=True", "cpp.inject_relu_bug_TESTING_ONLY=accuracy"});
  ASSERT_TRUE(o.ok());
  EXPECT_EQ((*o)["cpp.inject_relu_bug_TESTING_ONLY"], "accuracy");
  EXPECT_TRUE(testing::FailsWith(ParseBackendOptions({"oops"}), {"expected [BACKEND:]KEY=VALUE"}));
}

// A key with a backend's name and a colon before it is that backend's only (a value may hold
// colons: an op's name); a name that is no backend, or no key after it, is BadInput naming it.
TEST(BackendRegistry, OptionsScopedToABackendGoToThatBackendOnly) {
  auto o = ParseBackendOptions({"max_autotune=True", "fault:op=aten::gelu", "fault:kind=nan",
                                "torch_compile:my_vendor:max_autotune=False", "inductor:fallback_random=False"});
  ASSERT_TRUE(o.ok()) << o.error().message;
  EXPECT_EQ(OptionsFor(*o, "fault"), (nlohmann::json{{"max_autotune", "True"}, {"op", "aten::gelu"}, {"kind", "nan"}}));
  EXPECT_EQ(OptionsFor(*o, "inductor"), (nlohmann::json{{"max_autotune", "True"}, {"fallback_random", "False"}}));
  EXPECT_EQ(OptionsFor(*o, "torch_compile:my_vendor"), (nlohmann::json{{"max_autotune", "False"}}));  // its own over all's
  EXPECT_EQ(OptionsFor(*o, "aot_eager"), (nlohmann::json{{"max_autotune", "True"}}));
  EXPECT_EQ(OptionsFor(nlohmann::json(), "eager"), nlohmann::json::object());
  EXPECT_TRUE(testing::FailsWith(ParseBackendOptions({"faults:op=aten::gelu"}),
                                 {"--backend-option \"faults:op=aten::gelu\"", "unknown backend \"faults\""}));
  EXPECT_TRUE(testing::FailsWith(ParseBackendOptions({"fault:=x"}), {"no KEY after fault:"}));
  EXPECT_TRUE(testing::FailsWith(ParseBackendOptions({"oops"}, "--kernel-option"), {"--kernel-option \"oops\""}));
}

ExperimentContext Context(const ReproDir& r, const std::string& mode, nlohmann::json options) {
  ExperimentContext ctx;
  ctx.repro = &r;
  ctx.graph = &r.graphs()[0];
  ctx.mode = mode;
  ctx.options = std::move(options);
  return ctx;
}

TEST(FaultBackend, PerturbsOnlyTheNamedOp) {
  testing::TempDir dir;
  testing::WriteSmallRepro(dir.path());
  auto r = ReproDir::Load(dir.path());
  ASSERT_TRUE(r.ok());
  auto eager = std::move(MakeBackend("eager")).value();
  auto fault = std::move(MakeBackend("fault")).value();
  auto ctx = Context(*r, "eval", {{"op", "aten::sum"}, {"delta", "0.5"}});
  ASSERT_TRUE(fault->Supports(ctx).ok());
  auto a = eager->Run(ctx), b = fault->Run(ctx);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_TRUE(at::equal(a->outputs[0].second, b->outputs[0].second));           // relu untouched
  EXPECT_TRUE(at::allclose(a->outputs[1].second + 0.5, b->outputs[1].second));  // sum + 0.5
  auto bad = Context(*r, "eval", {{"op", "aten::sum"}, {"kind", "explode"}});
  EXPECT_FALSE(fault->Supports(bad).ok());
  auto raise = Context(*r, "eval", {{"op", "aten::relu"}, {"kind", "raise"}});
  auto e = fault->Run(raise);
  EXPECT_TRUE(testing::FailsWith(e, {"fault injected", "node relu"}));
}

TEST(Reference, TrainCollectsLossGradientsAndSgdStep) {
  // A graph whose first output is a scalar loss: loss = sum(relu(x + w)).
  testing::TempDir dir;
  testing::WriteSmallRepro(dir.path());
  nlohmann::json m = nlohmann::json::parse(testing::Slurp(dir / "graphs/g.json"));
  auto ref = [](const char* n) {
    nlohmann::json r = nlohmann::json::object();
    r["node"] = n;
    return r;
  };
  nlohmann::json total = nlohmann::json::object();
  total["name"] = "total";
  total["op"] = "call_function";
  total["target"] = "aten::sum";
  total["args"] = nlohmann::json::array({ref("relu")});
  m["nodes"][5]["args"] = nlohmann::json::array({nlohmann::json::array({ref("total")})});
  m["nodes"].insert(m["nodes"].begin() + 5, total);
  testing::Spit(dir / "graphs/g.json", m.dump());
  nlohmann::json man = nlohmann::json::parse(testing::Slurp(dir / "manifest.json"));
  man["graphs"][0].erase("expected_outputs");
  man["graphs"][0].erase("output_names");
  man["mode"] = "train";
  testing::Spit(dir / "manifest.json", man.dump());
  auto r = ReproDir::Load(dir.path());
  ASSERT_TRUE(r.ok()) << r.error().message;
  auto p = interp::Program::Compile(r->graphs()[0].graph, "g.json");
  ASSERT_TRUE(p.ok()) << p.error().message;
  auto res = RunReference(*p, *r, r->graphs()[0], "train", {});
  ASSERT_TRUE(res.ok()) << res.error().message;
  std::vector<std::string> names;
  for (auto& [n, t] : *res) names.push_back(n);
  EXPECT_EQ(names, (std::vector<std::string>{"loss", "grad/param/w", "grad/input/x", "sgd/param/w"}));
  at::Tensor x = *r->Tensor("g/input/x"), w = *r->Tensor("param/w");
  at::Tensor mask = ((x + w) > 0).to(at::kFloat);
  EXPECT_TRUE(at::allclose((*res)[1].second, mask.sum(0)));  // d loss / d w
  EXPECT_TRUE(at::allclose((*res)[2].second, mask));         // d loss / d x
  EXPECT_TRUE(at::allclose((*res)[3].second, w - kSgdLr * mask.sum(0)));
}

TEST(BackendRegistry, WorkersWarmUpOnlyForABackendThatCompilesInThem) {
  EXPECT_EQ(WarmDevice({"inductor"}, "cpu"), "cpu");
  EXPECT_EQ(WarmDevice({"fault", "inductor"}, "cuda"), "cuda");
  EXPECT_EQ(WarmDevice({"fault"}, "cpu"), "");      // C++: its workers only serve host ops
  EXPECT_EQ(WarmDevice({}, "cpu"), "");
  EXPECT_EQ(WarmDevice({"no_such"}, "cpu"), "cpu");  // unknown: its error comes later
}

}  // namespace
}  // namespace parity::experiment
