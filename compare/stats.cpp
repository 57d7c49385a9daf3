#include "compare/stats.h"

#include <ATen/ops/_to_copy.h>
#include <Eigen/Core>

#include <cmath>

namespace parity::compare {

namespace {

constexpr int64_t kBlock = 4096;

nlohmann::json NumberOrNull(double v) {
  if (std::isnan(v)) return nullptr;
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return v;
}

struct Accum {
  double sq_ref_fp64 = 0, sq_res_fp64 = 0, dot = 0, nref = 0, nres = 0;
};

// One streaming pass. A and B are float or double; F is double (or null).
template <typename A, typename B>
void Stream(const A* a, const B* b, const double* f, int64_t n, double tol, bool equal_nan, TensorStats& s, Accum& acc) {
  using Eigen::Array;
  using Eigen::Dynamic;
  using Eigen::Map;
  for (int64_t start = 0; start < n; start += kBlock) {
    const int64_t len = std::min(kBlock, n - start);
    Map<const Array<A, Dynamic, 1>> ma(a + start, len);
    Map<const Array<B, Dynamic, 1>> mb(b + start, len);
    auto da = ma.template cast<double>();
    auto db = mb.template cast<double>();
    acc.dot += (da * db).sum();
    acc.nref += da.square().sum();
    acc.nres += db.square().sum();
    if (f) {
      Map<const Array<double, Dynamic, 1>> mf(f + start, len);
      acc.sq_ref_fp64 += (mf - da).square().sum();
      acc.sq_res_fp64 += (mf - db).square().sum();
    }
    for (int64_t k = 0; k < len; ++k) {
      const int64_t i = start + k;
      const double x = static_cast<double>(a[i]);
      const double y = static_cast<double>(b[i]);
      const bool xn = std::isnan(x), yn = std::isnan(y);
      s.ref_nan += xn;
      s.res_nan += yn;
      s.ref_inf += std::isinf(x);
      s.res_inf += std::isinf(y);
      // isclose(ref, res) as ATen computes it, in the wider of the two types.
      using W = std::conditional_t<(sizeof(A) > sizeof(B)), A, B>;
      const W wa = static_cast<W>(a[i]), wb = static_cast<W>(b[i]);
      bool close = wa == wb || (equal_nan && xn && yn);
      if (!close) {
        const W actual = std::abs(wa - wb);
        const W allowed = static_cast<W>(tol) + std::abs(static_cast<W>(tol) * wb);
        close = std::isfinite(actual) && actual <= allowed;
      }
      s.mismatches += !close;
      const double d = std::abs(x - y);
      if (std::isfinite(d)) {
        if (d > s.max_abs_err || s.max_abs_index < 0) {
          s.max_abs_err = d;
          s.max_abs_index = i;
        }
        if (x != 0.0 && std::isfinite(x)) {
          const double r = d / std::abs(x);
          if (r > s.max_rel_err || s.max_rel_index < 0) {
            s.max_rel_err = r;
            s.max_rel_index = i;
          }
        }
      }
    }
  }
}

}  // namespace

at::Tensor AsStreamable(const at::Tensor& t) {
  at::Tensor c = t.detach();
  if (c.device() != at::kCPU) c = c.to(at::kCPU);
  if (c.scalar_type() != at::kFloat && c.scalar_type() != at::kDouble) c = c.to(at::kDouble);
  return c.contiguous();
}

TensorStats ComputeStats(const at::Tensor& ref, const at::Tensor& res, const std::optional<at::Tensor>& fp64_ref,
                         double tol, bool equal_nan) {
  TensorStats s;
  s.numel = ref.numel();
  if (ref.numel() != res.numel()) return s;
  at::Tensor a = AsStreamable(ref), b = AsStreamable(res);
  at::Tensor f;
  if (fp64_ref && fp64_ref->numel() == ref.numel()) {
    f = fp64_ref->detach().to(at::kCPU).to(at::kDouble).contiguous();
  }
  const double* fp = f.defined() ? f.const_data_ptr<double>() : nullptr;
  Accum acc;
  const int64_t n = a.numel();
  const bool af = a.scalar_type() == at::kFloat, bf = b.scalar_type() == at::kFloat;
  if (af && bf) Stream(a.const_data_ptr<float>(), b.const_data_ptr<float>(), fp, n, tol, equal_nan, s, acc);
  else if (af) Stream(a.const_data_ptr<float>(), b.const_data_ptr<double>(), fp, n, tol, equal_nan, s, acc);
  else if (bf) Stream(a.const_data_ptr<double>(), b.const_data_ptr<float>(), fp, n, tol, equal_nan, s, acc);
  else Stream(a.const_data_ptr<double>(), b.const_data_ptr<double>(), fp, n, tol, equal_nan, s, acc);
  if (fp && n > 0) {
    s.rmse_ref_vs_fp64 = std::sqrt(acc.sq_ref_fp64 / static_cast<double>(n));
    s.rmse_res_vs_fp64 = std::sqrt(acc.sq_res_fp64 / static_cast<double>(n));
  }
  if (n > 0) {
    const double denom = std::sqrt(acc.nref) * std::sqrt(acc.nres);
    s.cosine = denom > 0 ? acc.dot / denom : (acc.nref == 0 && acc.nres == 0 ? 1.0 : 0.0);
  }
  return s;
}

nlohmann::json TensorStats::ToJson() const {
  return {{"numel", numel},
          {"max_abs_err", NumberOrNull(max_abs_err)},
          {"max_abs_index", max_abs_index},
          {"max_rel_err", NumberOrNull(max_rel_err)},
          {"max_rel_index", max_rel_index},
          {"mismatches", mismatches},
          {"rmse_ref_vs_fp64", NumberOrNull(rmse_ref_vs_fp64)},
          {"rmse_res_vs_fp64", NumberOrNull(rmse_res_vs_fp64)},
          {"cosine", NumberOrNull(cosine)},
          {"ref_nan", ref_nan},
          {"res_nan", res_nan},
          {"ref_inf", ref_inf},
          {"res_inf", res_inf}};
}

}  // namespace parity::compare
