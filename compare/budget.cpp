#include "compare/budget.h"

#include <ATen/TensorOperators.h>
#include <ATen/ops/isfinite.h>
#include <ATen/ops/isnan.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros_like.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

namespace parity::compare {

namespace {

using nlohmann::json;

// The tensor as flat float64 on the CPU.
at::Tensor Flat64(const at::Tensor& t) { return t.detach().to(at::kCPU).to(at::kDouble).reshape({-1}).contiguous(); }

// Machine epsilon of a floating dtype (one ulp at 1.0).
double Epsilon(c10::ScalarType dt) {
  switch (dt) {
    case at::kDouble:
      return std::numeric_limits<double>::epsilon();
    case at::kHalf:
      return 0x1p-10;
    case at::kBFloat16:
      return 0x1p-7;
    case at::kFloat8_e4m3fn:
    case at::kFloat8_e4m3fnuz:
      return 0x1p-3;
    case at::kFloat8_e5m2:
    case at::kFloat8_e5m2fnuz:
      return 0x1p-2;
    default:
      return std::numeric_limits<float>::epsilon();
  }
}

// RMSE and largest error of `run` against fp64 over the elements finite in both.
NoiseSample ErrorOf(const at::Tensor& f64, const at::Tensor& run, std::string label) {
  NoiseSample s{std::move(label), 0.0, 0.0};
  const at::Tensor r = Flat64(run);
  const at::Tensor finite = at::isfinite(f64).logical_and(at::isfinite(r));
  const int64_t n = finite.sum().item<int64_t>();
  if (n == 0) return s;
  const at::Tensor err = (r - f64).abs().masked_select(finite);
  s.rmse = std::sqrt(err.square().mean().item<double>());
  s.max_abs = err.max().item<double>();
  return s;
}

double Quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const double pos = q * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos)), hi = std::min(v.size() - 1, lo + 1);
  return v[lo] + (pos - static_cast<double>(lo)) * (v[hi] - v[lo]);
}

std::vector<int64_t> Unflatten(int64_t flat, at::IntArrayRef sizes) {
  std::vector<int64_t> index(sizes.size(), 0);
  for (size_t d = sizes.size(); d-- > 0;) {
    if (sizes[d] == 0) break;
    index[d] = flat % sizes[d];
    flat /= sizes[d];
  }
  return index;
}

// The budget's factor as the rule states it ("3").
std::string Factor() {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%g", kBudgetFactor);
  return buf;
}

// An element's value, with the digits that tell neighbours apart.
std::string Value(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.7g", v);
  return buf;
}

}  // namespace

bool FloatingOutput(const at::Tensor& t) { return t.defined() && t.is_floating_point() && t.numel() > 0; }

std::string BudgetsText(double budgets) {
  if (budgets >= kUnboundedBudgets) return "beyond a noise budget of zero";
  return Num3(budgets) + " noise budgets";
}

std::string Num3(double v) {
  char buf[32];
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  const double a = std::fabs(v);
  if (a != 0.0 && (a < 1e-2 || a >= 1e5))
    std::snprintf(buf, sizeof buf, "%.1e", v);
  else
    std::snprintf(buf, sizeof buf, a >= 100 ? "%.0f" : a >= 10 ? "%.1f" : "%.2f", v);
  return buf;
}

std::string IndexText(const std::vector<int64_t>& index) {
  std::string s = "[";
  for (size_t i = 0; i < index.size(); ++i) s += (i ? ", " : "") + std::to_string(index[i]);
  return s + "]";
}

NoiseBudget MeasureBudget(const at::Tensor& fp64, const std::vector<std::pair<std::string, at::Tensor>>& runs) {
  NoiseBudget b;
  const at::Tensor f64 = Flat64(fp64);
  std::vector<double> rmses, maxes;
  for (const auto& [label, run] : runs) {
    b.samples.push_back(ErrorOf(f64, run, label));
    rmses.push_back(b.samples.back().rmse);
    maxes.push_back(b.samples.back().max_abs);
  }
  const double rmse_q = Quantile(rmses, kBudgetQuantile), max_q = Quantile(maxes, kBudgetQuantile);
  // The unit roundoff of the output's dtype at its magnitude: a budget is never below what
  // storing the exact value in that dtype may cost.
  const c10::ScalarType dt = runs.empty() ? at::kFloat : runs.front().second.scalar_type();
  const at::Tensor finite = f64.masked_select(at::isfinite(f64));
  const double rms = finite.numel() ? std::sqrt(finite.square().mean().item<double>()) : 0.0;
  const double largest = finite.numel() ? finite.abs().max().item<double>() : 0.0;
  const double ulp_rmse = Epsilon(dt) / 2 * rms, ulp_max = Epsilon(dt) / 2 * largest;
  b.rmse = kBudgetFactor * std::max(rmse_q, ulp_rmse);
  b.max_abs = kBudgetFactor * std::max(max_q, ulp_max);
  b.set_by = "rounding";
  if (rmse_q >= ulp_rmse)
    for (const auto& s : b.samples)
      if (s.rmse == *std::max_element(rmses.begin(), rmses.end())) {
        b.set_by = s.run;
        break;
      }
  return b;
}

BudgetCheck CheckBudget(const NoiseBudget& budget, const at::Tensor& fp64, const at::Tensor& eager, const at::Tensor& res) {
  BudgetCheck c;
  const at::Tensor f64 = Flat64(fp64), e = Flat64(eager), r = Flat64(res);
  c.numel = f64.numel();
  const NoiseSample got = ErrorOf(f64, r, "result"), own = ErrorOf(f64, e, "eager");
  c.rmse = got.rmse;
  c.max_abs = got.max_abs;
  c.eager_rmse = own.rmse;
  auto ratio = [](double err, double b) { return b > 0 ? err / b : (err > 0 ? INFINITY : 0.0); };
  const double by_rmse = ratio(c.rmse, budget.rmse), by_max = ratio(c.max_abs, budget.max_abs);
  c.budgets = std::max(by_rmse, by_max);
  c.by = by_rmse >= by_max ? "rmse" : "max_abs";
  // Non-finite mismatches: NaN or Inf in one of eager and the result where the other differs.
  const at::Tensor rf = at::isfinite(r), ef = at::isfinite(e);
  const at::Tensor same_nonfinite = at::isnan(r).logical_and(at::isnan(e)).logical_or(r.eq(e));
  const at::Tensor mismatch = rf.logical_xor(ef).logical_or(rf.logical_not().logical_and(same_nonfinite.logical_not()));
  c.nonfinite = mismatch.sum().item<int64_t>();
  const at::Tensor comparable = rf.logical_and(at::isfinite(f64));
  const at::Tensor err = at::where(comparable, (r - f64).abs(), at::zeros_like(f64));
  c.exceeding = err.gt(budget.max_abs).sum().item<int64_t>() + c.nonfinite;
  int64_t worst = c.numel ? err.argmax().item<int64_t>() : -1;
  if (c.nonfinite > 0) worst = mismatch.to(at::kByte).argmax().item<int64_t>();
  if (worst >= 0) {
    c.worst_index = Unflatten(worst, fp64.sizes());
    c.worst = r[worst].item<double>();
    c.worst_fp64 = f64[worst].item<double>();
    c.worst_eager = e[worst].item<double>();
  }
  if (c.nonfinite > 0) c.budgets = INFINITY;
  c.within = c.budgets <= 1.0;
  return c;
}

json NoiseBudget::ToJson() const {
  json runs = json::array();
  for (const auto& s : samples) runs.push_back({{"run", s.run}, {"rmse", s.rmse}, {"max_abs", s.max_abs}});
  return {{"rmse", rmse}, {"max_abs", max_abs}, {"quantile", kBudgetQuantile}, {"factor", kBudgetFactor},
          {"set_by", set_by}, {"runs", runs}};
}

json BudgetCheck::ToJson() const {
  auto finite = [](double v) { return std::isfinite(v) ? json(v) : json(kUnboundedBudgets); };
  json j = {{"within", within},     {"budgets", finite(budgets)}, {"by", by},
            {"rmse", rmse},         {"max_abs", max_abs},         {"eager_rmse", eager_rmse},
            {"exceeding", exceeding}, {"numel", numel},           {"nonfinite", nonfinite}};
  if (!worst_index.empty())
    j["worst"] = {{"index", worst_index}, {"value", finite(worst)}, {"fp64", finite(worst_fp64)}, {"eager", finite(worst_eager)}};
  return j;
}

std::string Sentence(const std::string& output, const NoiseBudget& budget, const BudgetCheck& check) {
  const std::string set_by = budget.set_by == "eager"     ? "eager's own error against fp64"
                             : budget.set_by == "rounding" ? "the rounding of the exact value to its dtype"
                                                          : "the eager rerun with " + budget.set_by;
  const bool rmse = check.by == "rmse";
  std::string s = (output.empty() ? "" : output + ": ") + (check.nonfinite > 0 ? "NaN/Inf where eager is finite (or the reverse)"
                                                        : BudgetsText(check.budgets) + " from fp64");
  // A NaN or an infinity is beyond any budget: the errors' size (over the finite elements, 0 when
  // every element went non-finite) would only mislead.
  if (check.nonfinite > 0)
    s += " in " + std::to_string(check.nonfinite) + " of " + std::to_string(check.numel) + " elements";
  else
    s += " (" + std::string(rmse ? "RMSE " : "largest error ") + Num3(rmse ? check.rmse : check.max_abs) + " against a budget of " +
         Num3(rmse ? budget.rmse : budget.max_abs) + " = " + Factor() + " x the largest of " +
         std::to_string(budget.samples.size()) + " eager runs' errors, set by " + set_by + "; eager's own RMSE is " +
         Num3(budget.rmse > 0 ? check.eager_rmse / budget.rmse : 0.0) + " budgets)";
  if (!check.within) {
    if (check.nonfinite == 0) s += "; " + std::to_string(check.exceeding) + " of " + std::to_string(check.numel) + " elements exceed it";
    if (!check.worst_index.empty())
      s += std::string(check.nonfinite > 0 ? ", one at " : ", the worst at ") + IndexText(check.worst_index) + ": " + Value(check.worst) +
           " where fp64 has " + Value(check.worst_fp64) + " and eager " + Value(check.worst_eager);
  }
  return s;
}

}  // namespace parity::compare
