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
};

// Accumulates one block [start, start + len) into `p`. A, B: float or double.
template <typename A, typename B, bool kHasFp64>
void StreamBlock(const A* a, const B* b, const double* f, int64_t start, int64_t len, double tol, bool equal_nan, Partial& p);

}  // namespace parity::compare::detail
