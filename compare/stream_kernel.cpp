#include "compare/stream_kernel.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

namespace parity::compare::detail {

namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();
}  // namespace

// One block: every statistic in a single loop that `omp simd` vectorizes (the reductions are
// declared, so no fast-math is needed and isclose keeps IEEE semantics). A and B are float or
// double; W is the wider of the two, the type ATen evaluates isclose in.
template <typename A, typename B, bool kHasFp64>
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
__attribute__((target_clones("avx2", "default")))
#endif
void StreamBlock(const A* __restrict a, const B* __restrict b, const double* __restrict f, int64_t start, int64_t len,
           double tol, bool equal_nan, Partial& p) {
  using W = std::conditional_t<(sizeof(A) > sizeof(B)), A, B>;
  const W wt = static_cast<W>(tol);
  const W winf = std::numeric_limits<W>::infinity();
  double dot = 0, nref = 0, nres = 0, sq1 = 0, sq2 = 0, bmax = -1, brel = -1;
  int64_t an = 0, bn = 0, ai = 0, bi = 0, mism = 0;
  const int64_t end = start + len;
#pragma omp simd reduction(+ : dot, nref, nres, sq1, sq2, an, bn, ai, bi, mism) reduction(max : bmax, brel)
  for (int64_t i = start; i < end; ++i) {
    const double x = static_cast<double>(a[i]);
    const double y = static_cast<double>(b[i]);
    dot += x * y;
    nref += x * x;
    nres += y * y;
    if constexpr (kHasFp64) {
      const double e1 = f[i] - x, e2 = f[i] - y;
      sq1 += e1 * e1;
      sq2 += e2 * e2;
    }
    const bool xn = x != x, yn = y != y;
    an += xn;
    bn += yn;
    ai += std::fabs(x) == kInf;
    bi += std::fabs(y) == kInf;
    // isclose(ref, res, rtol=tol, atol=tol): equal, or |a - b| <= tol + |tol * b| and finite,
    // or both NaN with equal_nan.
    const W wa = static_cast<W>(a[i]), wb = static_cast<W>(b[i]);
    const W actual = std::fabs(wa - wb);
    const W allowed = wt + std::fabs(wt * wb);
    const bool close = (wa == wb) | ((actual <= allowed) & (actual != winf)) | (equal_nan & xn & yn);
    mism += !close;
    const double ad = std::fabs(x - y);
    const bool finite = ad < kInf;
    bmax = std::max(bmax, finite ? ad : -1.0);
    const double ax = std::fabs(x);
    const bool rel_ok = finite & (x != 0.0) & (ax < kInf);
    brel = std::max(brel, rel_ok ? ad / (rel_ok ? ax : 1.0) : -1.0);
  }
  p.dot += dot;
  p.nref += nref;
  p.nres += nres;
  p.sq_ref_fp64 += sq1;
  p.sq_res_fp64 += sq2;
  p.ref_nan += an;
  p.res_nan += bn;
  p.ref_inf += ai;
  p.res_inf += bi;
  p.mismatches += mism;
  if (bmax > p.max_abs) {
    p.max_abs = bmax;
    p.max_abs_block = start;
  }
  if (brel > p.max_rel) {
    p.max_rel = brel;
    p.max_rel_block = start;
  }
}

#define PARITY_INSTANTIATE(A, B)                                                                                      \
  template void StreamBlock<A, B, true>(const A*, const B*, const double*, int64_t, int64_t, double, bool, Partial&); \
  template void StreamBlock<A, B, false>(const A*, const B*, const double*, int64_t, int64_t, double, bool, Partial&);
PARITY_INSTANTIATE(float, float)
PARITY_INSTANTIATE(float, double)
PARITY_INSTANTIATE(double, float)
PARITY_INSTANTIATE(double, double)
#undef PARITY_INSTANTIATE

}  // namespace parity::compare::detail
