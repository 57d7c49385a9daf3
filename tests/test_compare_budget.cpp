#include "compare/budget.h"

#include <cmath>

#include <ATen/TensorOperators.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/tensor.h>
#include <ATen/ops/zeros.h>
#include <gtest/gtest.h>

namespace parity::compare {
namespace {

at::Tensor Vec(std::vector<double> v, c10::ScalarType dt = at::kFloat) {
  return at::tensor(v, at::TensorOptions().dtype(at::kDouble)).to(dt);
}

TEST(Budget, IsTheStatedQuantileOfTheRunsTimesTheFactor) {
  const at::Tensor f64 = Vec({1.0, 2.0, 3.0, 4.0}, at::kDouble);
  const at::Tensor eager = Vec({1.0, 2.0, 3.0, 4.0 + 1e-3});
  const at::Tensor run = Vec({1.0, 2.0 + 2e-3, 3.0, 4.0});
  const NoiseBudget b = MeasureBudget(f64, {{"eager", eager}, {"ulp seed 1", run}});
  ASSERT_EQ(b.samples.size(), 2u);
  EXPECT_NEAR(b.samples[1].rmse, 1e-3, 1e-6);  // sqrt(4e-6 / 4)
  EXPECT_NEAR(b.rmse, kBudgetFactor * 1e-3, 1e-6);
  EXPECT_NEAR(b.max_abs, kBudgetFactor * 2e-3, 1e-6);
  EXPECT_EQ(b.set_by, "ulp seed 1");
  const nlohmann::json j = b.ToJson();
  EXPECT_EQ(j["quantile"], kBudgetQuantile);
  EXPECT_EQ(j["runs"].size(), 2u);
}

TEST(Budget, NeverBelowTheRoundingOfTheExactValue) {
  const at::Tensor exact = Vec({1.0, -1.0, 1.0, -1.0}, at::kBFloat16);
  const NoiseBudget b = MeasureBudget(exact.to(at::kDouble), {{"eager", exact}});
  EXPECT_EQ(b.set_by, "rounding");
  EXPECT_DOUBLE_EQ(b.rmse, kBudgetFactor * 0x1p-8);
  // The same values in float32 get a budget 2^16 times smaller.
  const NoiseBudget f = MeasureBudget(exact.to(at::kDouble), {{"eager", exact.to(at::kFloat)}});
  EXPECT_DOUBLE_EQ(b.rmse / f.rmse, 65536.0);
}

TEST(Budget, CheckSaysHowManyBudgetsHowManyElementsAndWhere) {
  const at::Tensor f64 = at::arange(12, at::kDouble).reshape({3, 4});
  const at::Tensor eager = f64.to(at::kFloat);
  const NoiseBudget b = MeasureBudget(f64, {{"eager", eager + 1e-6}});
  const BudgetCheck same = CheckBudget(b, f64, eager, eager);
  EXPECT_TRUE(same.within);
  EXPECT_EQ(same.exceeding, 0);
  at::Tensor bad = eager.clone();
  bad[1][2] += 0.5;
  const BudgetCheck c = CheckBudget(b, f64, eager, bad);
  EXPECT_FALSE(c.within);
  EXPECT_GT(c.budgets, 1000.0);
  EXPECT_EQ(c.exceeding, 1);
  EXPECT_EQ(c.numel, 12);
  EXPECT_EQ(c.worst_index, (std::vector<int64_t>{1, 2}));
  EXPECT_DOUBLE_EQ(c.worst, 6.5);
  EXPECT_DOUBLE_EQ(c.worst_fp64, 6.0);
  const std::string s = Sentence("logits", b, c);
  EXPECT_NE(s.find("logits: "), std::string::npos) << s;
  EXPECT_NE(s.find("noise budgets from fp64"), std::string::npos) << s;
  EXPECT_NE(s.find("1 of 12 elements exceed it, the worst at [1, 2]: 6.5 where fp64 has 6"), std::string::npos) << s;
}

TEST(Budget, AnErrorWhereTheBudgetIsZeroIsBeyondItInWordsAndInJson) {
  // sin(0) and a copy are exact in every eager run: their budget is zero, and any error is
  // beyond it by no finite count (the minifier's divergence scan met it at a RoPE's position 0).
  const at::Tensor f64 = at::zeros({4}, at::kDouble);
  const at::Tensor eager = at::zeros({4});
  const NoiseBudget b = MeasureBudget(f64, {{"eager", eager}});
  EXPECT_EQ(b.rmse, 0.0);
  const BudgetCheck c = CheckBudget(b, f64, eager, Vec({0.0, 1e-3, 0.0, 0.0}));
  EXPECT_FALSE(c.within);
  EXPECT_TRUE(std::isinf(c.budgets));
  EXPECT_EQ(c.ToJson()["budgets"].get<double>(), kUnboundedBudgets);
  const std::string s = Sentence("y", b, c);
  EXPECT_NE(s.find("y: beyond a noise budget of zero from fp64"), std::string::npos) << s;
  EXPECT_EQ(BudgetsText(c.ToJson()["budgets"].get<double>()), "beyond a noise budget of zero");
  EXPECT_EQ(BudgetsText(37.2), "37.2 noise budgets");
}

TEST(Budget, NonFiniteWhereEagerIsFiniteFails) {
  const at::Tensor f64 = Vec({1.0, 2.0}, at::kDouble);
  const at::Tensor eager = Vec({1.0, 2.0});
  const NoiseBudget b = MeasureBudget(f64, {{"eager", eager}});
  const BudgetCheck c = CheckBudget(b, f64, eager, Vec({1.0, NAN}));
  EXPECT_FALSE(c.within);
  EXPECT_EQ(c.nonfinite, 1);
  EXPECT_EQ(c.worst_index, (std::vector<int64_t>{1}));
  const std::string s = Sentence("y", b, c);
  EXPECT_NE(s.find("y: NaN/Inf where eager is finite (or the reverse) in 1 of 2 elements, one at [1]: nan where fp64 has 2"),
            std::string::npos) << s;
  EXPECT_EQ(s.find("RMSE"), std::string::npos) << s;  // the finite elements' error says nothing here
  // NaN in both is not a mismatch.
  const BudgetCheck both = CheckBudget(b, Vec({1.0, NAN}, at::kDouble), Vec({1.0, NAN}), Vec({1.0, NAN}));
  EXPECT_TRUE(both.within);
}

TEST(Budget, NumbersReadAsThreeDigits) {
  EXPECT_EQ(Num3(37.24), "37.2");
  EXPECT_EQ(Num3(0.421), "0.42");
  EXPECT_EQ(Num3(3.1e-4), "3.1e-04");
  EXPECT_EQ(Num3(123.4), "123");
  EXPECT_EQ(IndexText({0, 17}), "[0, 17]");
}

}  // namespace
}  // namespace parity::compare
