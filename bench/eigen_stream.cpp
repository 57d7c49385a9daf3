// The comparator's block statistics written with Eigen's vectorized array maps, to measure
// against the hand-written fused loop (compare/stream_kernel.cpp) on the same blocks. Same
// signature and results; each statistic is one Eigen reduction over the block (the block is
// 4096 elements, so the passes after the first read from L1/L2).
#include <Eigen/Core>

#include <limits>
#include <type_traits>

#include "compare/stream_kernel.h"

namespace parity::bench {

using compare::detail::Partial;

template <typename A, typename B, bool kHasFp64>
void StreamBlockEigen(const A* a, const B* b, const double* f, int64_t start, int64_t len, double tol, bool equal_nan,
                      Partial& p) {
  using W = std::conditional_t<(sizeof(A) > sizeof(B)), A, B>;
  constexpr double kInf = std::numeric_limits<double>::infinity();
  const W winf = std::numeric_limits<W>::infinity();
  Eigen::Map<const Eigen::Array<A, Eigen::Dynamic, 1>> ma(a + start, len);
  Eigen::Map<const Eigen::Array<B, Eigen::Dynamic, 1>> mb(b + start, len);
  const auto x = ma.template cast<double>();
  const auto y = mb.template cast<double>();
  p.dot += (x * y).sum();
  p.nref += x.square().sum();
  p.nres += y.square().sum();
  if constexpr (kHasFp64) {
    Eigen::Map<const Eigen::ArrayXd> mf(f + start, len);
    p.sq_ref_fp64 += (mf - x).square().sum();
    p.sq_res_fp64 += (mf - y).square().sum();
  }
  const auto xn = x.isNaN(), yn = y.isNaN();
  p.ref_nan += xn.count();
  p.res_nan += yn.count();
  p.ref_inf += (x.abs() == kInf).count();
  p.res_inf += (y.abs() == kInf).count();
  const auto wa = ma.template cast<W>();
  const auto wb = mb.template cast<W>();
  const W wt = static_cast<W>(tol);
  const auto actual = (wa - wb).abs();
  const auto close = (wa == wb) || ((actual <= wt + (wt * wb).abs()) && (actual != winf));
  p.mismatches += len - (equal_nan ? (close || (xn && yn)).count() : close.count());
  const auto ad = (x - y).abs();
  const double bmax = (ad < kInf).select(ad, -1.0).maxCoeff();
  const auto rel_ok = (ad < kInf) && (x != 0.0) && (x.abs() < kInf);
  const double brel = rel_ok.select(ad / x.abs(), -1.0).maxCoeff();
  if (bmax > p.max_abs) {
    p.max_abs = bmax;
    p.max_abs_block = start;
  }
  if (brel > p.max_rel) {
    p.max_rel = brel;
    p.max_rel_block = start;
  }
}

template void StreamBlockEigen<float, float, true>(const float*, const float*, const double*, int64_t, int64_t, double, bool,
                                                   Partial&);
template void StreamBlockEigen<float, float, false>(const float*, const float*, const double*, int64_t, int64_t, double, bool,
                                                    Partial&);

}  // namespace parity::bench
