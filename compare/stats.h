// Error statistics of one result tensor against its reference (and optionally an fp64
// reference), computed in double precision in one streaming pass over CPU memory.
#pragma once

#include <ATen/core/Tensor.h>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>

namespace parity::compare {

struct TensorStats {
  int64_t numel = 0;
  double max_abs_err = 0.0;    // max |ref - res| over finite differences
  int64_t max_abs_index = -1;  // flat index of that element
  double max_rel_err = 0.0;    // max |ref - res| / |ref| over elements with ref != 0
  int64_t max_rel_index = -1;
  int64_t mismatches = 0;                                              // elements outside isclose(ref, res, tol, tol, equal_nan)
  double rmse_ref_vs_fp64 = std::numeric_limits<double>::quiet_NaN();  // NaN when no fp64 ref
  double rmse_res_vs_fp64 = std::numeric_limits<double>::quiet_NaN();
  double cosine = std::numeric_limits<double>::quiet_NaN();  // cosine similarity ref/res
  int64_t ref_nan = 0, res_nan = 0, ref_inf = 0, res_inf = 0;

  nlohmann::json ToJson() const;
};

// ref, res (and fp64_ref) must have the same number of elements; any dtype, any device. A complex
// tensor's statistics are its real numbers' (RealNumbers: numel, indices and errors over the
// real and imaginary parts), never its real parts' alone.
TensorStats ComputeStats(const at::Tensor& ref, const at::Tensor& res, const std::optional<at::Tensor>& fp64_ref, double tol,
                         bool equal_nan);

// The numbers a tensor holds, as real values: a complex tensor as its real view (the real and
// imaginary parts, a last dim of 2: an error in either counts), any other as it is. Every
// statistic reads a tensor through this (noise budgets are measured for floating outputs only).
at::Tensor RealNumbers(const at::Tensor& t);

// The plain contiguous CPU view used by the streaming passes (of RealNumbers): float and double
// pass through, half, bfloat16 and float8 become float (exactly), every other dtype double.
at::Tensor AsStreamable(const at::Tensor& t);

}  // namespace parity::compare
