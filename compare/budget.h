// Noise budgets: how far from its fp64 reference an output may be when nothing but rounding
// changed. The verifier reruns eager with the math kept and the rounding moved (inputs and
// parameters moved one ulp at random, another intra-op thread count: experiment/calibration.h);
// each run's error against fp64 is one sample, eager's own error another. The budget is
// kBudgetQuantile of the samples times kBudgetFactor, for the RMSE and for the largest
// element error, never below the unit roundoff (half an ulp) of the output's dtype at the
// output's magnitude: what storing the exact value costs.
// CheckBudget says how many budgets a result is from fp64, how many elements exceed it and
// where the worst one is; Sentence says it in words a maintainer can quote. Pure tensor math:
// knows nothing of graphs or runs.
#pragma once

#include <ATen/core/Tensor.h>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace parity::compare {

// The stated rule, its one literal each: the budget is this quantile of the calibration
// samples (1.0: the largest of them) times this factor. The factor covers what the few
// calibration runs do not: a compiler reorders reductions further (fused, vectorized, split)
// than another thread count does. At 3, the labelled corpus (bench/rules_corpus.py,
// docs/benchmarks.md) had two known-good records (Inductor train steps) at 1.08 and 1.10
// budgets; 4 passes every known-good record there.
inline constexpr double kBudgetQuantile = 1.0;
inline constexpr double kBudgetFactor = 4.0;

// One calibration run's error against fp64 (finite elements only).
struct NoiseSample {
  std::string run;  // "eager" (eager's own error), "ulp seed 1", "threads 1", ...
  double rmse = 0.0;
  double max_abs = 0.0;
};

struct NoiseBudget {
  double rmse = 0.0;     // RMSE budget against fp64
  double max_abs = 0.0;  // largest element error budget against fp64
  std::string set_by;    // the sample that set the RMSE budget, or "rounding" (the floor)
  std::vector<NoiseSample> samples;
  nlohmann::json ToJson() const;
};

// `runs` are the calibration results (eager's own first, by convention named "eager"), each of
// fp64's shape. Only floating outputs have budgets (the caller asks FloatingOutput).
NoiseBudget MeasureBudget(const at::Tensor& fp64, const std::vector<std::pair<std::string, at::Tensor>>& runs);
bool FloatingOutput(const at::Tensor& t);

// A result against its budget.
struct BudgetCheck {
  bool within = true;
  double rmse = 0.0, max_abs = 0.0;  // the result's error against fp64
  double eager_rmse = 0.0;           // eager's own
  double budgets = 0.0;              // max(rmse / budget.rmse, max_abs / budget.max_abs)
  std::string by;                    // "rmse" | "max_abs": the budget exceeded most (or closest to)
  int64_t numel = 0;
  int64_t exceeding = 0;             // elements further from fp64 than budget.max_abs
  int64_t nonfinite = 0;             // elements NaN/Inf in the result and finite in eager (or the reverse)
  std::vector<int64_t> worst_index;  // where |result - fp64| is largest (a non-finite mismatch first)
  double worst = 0.0, worst_fp64 = 0.0, worst_eager = 0.0;
  nlohmann::json ToJson() const;
};

// fp64, eager and res must have the same number of elements (same shape for the index).
BudgetCheck CheckBudget(const NoiseBudget& budget, const at::Tensor& fp64, const at::Tensor& eager, const at::Tensor& res);

// One sentence on one output: "logits: 37.2 noise budgets from fp64 (...); 1024 of 4096
// elements exceed it, the worst at [0, 17]: ..." (without "logits: " when `output` is "").
std::string Sentence(const std::string& output, const NoiseBudget& budget, const BudgetCheck& check);

// How many budgets a result is from fp64, as words: "37.2 noise budgets", or, where its budget
// is zero (every eager run exact: sin(0), a copy) and it is not, "beyond a noise budget of zero".
// JSON holds no infinity: such a count is written as kUnboundedBudgets, which reads back alike.
inline constexpr double kUnboundedBudgets = 1e300;
std::string BudgetsText(double budgets);

// "[0, 17]"
std::string IndexText(const std::vector<int64_t>& index);
// Three significant digits ("3.1e-04", "0.42", "37.2").
std::string Num3(double v);

}  // namespace parity::compare
