#include "compare/stats.h"

#include "compare/chunks.h"
#include "compare/stream_kernel.h"

#include <ATen/ops/_to_copy.h>
#include <ATen/ops/view_as_real.h>

#include <cmath>
#include <limits>
#include <vector>

namespace parity::compare {

namespace {

constexpr int64_t kBlock = 4096;

nlohmann::json NumberOrNull(double v) {
  if (std::isnan(v)) return nullptr;
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return v;
}

using detail::Partial;
constexpr double kInf = std::numeric_limits<double>::infinity();

// The first flat index in [start, start + kBlock) whose value `metric(i)` equals `target`.
template <typename F>
int64_t FindIn(int64_t start, int64_t n, double target, F&& metric) {
  for (int64_t i = start; i < std::min(n, start + kBlock); ++i)
    if (metric(i) == target) return i;
  return start;
}

template <typename A, typename B>
void Stream(const A* a, const B* b, const double* f, int64_t n, double tol, bool equal_nan, TensorStats& s, double& sq_ref_fp64,
            double& sq_res_fp64, double& dot, double& nref, double& nres) {
  const int64_t nblocks = (n + kBlock - 1) / kBlock;
  constexpr int64_t kBlocksPerChunk = 16;
  const int64_t nchunks = (nblocks + kBlocksPerChunk - 1) / kBlocksPerChunk;
  std::vector<Partial> parts(static_cast<size_t>(nchunks));
  struct Floors {
    double abs = -1, rel = -1;  // maxima of this thread's earlier chunks (before this one)
  };
  ForEachChunk<Floors>(nchunks, [&](Floors& floors, int64_t c) {
    Partial& p = parts[c];
    p.abs_floor = floors.abs;
    p.rel_floor = floors.rel;
    for (int64_t blk = c * kBlocksPerChunk; blk < std::min(nblocks, (c + 1) * kBlocksPerChunk); ++blk) {
      const int64_t start = blk * kBlock;
      if (f)
        detail::StreamBlock<A, B, true>(a, b, f, start, std::min(kBlock, n - start), tol, equal_nan, p);
      else
        detail::StreamBlock<A, B, false>(a, b, f, start, std::min(kBlock, n - start), tol, equal_nan, p);
    }
    floors.abs = std::max(floors.abs, p.max_abs);
    floors.rel = std::max(floors.rel, p.max_rel);
  });
  Partial t;
  for (const Partial& p : parts) {
    t.sq_ref_fp64 += p.sq_ref_fp64;
    t.sq_res_fp64 += p.sq_res_fp64;
    t.dot += p.dot;
    t.nref += p.nref;
    t.nres += p.nres;
    t.mismatches += p.mismatches;
    t.ref_nan += p.ref_nan;
    t.res_nan += p.res_nan;
    t.ref_inf += p.ref_inf;
    t.res_inf += p.res_inf;
    detail::Offer(p.max_abs, p.max_abs_block, t.max_abs, t.max_abs_block);
    detail::Offer(p.max_rel, p.max_rel_block, t.max_rel, t.max_rel_block);
  }
  sq_ref_fp64 = t.sq_ref_fp64;
  sq_res_fp64 = t.sq_res_fp64;
  dot = t.dot;
  nref = t.nref;
  nres = t.nres;
  s.mismatches = t.mismatches;
  s.ref_nan = t.ref_nan;
  s.res_nan = t.res_nan;
  s.ref_inf = t.ref_inf;
  s.res_inf = t.res_inf;
  if (t.max_abs >= 0) {
    s.max_abs_err = t.max_abs;
    s.max_abs_index = FindIn(t.max_abs_block, n, t.max_abs, [&](int64_t i) {
      double d = std::abs(static_cast<double>(a[i]) - static_cast<double>(b[i]));
      return d < kInf ? d : -1.0;
    });
  }
  if (t.max_rel >= 0) {
    s.max_rel_err = t.max_rel;
    s.max_rel_index = FindIn(t.max_rel_block, n, t.max_rel, [&](int64_t i) {
      const double x = static_cast<double>(a[i]);
      const double d = std::abs(x - static_cast<double>(b[i]));
      return (d < kInf && x != 0.0 && std::abs(x) < kInf) ? d / std::abs(x) : -1.0;
    });
  }
}

}  // namespace

at::Tensor RealNumbers(const at::Tensor& t) {
  return t.is_complex() ? at::view_as_real(t.detach().resolve_conj()) : t;
}

at::Tensor AsStreamable(const at::Tensor& t) {
  at::Tensor c = RealNumbers(t.detach());
  if (c.device() != at::kCPU) c = c.to(at::kCPU);
  const auto st = c.scalar_type();
  // Half, bfloat16 and float8 widen to float exactly (half the memory of double); integers and
  // bool to double.
  if (st == at::kHalf || st == at::kBFloat16 || c10::isFloat8Type(st))
    c = c.to(at::kFloat);
  else if (st != at::kFloat && st != at::kDouble)
    c = c.to(at::kDouble);
  return c.contiguous();
}

TensorStats ComputeStats(const at::Tensor& ref, const at::Tensor& res, const std::optional<at::Tensor>& fp64_ref, double tol,
                         bool equal_nan) {
  TensorStats s;
  s.numel = RealNumbers(ref).numel();
  if (ref.numel() != res.numel()) return s;
  at::Tensor a = AsStreamable(ref), b = AsStreamable(res);
  if (a.numel() != b.numel()) return s;  // a complex tensor against a real one: no numbers pair up
  at::Tensor f;
  if (fp64_ref && fp64_ref->numel() == ref.numel()) {
    f = RealNumbers(fp64_ref->detach()).to(at::kCPU).to(at::kDouble).contiguous();
    if (f.numel() != a.numel()) f = at::Tensor();  // a real fp64 of a complex result: nothing to compare
  }
  const double* fp = f.defined() ? f.const_data_ptr<double>() : nullptr;
  double sq_ref = 0, sq_res = 0, dot = 0, nref = 0, nres = 0;
  const int64_t n = a.numel();
  const bool af = a.scalar_type() == at::kFloat, bf = b.scalar_type() == at::kFloat;
  if (af && bf)
    Stream(a.const_data_ptr<float>(), b.const_data_ptr<float>(), fp, n, tol, equal_nan, s, sq_ref, sq_res, dot, nref, nres);
  else if (af)
    Stream(a.const_data_ptr<float>(), b.const_data_ptr<double>(), fp, n, tol, equal_nan, s, sq_ref, sq_res, dot, nref, nres);
  else if (bf)
    Stream(a.const_data_ptr<double>(), b.const_data_ptr<float>(), fp, n, tol, equal_nan, s, sq_ref, sq_res, dot, nref, nres);
  else
    Stream(a.const_data_ptr<double>(), b.const_data_ptr<double>(), fp, n, tol, equal_nan, s, sq_ref, sq_res, dot, nref, nres);
  if (fp && n > 0) {
    s.rmse_ref_vs_fp64 = std::sqrt(sq_ref / static_cast<double>(n));
    s.rmse_res_vs_fp64 = std::sqrt(sq_res / static_cast<double>(n));
  }
  if (n > 0) {
    const double denom = std::sqrt(nref) * std::sqrt(nres);
    s.cosine = denom > 0 ? dot / denom : (nref == 0 && nres == 0 ? 1.0 : 0.0);
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
