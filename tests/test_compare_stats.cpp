// ComputeStats (the fast streaming pass, its exact fallback and the driver's chunking) against
// the statistics' definitions computed element by element, on data built to reach every branch:
// NaN/Inf blocks, zeros and subnormals in the reference, ties, records in every block, an
// overflowing difference, odd lengths, float/double mixes, thread counts.
#include "compare/stats.h"

#include <ATen/Context.h>
#include <ATen/TensorOperators.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/complex.h>
#include <ATen/ops/isclose.h>
#include <ATen/ops/logical_not.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/randn.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <type_traits>

#include "compare/stream_kernel.h"

namespace parity::compare {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNan = std::numeric_limits<double>::quiet_NaN();

// The definitions, one element at a time (the maxima: over finite differences, the first index
// reaching them; the relative one over nonzero finite references).
template <typename A, typename B>
TensorStats Oracle(const at::Tensor& ref, const at::Tensor& res, double tol, bool equal_nan) {
  TensorStats s;
  s.numel = ref.numel();
  const A* a = ref.const_data_ptr<A>();
  const B* b = res.const_data_ptr<B>();
  double max_abs = -1, max_rel = -1;
  for (int64_t i = 0; i < ref.numel(); ++i) {
    const double x = a[i], y = b[i];
    s.ref_nan += std::isnan(x);
    s.res_nan += std::isnan(y);
    s.ref_inf += std::isinf(x);
    s.res_inf += std::isinf(y);
    const double ad = std::fabs(x - y);
    if (ad < kInf && ad > max_abs) {
      max_abs = ad;
      s.max_abs_index = i;
    }
    if (ad < kInf && x != 0 && std::isfinite(x) && ad / std::fabs(x) > max_rel) {
      max_rel = ad / std::fabs(x);
      s.max_rel_index = i;
    }
  }
  s.max_abs_err = max_abs < 0 ? 0 : max_abs;
  s.max_rel_err = max_rel < 0 ? 0 : max_rel;
  // ATen's own isclose, in the wider dtype as the comparator promises.
  const auto wide = sizeof(A) >= sizeof(B) ? ref.scalar_type() : res.scalar_type();
  s.mismatches =
      at::logical_not(at::isclose(ref.to(wide), res.to(wide), tol, tol, equal_nan)).sum().template item<int64_t>();
  return s;
}

template <typename A, typename B>
void ExpectSameStats(const at::Tensor& ref, const at::Tensor& res, double tol, bool equal_nan, const std::string& what) {
  SCOPED_TRACE(what);
  const TensorStats want = Oracle<A, B>(ref, res, tol, equal_nan);
  for (int threads : {1, 2, 3}) {
    at::set_num_threads(threads);
    const TensorStats got = ComputeStats(ref, res, std::nullopt, tol, equal_nan);
    EXPECT_EQ(got.mismatches, want.mismatches) << threads << " threads";
    EXPECT_EQ(got.max_abs_err, want.max_abs_err) << threads << " threads";
    EXPECT_EQ(got.max_abs_index, want.max_abs_index) << threads << " threads";
    EXPECT_EQ(got.max_rel_err, want.max_rel_err) << threads << " threads";
    EXPECT_EQ(got.max_rel_index, want.max_rel_index) << threads << " threads";
    EXPECT_EQ(got.ref_nan, want.ref_nan);
    EXPECT_EQ(got.res_nan, want.res_nan);
    EXPECT_EQ(got.ref_inf, want.ref_inf);
    EXPECT_EQ(got.res_inf, want.res_inf);
  }
  at::set_num_threads(2);
}

at::Tensor Noise(const at::Tensor& t, double scale) {
  return (t.to(at::kDouble) + scale * at::randn(t.sizes(), at::kDouble)).to(t.scalar_type());
}

TEST(Stats, FiniteDataMatchesTheDefinitions) {
  at::manual_seed(1);
  const int64_t n = 300001;  // not a multiple of a block or a chunk
  at::Tensor ref = at::randn({n});
  ExpectSameStats<float, float>(ref, Noise(ref, 1e-6), 1e-4, false, "close");
  ExpectSameStats<float, float>(ref, Noise(ref, 1e-2), 1e-4, false, "far: every block mismatches");
  ExpectSameStats<float, float>(ref, ref.clone(), 1e-4, false, "identical: every block ties at 0");
  ExpectSameStats<float, float>(ref, Noise(ref, 1e-3), 0.0, false, "tol 0");
  ExpectSameStats<float, float>(ref, Noise(ref, 1e-3), 1e39, false, "tol beyond float's range");
}

TEST(Stats, ZerosSubnormalsAndRecordsInEveryBlock) {
  at::manual_seed(2);
  const int64_t n = 200000;
  at::Tensor ref = at::randn({n}).clamp_min(0);  // relu-like: half zeros
  ref.index_fill_(0, at::arange(0, n, 97), 1e-40);  // subnormal references
  ExpectSameStats<float, float>(ref, Noise(ref, 1e-5), 1e-4, false, "zeros and subnormals");
  // Errors growing along the tensor: every block breaks the record.
  at::Tensor grow = at::arange(n, at::kFloat) * 1e-7f;
  ExpectSameStats<float, float>(at::ones({n}), at::ones({n}) + grow, 1e-4, false, "growing errors");
  ExpectSameStats<float, float>(at::ones({n}) + grow.flip(0), at::ones({n}), 1e-4, false, "shrinking errors");
}

TEST(Stats, TiesKeepTheFirstIndex) {
  const int64_t n = 100000;
  at::Tensor ref = at::ones({n});
  at::Tensor res = ref.clone();
  for (int64_t i : {70000, 5000, 99999, 40960}) res[i] = 1.5f;  // the same difference in four blocks
  ExpectSameStats<float, float>(ref, res, 1e-4, false, "ties across blocks and chunks");
}

TEST(Stats, NonFiniteBlocksTakeTheExactPass) {
  at::manual_seed(3);
  const int64_t n = 150000;
  at::Tensor ref = at::randn({n});
  at::Tensor res = Noise(ref, 1e-6);
  ref[10] = kNan;
  res[10] = kNan;  // both NaN: close only with equal_nan
  res[5000] = kNan;
  ref[70000] = kInf;
  res[70000] = kInf;
  res[90000] = -kInf;
  ref[120000] = 3e38f;  // finite values whose difference overflows float
  res[120000] = -3e38f;
  for (bool equal_nan : {false, true})
    ExpectSameStats<float, float>(ref, res, 1e-4, equal_nan, equal_nan ? "equal_nan" : "NaN unequal");
}

TEST(Stats, DoubleAndMixedDtypes) {
  at::manual_seed(4);
  const int64_t n = 100003;
  at::Tensor ref = at::randn({n}, at::kDouble);
  ExpectSameStats<double, double>(ref, Noise(ref, 1e-9), 1e-4, false, "double pair");
  ExpectSameStats<double, float>(ref, Noise(ref, 1e-6).to(at::kFloat), 1e-4, false, "double ref, float res");
  ExpectSameStats<float, double>(ref.to(at::kFloat), Noise(ref, 1e-6), 1e-4, false, "float ref, double res");
  at::Tensor huge = ref * 1e200;  // squares overflow a double: the exact pass
  ExpectSameStats<double, double>(huge, Noise(huge, 1e190), 1e-4, false, "huge doubles");
}

TEST(Stats, AComplexTensorsErrorsAreItsRealAndImaginaryParts) {
  // An error only in the imaginary parts: the stats saw the real parts alone (max_abs 0, cosine
  // 1) and torch warned "Casting complex values to real discards the imaginary part".
  const at::Tensor re = at::arange(4, at::kFloat);
  const at::Tensor ref = at::complex(re, re), res = at::complex(re, re + 0.5);
  const TensorStats s = ComputeStats(ref, res, at::complex(re.to(at::kDouble), re.to(at::kDouble)), 1e-4, false);
  EXPECT_EQ(s.numel, 8);  // its real numbers
  EXPECT_DOUBLE_EQ(s.max_abs_err, 0.5);
  EXPECT_EQ(s.max_abs_index % 2, 1);  // an imaginary part
  EXPECT_EQ(s.mismatches, 4);
  EXPECT_GT(s.rmse_res_vs_fp64, 0.3);
  EXPECT_LT(s.cosine, 1.0);
}

TEST(Stats, AComplexTensorAgainstARealOneHasNoPairedNumbers) {
  // The fuzzer's case: a complex64 ref and a float32 res of one numel; the real view has twice
  // the numbers, and the streaming pass read past the result's.
  const TensorStats s = ComputeStats(at::complex(at::ones({5}), at::ones({5})), at::ones({5}), std::nullopt, 1e-4, false);
  EXPECT_EQ(s.numel, 10);
  EXPECT_EQ(s.mismatches, 0);
  EXPECT_EQ(s.max_abs_index, -1);
}

TEST(Stats, SumsMatchDoublePrecision) {
  at::manual_seed(5);
  const int64_t n = 262147;
  at::Tensor truth = at::randn({n}, at::kDouble);
  at::Tensor ref = truth.to(at::kFloat), res = Noise(truth, 1e-3).to(at::kFloat);
  const TensorStats s = ComputeStats(ref, res, truth, 1e-4, false);
  const at::Tensor x = ref.to(at::kDouble), y = res.to(at::kDouble);
  const double rmse_ref = (truth - x).pow(2).mean().sqrt().item<double>();
  const double rmse_res = (truth - y).pow(2).mean().sqrt().item<double>();
  const double cosine = ((x * y).sum() / (x.norm() * y.norm())).item<double>();
  EXPECT_NEAR(s.rmse_ref_vs_fp64, rmse_ref, 1e-12 * rmse_ref);
  EXPECT_NEAR(s.rmse_res_vs_fp64, rmse_res, 1e-12 * rmse_res);
  EXPECT_NEAR(s.cosine, cosine, 1e-12);
}

// The fast pass and the exact pass agree block by block, wherever the fast pass applies.
TEST(StreamKernel, FastPassEqualsTheExactPass) {
  at::manual_seed(6);
  const int64_t n = 4096;
  at::Tensor truth = at::randn({n}, at::kDouble);
  at::Tensor a = truth.to(at::kFloat), b = Noise(truth, 1e-4).to(at::kFloat);
  detail::Partial fast, exact;
  detail::StreamBlock<float, float, true>(a.const_data_ptr<float>(), b.const_data_ptr<float>(), truth.const_data_ptr<double>(),
                                          0, n, 1e-4, false, fast);
  detail::StreamBlockExact<float, float, true>(a.const_data_ptr<float>(), b.const_data_ptr<float>(),
                                               truth.const_data_ptr<double>(), 0, n, 1e-4, false, exact);
  EXPECT_EQ(fast.mismatches, exact.mismatches);
  EXPECT_GT(fast.mismatches, 0);
  EXPECT_EQ(fast.max_abs, exact.max_abs);
  EXPECT_EQ(fast.max_rel, exact.max_rel);
  EXPECT_NEAR(fast.sq_res_fp64, exact.sq_res_fp64, 1e-12 * exact.sq_res_fp64);
  EXPECT_NEAR(fast.dot, exact.dot, 1e-12 * std::fabs(exact.dot));
}

}  // namespace
}  // namespace parity::compare
