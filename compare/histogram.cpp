#include "compare/histogram.h"

#include <array>
#include <cmath>
#include <vector>

#include "compare/chunks.h"
#include "compare/stats.h"

namespace parity::compare {

namespace {

// One pass over a tensor's errors against fp64 (contiguous CPU data: `t` float or double, `f`
// double), in parallel chunks each counting into its own bins. A finite non-zero error e goes
// to bin floor((log10(e) clamped to [lo, hi)) - lo) * bins / (hi - lo)), as torch.histc of the
// clamped log10 bins it.
struct Counts {
  std::array<int64_t, kHistBins> bins{};
  int64_t zero = 0, nonfinite = 0;
};

template <typename T>
Counts Bin(const T* t, const double* f, int64_t n) {
  constexpr int64_t kChunk = 1 << 16;
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  std::vector<Counts> parts(static_cast<size_t>(chunks));
  constexpr double scale = kHistBins / (kHistHi - kHistLo);
  struct None {};
  ForEachChunk<None>(chunks, [&](None&, int64_t c) {
    Counts& p = parts[static_cast<size_t>(c)];
    for (int64_t i = c * kChunk; i < std::min(n, (c + 1) * kChunk); ++i) {
      const double e = std::abs(static_cast<double>(t[i]) - f[i]);
      if (!std::isfinite(e)) {
        ++p.nonfinite;
      } else if (e == 0) {
        ++p.zero;
      } else {
        const double x = std::min(std::max(std::log10(e), kHistLo), kHistHi - 1e-9);
        const int64_t b = static_cast<int64_t>((x - kHistLo) * scale);
        ++p.bins[static_cast<size_t>(std::min<int64_t>(std::max<int64_t>(b, 0), kHistBins - 1))];
      }
    }
  });
  Counts total;
  for (const Counts& p : parts) {
    for (int k = 0; k < kHistBins; ++k) total.bins[static_cast<size_t>(k)] += p.bins[static_cast<size_t>(k)];
    total.zero += p.zero;
    total.nonfinite += p.nonfinite;
  }
  return total;
}

void Put(const at::Tensor& t, const at::Tensor& f, nlohmann::json& out, const char* name) {
  const at::Tensor c = AsStreamable(t);  // float or double, contiguous, on the CPU
  const double* fp = f.const_data_ptr<double>();
  const Counts k = c.scalar_type() == at::kFloat ? Bin(c.const_data_ptr<float>(), fp, c.numel())
                                                 : Bin(c.const_data_ptr<double>(), fp, c.numel());
  out[name] = std::vector<int64_t>(k.bins.begin(), k.bins.end());
  out[std::string(name) + "_zero"] = k.zero;
  out[std::string(name) + "_nonfinite"] = k.nonfinite;
}

}  // namespace

nlohmann::json ErrorHistogram(const at::Tensor& ref, const at::Tensor& res, const at::Tensor& fp64) {
  if (!fp64.defined() || !ref.defined() || !res.defined() || !fp64.is_floating_point() || !res.is_floating_point() ||
      !ref.is_floating_point() || fp64.numel() == 0 || ref.sizes() != fp64.sizes() || res.sizes() != fp64.sizes())
    return nullptr;
  const at::Tensor f = fp64.detach().to(at::kCPU).to(at::kDouble).contiguous();
  nlohmann::json h = {{"lo", kHistLo}, {"hi", kHistHi}, {"bins", kHistBins}};
  Put(res, f, h, "res");
  Put(ref, f, h, "ref");
  return h;
}

}  // namespace parity::compare
