// ErrorHistogram's one pass against the histogram's definition written with ATen ops (what it
// was before it was one pass): log10 of each finite non-zero |x - fp64|, clamped, binned by
// torch.histc; zeros and non-finite errors counted apart.
#include "compare/histogram.h"

#include <ATen/Context.h>
#include <ATen/TensorOperators.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/full.h>
#include <ATen/ops/histc.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/pow.h>
#include <ATen/ops/rand.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/zeros.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <random>

namespace parity::compare {
namespace {

std::vector<int64_t> Definition(const at::Tensor& t, const at::Tensor& fp64, int64_t& zero, int64_t& nonfinite) {
  const at::Tensor e = (t.to(at::kDouble).flatten() - fp64.to(at::kDouble).flatten()).abs();
  const at::Tensor ef = e.masked_select(e.isfinite());
  const at::Tensor nz = ef.masked_select(ef > 0);
  zero = ef.numel() - nz.numel();
  nonfinite = e.numel() - ef.numel();
  std::vector<int64_t> counts(kHistBins, 0);
  if (nz.numel() == 0) return counts;
  const at::Tensor h = at::histc(nz.log10().clamp(kHistLo, kHistHi - 1e-9), kHistBins, kHistLo, kHistHi).to(at::kLong);
  for (int i = 0; i < kHistBins; ++i) counts[static_cast<size_t>(i)] = h[i].item<int64_t>();
  return counts;
}

TEST(Histogram, OnePassCountsWhatTheDefinitionCounts) {
  at::manual_seed(3);
  const int64_t n = 300001;  // several chunks, an odd tail
  at::Tensor fp64 = at::randn({n}, at::kDouble) * 10;
  // Errors over every decade, exact zeros, and a few non-finite results.
  at::Tensor scale = at::pow(10.0, at::rand({n}, at::kDouble) * 16 - 13);
  at::Tensor res = (fp64 + at::randn({n}, at::kDouble) * scale).to(at::kFloat);
  res.slice(0, 0, 1000).copy_(fp64.slice(0, 0, 1000));  // float rounding of fp64: tiny or zero errors
  res[5] = std::numeric_limits<float>::quiet_NaN();
  res[7] = std::numeric_limits<float>::infinity();
  at::Tensor ref = fp64.to(at::kBFloat16);  // another dtype: widened as the stats widen it
  for (int threads : {1, 2}) {
    at::set_num_threads(threads);
    const auto h = ErrorHistogram(ref, res, fp64);
    ASSERT_FALSE(h.is_null());
    for (const char* side : {"res", "ref"}) {
      int64_t zero = 0, nonfinite = 0;
      const auto want = Definition(std::string(side) == "res" ? res : ref, fp64, zero, nonfinite);
      EXPECT_EQ(h[side].get<std::vector<int64_t>>(), want) << side << " threads " << threads;
      EXPECT_EQ(h[std::string(side) + "_zero"].get<int64_t>(), zero) << side;
      EXPECT_EQ(h[std::string(side) + "_nonfinite"].get<int64_t>(), nonfinite) << side;
    }
    EXPECT_EQ(h["res_nonfinite"].get<int64_t>(), 2);
  }
}

// The bin of one error e > 0 as the histogram defines it, in scalars.
int BinOf(double e) {
  const double x = std::min(std::max(std::log10(e), kHistLo), kHistHi - 1e-9);
  const int64_t b = static_cast<int64_t>((x - kHistLo) * (kHistBins / (kHistHi - kHistLo)));
  return static_cast<int>(std::min<int64_t>(std::max<int64_t>(b, 0), kHistBins - 1));
}

// Where ErrorHistogram puts the one error e (against an fp64 value of 0, so the error is e).
int BinnedAt(double e) {
  const at::Tensor f = at::zeros({1}, at::kDouble);
  const auto h = ErrorHistogram(at::full({1}, e, at::kDouble), at::full({1}, e, at::kDouble), f);
  const auto counts = h["res"].get<std::vector<int64_t>>();
  for (int k = 0; k < kHistBins; ++k)
    if (counts[static_cast<size_t>(k)] == 1) return k;
  return -1;
}

// How many of `errors` ErrorHistogram puts in each bin, in one call (against fp64 values of 0).
std::vector<int64_t> BinnedCounts(const std::vector<double>& errors) {
  const auto n = static_cast<int64_t>(errors.size());
  at::Tensor e = at::empty({n}, at::kDouble);
  std::memcpy(e.data_ptr<double>(), errors.data(), errors.size() * sizeof(double));
  return ErrorHistogram(e, e, at::zeros({n}, at::kDouble))["res"].get<std::vector<int64_t>>();
}

TEST(Histogram, EveryErrorLandsInTheBinItsLog10Says) {
  // The one pass bins without a logarithm (a table of each binade's bin edges): at every edge, a
  // few ulps either side and at the margin where it falls back to log10, at binade boundaries,
  // at the ends of the double range and at random doubles, each error where log10 puts it.
  std::vector<double> values = {std::numeric_limits<double>::denorm_min(), std::numeric_limits<double>::min(),
                                std::numeric_limits<double>::max(), 1e-300, 1e-13, 1e-12, 99.9999999, 100, 1e300};
  for (int q = -4; q <= kHistBins + 4; ++q) {
    const double edge = std::pow(10.0, kHistLo + q / 4.0);
    for (double at_ : {edge, edge * (1 + 1e-9), edge * (1 - 1e-9), edge * (1 + 2e-9), edge * (1 - 2e-9)}) {
      double up = at_, down = at_;
      for (int u = 0; u < 8; ++u) {
        values.push_back(up);
        values.push_back(down);
        up = std::nextafter(up, 1e308);
        down = std::nextafter(down, 0.0);
      }
    }
  }
  for (int k = -60; k <= 10; ++k) {  // binade boundaries
    const double two = std::ldexp(1.0, k);
    values.insert(values.end(), {two, std::nextafter(two, 0.0), std::nextafter(two, 1e308)});
  }
  std::mt19937_64 rng(11);
  for (int i = 0; i < 20000; ++i) {
    const uint64_t bits = (rng() & ((uint64_t{1} << 52) - 1)) | (uint64_t{rng() % 0x7ff} << 52);
    double d;
    std::memcpy(&d, &bits, sizeof d);
    if (d > 0) values.push_back(d);
  }
  // One call per bin, over the errors the definition puts there: each bin must count all of them
  // (an error put elsewhere leaves its bin short). The errors one at a time only to name one that
  // is put elsewhere.
  std::map<int, std::vector<double>> by_bin;
  for (double e : values) by_bin[BinOf(e)].push_back(e);
  for (const auto& [bin, errors] : by_bin) {
    if (BinnedCounts(errors)[static_cast<size_t>(bin)] == static_cast<int64_t>(errors.size())) continue;
    for (double e : errors) ASSERT_EQ(BinnedAt(e), bin) << "error " << e;
    FAIL() << "bin " << bin << " counts fewer than its " << errors.size() << " errors";
  }
}

TEST(Histogram, NothingToBinIsNull) {
  const at::Tensor a = at::ones({4});
  EXPECT_TRUE(ErrorHistogram(a, a, at::Tensor()).is_null());
  EXPECT_TRUE(ErrorHistogram(a, at::ones({5}), a.to(at::kDouble)).is_null());
  EXPECT_TRUE(ErrorHistogram(a.to(at::kInt), a.to(at::kInt), a.to(at::kDouble)).is_null());
}

}  // namespace
}  // namespace parity::compare
