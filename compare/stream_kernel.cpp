#include "compare/stream_kernel.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

namespace parity::compare::detail {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// The type ATen evaluates isclose in: the wider of the two.
template <typename A, typename B>
using Wide = std::conditional_t<(sizeof(A) > sizeof(B)), A, B>;

// What the fast loop learns of a block.
template <typename W>
struct Sums {
  double dot = 0, nref = 0, nres = 0, sq1 = 0, sq2 = 0;
  W max_diff = 0;                                  // max |a - b| in W (rounded as W rounds)
  W min_ref = std::numeric_limits<W>::infinity();  // min |a| over a != 0
  int64_t mismatches = 0;                          // valid when every value is finite
};

// The fast loop: sums in double, isclose and the maxima's bounds in W lanes. No NaN/Inf
// bookkeeping: a NaN or Inf in a or b makes nref or nres non-finite (a finite float squared
// cannot overflow a double; a huge double that does only sends its block to the exact pass),
// and an overflowing difference makes max_diff infinite; the caller then runs the exact pass.
// Without NaN and Inf, ATen's isclose is `|a - b| <= tol + |tol * b|` (equal values pass it
// because the allowance is >= 0: the caller checks tol).
template <typename A, typename B, bool kHasFp64, bool kFma>
[[gnu::always_inline]] inline void SumsLoop(const A* __restrict a, const B* __restrict b, const double* __restrict f,
                                            int64_t start, int64_t len, Wide<A, B> wt, Sums<Wide<A, B>>& s) {
  using W = Wide<A, B>;
  constexpr W kWInf = std::numeric_limits<W>::infinity();
  double dot = 0, nref = 0, nres = 0, sq1 = 0, sq2 = 0;
  W max_diff = 0, min_ref = kWInf;
  int32_t mism = 0;  // a block is far shorter than 2^31
  const int64_t end = start + len;
#pragma omp simd reduction(+ : dot, nref, nres, sq1, sq2, mism) reduction(max : max_diff) reduction(min : min_ref)
  for (int64_t i = start; i < end; ++i) {
    const double x = static_cast<double>(a[i]), y = static_cast<double>(b[i]);
    if constexpr (kFma) {
      dot = std::fma(x, y, dot);
      nref = std::fma(x, x, nref);
      nres = std::fma(y, y, nres);
    } else {
      dot += x * y;
      nref += x * x;
      nres += y * y;
    }
    if constexpr (kHasFp64) {
      const double e1 = f[i] - x, e2 = f[i] - y;
      if constexpr (kFma) {
        sq1 = std::fma(e1, e1, sq1);
        sq2 = std::fma(e2, e2, sq2);
      } else {
        sq1 += e1 * e1;
        sq2 += e2 * e2;
      }
    }
    const W wa = static_cast<W>(a[i]), wb = static_cast<W>(b[i]);
    const W actual = std::fabs(wa - wb);
    mism += actual > wt + std::fabs(wt * wb);
    max_diff = std::max(max_diff, actual);
    const W ax = std::fabs(wa);
    min_ref = std::min(min_ref, ax != W(0) ? ax : kWInf);
  }
  s.dot = dot;
  s.nref = nref;
  s.nres = nres;
  s.sq1 = sq1;
  s.sq2 = sq2;
  s.max_diff = max_diff;
  s.min_ref = min_ref;
  s.mismatches = mism;
}

// The exact maxima of a block of finite values, as StreamBlockExact defines them.
template <typename A, typename B>
[[gnu::always_inline]] inline void MaximaLoop(const A* __restrict a, const B* __restrict b, int64_t start, int64_t len,
                                              double& max_abs, double& max_rel) {
  double bmax = -1, brel = -1;
  const int64_t end = start + len;
#pragma omp simd reduction(max : bmax, brel)
  for (int64_t i = start; i < end; ++i) {
    const double x = static_cast<double>(a[i]);
    const double ad = std::fabs(x - static_cast<double>(b[i]));
    bmax = std::max(bmax, ad);
    brel = std::max(brel, x != 0.0 ? ad / std::fabs(x != 0.0 ? x : 1.0) : -1.0);
  }
  max_abs = bmax;
  max_rel = brel;
}

// Each loop twice: for AVX2 + FMA (chosen once, at run time) and for the baseline ISA.
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define PARITY_STREAM_X86 1
bool HasAvx2Fma() {
  static const bool yes = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return yes;
}
template <typename A, typename B, bool kHasFp64>
__attribute__((target("avx2,fma"))) void SumsAvx2(const A* a, const B* b, const double* f, int64_t start, int64_t len,
                                                  Wide<A, B> wt, Sums<Wide<A, B>>& s) {
  SumsLoop<A, B, kHasFp64, true>(a, b, f, start, len, wt, s);
}
template <typename A, typename B>
__attribute__((target("avx2,fma"))) void MaximaAvx2(const A* a, const B* b, int64_t start, int64_t len, double& m, double& r) {
  MaximaLoop(a, b, start, len, m, r);
}
#endif

template <typename A, typename B, bool kHasFp64>
void RunSums(const A* a, const B* b, const double* f, int64_t start, int64_t len, Wide<A, B> wt, Sums<Wide<A, B>>& s) {
#ifdef PARITY_STREAM_X86
  if (HasAvx2Fma()) return SumsAvx2<A, B, kHasFp64>(a, b, f, start, len, wt, s);
#endif
  SumsLoop<A, B, kHasFp64, false>(a, b, f, start, len, wt, s);
}

template <typename A, typename B>
void RunMaxima(const A* a, const B* b, int64_t start, int64_t len, double& m, double& r) {
#ifdef PARITY_STREAM_X86
  if (HasAvx2Fma()) return MaximaAvx2(a, b, start, len, m, r);
#endif
  MaximaLoop(a, b, start, len, m, r);
}

}  // namespace

// The exact pass: every statistic in a single loop that `omp simd` vectorizes (the reductions are
// declared, so no fast-math is needed and isclose keeps IEEE semantics). A and B are float or
// double; W is the wider of the two, the type ATen evaluates isclose in.
template <typename A, typename B, bool kHasFp64>
void StreamBlockExact(const A* __restrict a, const B* __restrict b, const double* __restrict f, int64_t start, int64_t len,
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
  Offer(bmax, start, p.max_abs, p.max_abs_block);
  Offer(brel, start, p.max_rel, p.max_rel_block);
}

template <typename A, typename B, bool kHasFp64>
void StreamBlock(const A* a, const B* b, const double* f, int64_t start, int64_t len, double tol, bool equal_nan, Partial& p) {
  using W = Wide<A, B>;
  const W wt = static_cast<W>(tol);
  if (!(wt >= 0 && wt < std::numeric_limits<W>::infinity())) return StreamBlockExact<A, B, kHasFp64>(a, b, f, start, len, tol, equal_nan, p);
  Sums<W> s;
  RunSums<A, B, kHasFp64>(a, b, f, start, len, wt, s);
  if (!(std::isfinite(s.nref) && std::isfinite(s.nres) && s.max_diff < std::numeric_limits<W>::infinity()))
    return StreamBlockExact<A, B, kHasFp64>(a, b, f, start, len, tol, equal_nan, p);
  p.dot += s.dot;
  p.nref += s.nref;
  p.nres += s.nres;
  p.sq_ref_fp64 += s.sq1;
  p.sq_res_fp64 += s.sq2;
  p.mismatches += s.mismatches;
  // Upper bounds of the block's exact maxima: W's rounding of |a - b| is within 2^-24 of the
  // double value for float (exact for double); the slack covers it and the bound's own rounding.
  constexpr double kSlack = 1 + 0x1p-20;
  const double abs_bound = static_cast<double>(s.max_diff) * kSlack;
  const double rel_bound = s.min_ref < std::numeric_limits<W>::infinity() ? abs_bound / static_cast<double>(s.min_ref) * kSlack : -1;
  // A block whose bound does not exceed a maximum reached earlier (in this chunk or before it)
  // can neither raise it nor be its first occurrence.
  const bool scan = abs_bound > std::max(p.max_abs, p.abs_floor) || rel_bound > std::max(p.max_rel, p.rel_floor);
  if (!scan) return;
  double max_abs = -1, max_rel = -1;
  RunMaxima(a, b, start, len, max_abs, max_rel);
  Offer(max_abs, start, p.max_abs, p.max_abs_block);
  Offer(max_rel, start, p.max_rel, p.max_rel_block);
}

#define PARITY_INSTANTIATE(A, B)                                                                                      \
  template void StreamBlock<A, B, true>(const A*, const B*, const double*, int64_t, int64_t, double, bool, Partial&); \
  template void StreamBlock<A, B, false>(const A*, const B*, const double*, int64_t, int64_t, double, bool, Partial&); \
  template void StreamBlockExact<A, B, true>(const A*, const B*, const double*, int64_t, int64_t, double, bool, Partial&); \
  template void StreamBlockExact<A, B, false>(const A*, const B*, const double*, int64_t, int64_t, double, bool, Partial&);
PARITY_INSTANTIATE(float, float)
PARITY_INSTANTIATE(float, double)
PARITY_INSTANTIATE(double, float)
PARITY_INSTANTIATE(double, double)
#undef PARITY_INSTANTIATE

}  // namespace parity::compare::detail
