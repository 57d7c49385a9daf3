// The comparator's inner loop, in a translation unit of its own without torch headers (the
// loop vectorizes reliably there). Statistics of one block of a (ref, res[, fp64]) triple.
#pragma once

#include <cstdint>

namespace parity::compare::detail {

// Partial results of one chunk; chunks are combined in order, so results do not depend on
// the number of threads.
struct Partial {
  double sq_ref_fp64 = 0, sq_res_fp64 = 0, dot = 0, nref = 0, nres = 0;
  int64_t mismatches = 0, ref_nan = 0, res_nan = 0, ref_inf = 0, res_inf = 0;
  double max_abs = -1, max_rel = -1;  // -1: no finite element seen
  int64_t max_abs_block = -1, max_rel_block = -1;
  // Exact maxima that elements *before* this chunk are known to reach (the driver carries them
  // from the earlier chunks one thread ran). A block that cannot exceed them is not scanned for
  // its exact maxima: it could neither hold the tensor's maximum nor its first occurrence.
  // They only save work; results are the same with -1.
  double abs_floor = -1, rel_floor = -1;
};

// Raises `best` to `value`, remembering where (`block`), when `value` is strictly greater: the
// first block reaching a maximum keeps it.
inline void Offer(double value, int64_t block, double& best, int64_t& best_block) {
  if (value > best) {
    best = value;
    best_block = block;
  }
}

// Accumulates one block [start, start + len) into `p`. A, B: float or double. A block of finite
// values takes the fast pass (the sums and counts in one vectorized loop that also bounds the
// maxima; a short exact scan only when the block's bound can beat what is known); a block with
// a NaN, an Inf or an overflowing difference takes StreamBlockExact. Results are those of
// StreamBlockExact (the sums up to summation order).
template <typename A, typename B, bool kHasFp64>
void StreamBlock(const A* a, const B* b, const double* f, int64_t start, int64_t len, double tol, bool equal_nan, Partial& p);

// Every statistic element by element: the definition (ATen's isclose in the wider of the two
// dtypes, NaN/Inf counted, maxima over finite differences).
template <typename A, typename B, bool kHasFp64>
void StreamBlockExact(const A* a, const B* b, const double* f, int64_t start, int64_t len, double tol, bool equal_nan,
                      Partial& p);

}  // namespace parity::compare::detail
