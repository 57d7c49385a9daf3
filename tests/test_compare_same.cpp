#include "compare/same.h"

#include <ATen/ops/full.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/scalar_tensor.h>
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <limits>

#include "repro/safetensors.h"
#include "test_helpers.h"

namespace parity::compare {
namespace {

TEST(Same, AllcloseFirst) {
  at::Tensor a = at::randn({100});
  SameOptions o;
  Verdict v = SameTensor(a, a + 1e-6, std::nullopt, o);
  EXPECT_TRUE(v.pass);
  EXPECT_EQ(v.rule, Rule::kAllclose);
  v = SameTensor(a, a + 1e-2, std::nullopt, o);
  EXPECT_FALSE(v.pass);
  EXPECT_EQ(v.rule, Rule::kAllcloseFailed);  // no fp64 reference: fp64_ref = ref, not float64
  EXPECT_EQ(v.stats->mismatches, 100);
}

TEST(Same, Float8ComparesAsItsFloat32Values) {
  for (auto type : {at::kFloat8_e4m3fn, at::kFloat8_e5m2}) {
    at::Tensor a = at::randn({64}).to(type);
    SameOptions o;
    EXPECT_TRUE(SameTensor(a, a.clone(), std::nullopt, o).pass) << c10::toString(type);
    EXPECT_TRUE(SameTensor(a, a.clone(), a.to(at::kDouble), o).pass) << c10::toString(type);
    EXPECT_FALSE(SameTensor(a, (a.to(at::kFloat) + 1).to(type), a.to(at::kDouble), o).pass) << c10::toString(type);
  }
}

TEST(Same, ToleranceMustBeAFiniteNonNegativeNumber) {
  EXPECT_TRUE(CheckTolerance(0, "--tol").ok());
  EXPECT_TRUE(CheckTolerance(1e-3, "--tol").ok());
  for (double bad : {-1.0, std::nan(""), std::numeric_limits<double>::infinity()}) {
    Status st = CheckTolerance(bad, "--tol");
    ASSERT_FALSE(st.ok());
    EXPECT_EQ(st.error().kind, ErrorKind::kBadInput);
    EXPECT_NE(st.error().message.find("--tol"), std::string::npos);
  }
}

TEST(Same, RmseAgainstFp64Reference) {
  at::Tensor truth = at::randn({2000}, at::kDouble);
  at::Tensor ref = (truth + 1e-3 * at::randn({2000}, at::kDouble)).to(at::kFloat);
  at::Tensor close = (truth + 1.5e-3 * at::randn({2000}, at::kDouble)).to(at::kFloat);
  at::Tensor far = (truth + 5e-3 * at::randn({2000}, at::kDouble)).to(at::kFloat);
  SameOptions o;
  Verdict v = SameTensor(ref, close, truth, o);
  EXPECT_TRUE(v.pass);
  EXPECT_EQ(v.rule, Rule::kRmse);
  EXPECT_EQ(v.multiplier, 2.0);
  v = SameTensor(ref, far, truth, o);
  EXPECT_FALSE(v.pass);
  EXPECT_EQ(v.rule, Rule::kRmse);
  EXPECT_GT(v.stats->rmse_res_vs_fp64, 2 * v.stats->rmse_ref_vs_fp64);
}

TEST(Same, MultiplierRules) {
  SameOptions o;
  auto f32 = at::randn({2000});
  EXPECT_EQ(RmseMultiplier(f32, f32, 2000, o), 2.0);
  EXPECT_EQ(RmseMultiplier(f32, f32.to(at::kBFloat16), 2000, o), 3.0);
  EXPECT_EQ(RmseMultiplier(f32, f32, 999, o), 3.0);
  auto k11 = at::randn({4, 500, 1, 1});
  EXPECT_EQ(RmseMultiplier(k11, k11, 2000, o), 3.0);
  o.use_larger_multiplier_for_smaller_tensor = true;
  EXPECT_EQ(RmseMultiplier(f32, f32, 10, o), 10.0);
  EXPECT_EQ(RmseMultiplier(f32, f32, 500, o), 8.0);
  o.use_larger_multiplier_for_smaller_tensor = false;
  o.tol = 2e-2;
  EXPECT_EQ(RmseMultiplier(f32, f32, 2000, o), 3.0);
  o.force_max_multiplier = true;
  EXPECT_EQ(RmseMultiplier(f32, f32, 2000, o), 10.0);
}

TEST(Same, DtypeBoolAndNanRules) {
  SameOptions o;
  at::Tensor a = at::randn({10});
  EXPECT_EQ(SameTensor(a, a.to(at::kDouble), std::nullopt, o).rule, Rule::kDtypeMismatch);
  o.exact_dtype = false;
  EXPECT_TRUE(SameTensor(a, a.to(at::kDouble), std::nullopt, o).pass);
  o.exact_dtype = true;
  at::Tensor b = a > 0;
  EXPECT_TRUE(SameTensor(b, b, std::nullopt, o).pass);
  EXPECT_FALSE(SameTensor(b, ~b, std::nullopt, o).pass);
  o.ignore_non_fp = true;
  EXPECT_EQ(SameTensor(b, ~b, std::nullopt, o).rule, Rule::kBoolIgnored);
  o.ignore_non_fp = false;
  at::Tensor n = at::full({3}, std::nan(""));
  EXPECT_FALSE(SameTensor(n, n, std::nullopt, o).pass);
  o.equal_nan = true;
  EXPECT_TRUE(SameTensor(n, n, std::nullopt, o).pass);
  EXPECT_EQ(SameTensor(n, n, std::nullopt, o).stats->ref_nan, 3);
}

TEST(Same, NestedValuesCompareEveryLeaf) {
  at::Tensor a = at::randn({4});
  auto dict = c10::impl::GenericDict(c10::StringType::get(), c10::AnyType::get());
  dict.insert("b", a);
  dict.insert("a", c10::IValue(int64_t{3}));
  auto dict2 = c10::impl::GenericDict(c10::StringType::get(), c10::AnyType::get());
  dict2.insert("b", a + 1);
  dict2.insert("a", c10::IValue(int64_t{3}));
  c10::IValue ref = c10::ivalue::Tuple::create({a, c10::IValue(dict), c10::IValue(1.5)});
  c10::IValue res = c10::ivalue::Tuple::create({a, c10::IValue(dict2), c10::IValue(1.5)});
  SameResult r = Same(ref, res, c10::IValue(), SameOptions{});
  EXPECT_FALSE(r.pass);
  ASSERT_EQ(r.leaves.size(), 4u);
  EXPECT_EQ(r.leaves[1].path, "[1]['a']");  // dict keys visited sorted
  EXPECT_TRUE(r.leaves[1].pass);
  EXPECT_EQ(r.leaves[2].path, "[1]['b']");
  EXPECT_FALSE(r.leaves[2].pass);
  SameResult len = Same(c10::ivalue::Tuple::create({a}), c10::ivalue::Tuple::create({a, a}), c10::IValue(), SameOptions{});
  EXPECT_FALSE(len.pass);
  EXPECT_EQ(len.leaves[0].rule, Rule::kStructure);
}

// Conformance: parity's verdict equals torch._dynamo.utils.same()'s on the generated corpus.
TEST(SameConformance, MatchesTorchOnTheGeneratedCorpus) {
  PARITY_REQUIRE_TEST_DATA();
  std::ifstream in(testing::TestData() / "same_cases.json");
  ASSERT_TRUE(in) << "same_cases.json missing";
  nlohmann::json corpus = nlohmann::json::parse(in);
  auto file = safetensors::File::Open(testing::TestData() / "same_cases.safetensors");
  ASSERT_TRUE(file.ok()) << file.error().message;
  int checked = 0, mismatched = 0;
  for (const auto& c : corpus["cases"]) {
    const std::string id = "case" + std::to_string(c["id"].get<int>());
    const auto& jo = c["options"];
    SameOptions o;
    o.tol = jo["tol"];
    o.equal_nan = jo["equal_nan"];
    o.cos_similarity = jo["cos_similarity"];
    o.exact_dtype = jo["exact_dtype"];
    o.ignore_non_fp = jo["ignore_non_fp"];
    o.use_larger_multiplier_for_smaller_tensor = jo["use_larger_multiplier_for_smaller_tensor"];
    o.force_max_multiplier = jo["force_max_multiplier"];
    o.use_iou_for_bool = jo["use_iou_for_bool"];
    std::optional<at::Tensor> fp64;
    if (c["has_fp64"].get<bool>()) fp64 = *file->Get(id + "/fp64");
    Verdict v = SameTensor(*file->Get(id + "/ref"), *file->Get(id + "/res"), fp64, o);
    ++checked;
    if (v.pass != c["expected"].get<bool>()) {
      ++mismatched;
      ADD_FAILURE() << id << " (" << c["category"] << ", options " << jo.dump() << "): same() says " << c["expected"]
                    << ", parity says " << v.pass << " by rule " << ToString(v.rule) << " " << v.message;
    }
  }
  EXPECT_GE(checked, 500);
  EXPECT_EQ(mismatched, 0);
}

}  // namespace
}  // namespace parity::compare
