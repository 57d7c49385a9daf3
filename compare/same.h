// Comparison with the semantics of torch._dynamo.utils.same (the check PyTorch's accuracy
// benchmarks and the minifier use):
//  - nested lists/tuples (lengths must match), dicts (same keys, visited sorted), floats become
//    tensors, ints/bools/strings/None compare by equality;
//  - tensors: exact_dtype -> dtype mismatch fails; bool -> ignore_non_fp passes, else IoU when
//    enabled, else allclose on uint8; cosine mode -> flatten to fp32, allclose(tol, equal_nan)
//    passes early, else cosine similarity >= 0.99; otherwise allclose(ref, res, atol=rtol=tol)
//    first, then, if the fp64 reference is float64: the NaN escape, then
//    rmse(fp64, res) <= multiplier * rmse(fp64, ref) + tol / 10.
// Every verdict carries the statistics parity reports next to it.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>
#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

#include "compare/stats.h"
#include "util/status.h"

namespace parity::compare {

// The one rule for a tolerance given on the command line (`flag` names it): a finite number
// >= 0, else kBadInput.
[[nodiscard]] Status CheckTolerance(double tol, const std::string& flag);

// same()'s default tolerance (torch._dynamo.utils.same), the one literal of it.
inline constexpr double kDefaultTol = 1e-4;

struct SameOptions {
  double tol = kDefaultTol;
  bool cos_similarity = false;
  bool equal_nan = false;
  bool exact_dtype = true;
  bool ignore_non_fp = false;
  bool use_larger_multiplier_for_smaller_tensor = false;
  bool force_max_multiplier = false;
  bool use_iou_for_bool = false;
  double iou_threshold = 0.99;
  bool compute_stats = true;
};

// Which rule decided a tensor's verdict.
enum class Rule {
  kDtypeMismatch,
  kShapeMismatch,
  kBoolIgnored,
  kBoolIou,
  kBoolAllclose,
  kCosineAllclose,
  kCosine,
  kAllclose,
  kNanEscape,
  kRmse,
  kRmseNanEqual,
  kIgnoredNonFp,
  kAllcloseFailed,
  kEquality,
  kStructure,
  kBitwise,  // identical bytes, NaN payloads and positions included (a replay of the same kernels)
  kRandom,   // drawn from random numbers or uninitialized memory: shape, dtype and layout compared
  kNoiseBudget,  // the calibrated rule: within the output's noise budget (compare/budget.h)
};
const char* ToString(Rule r);

struct Verdict {
  std::string path;  // "" for the root, "[1]", "['logits']", ...
  bool pass = false;
  Rule rule = Rule::kAllclose;
  std::string message;      // the reason in words, as same() would log it
  double multiplier = 0.0;  // RMSE rule only
  std::optional<TensorStats> stats;
  nlohmann::json ToJson() const;
};

struct SameResult {
  bool pass = true;
  std::vector<Verdict> leaves;  // every compared leaf, in visiting order
  nlohmann::json ToJson() const;
};

// One tensor pair. `fp64_ref` absent means "use ref", as in same().
[[nodiscard]] Verdict SameTensor(const at::Tensor& ref, const at::Tensor& res, const std::optional<at::Tensor>& fp64_ref,
                                 const SameOptions& options);

// Nested values (tensors, lists, tuples, dicts, numbers, strings, None). Unlike same(), every
// leaf is compared (no short-circuit), so the report names all failing outputs; `pass` is the
// conjunction, which is same()'s verdict. Structural mismatches same() raises on (type or key
// mismatch) are failures here with Rule::kStructure.
[[nodiscard]] SameResult Same(const c10::IValue& ref, const c10::IValue& res, const c10::IValue& fp64_ref,
                              const SameOptions& options);

// The multiplier of the RMSE rule.
double RmseMultiplier(const at::Tensor& ref, const at::Tensor& res, int64_t fp64_numel, const SameOptions& options);

}  // namespace parity::compare
