// ErrorHistogram's one pass against the histogram's definition written with ATen ops (what it
// was before it was one pass): log10 of each finite non-zero |x - fp64|, clamped, binned by
// torch.histc; zeros and non-finite errors counted apart.
#include "compare/histogram.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <limits>

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

TEST(Histogram, NothingToBinIsNull) {
  const at::Tensor a = at::ones({4});
  EXPECT_TRUE(ErrorHistogram(a, a, at::Tensor()).is_null());
  EXPECT_TRUE(ErrorHistogram(a, at::ones({5}), a.to(at::kDouble)).is_null());
  EXPECT_TRUE(ErrorHistogram(a.to(at::kInt), a.to(at::kInt), a.to(at::kDouble)).is_null());
}

}  // namespace
}  // namespace parity::compare
