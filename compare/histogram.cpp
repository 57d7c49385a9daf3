#include "compare/histogram.h"

#include <ATen/ATen.h>

namespace parity::compare {

namespace {

void Bin(const at::Tensor& t, const at::Tensor& fp64, nlohmann::json& out, const char* name) {
  const at::Tensor e = (t.to(at::kDouble).flatten() - fp64).abs();
  const at::Tensor finite = e.isfinite();
  const at::Tensor ef = e.masked_select(finite);
  const at::Tensor nz = ef.masked_select(ef > 0);
  std::vector<int64_t> counts(kHistBins, 0);
  if (nz.numel() > 0) {
    const at::Tensor h = at::histc(nz.log10().clamp(kHistLo, kHistHi - 1e-9), kHistBins, kHistLo, kHistHi).to(at::kLong);
    for (int i = 0; i < kHistBins; ++i) counts[static_cast<size_t>(i)] = h[i].item<int64_t>();
  }
  out[name] = counts;
  out[std::string(name) + "_zero"] = ef.numel() - nz.numel();
  out[std::string(name) + "_nonfinite"] = e.numel() - ef.numel();
}

}  // namespace

nlohmann::json ErrorHistogram(const at::Tensor& ref, const at::Tensor& res, const at::Tensor& fp64) {
  if (!fp64.defined() || !ref.defined() || !res.defined() || !fp64.is_floating_point() || !res.is_floating_point() ||
      !ref.is_floating_point() || fp64.numel() == 0 || ref.sizes() != fp64.sizes() || res.sizes() != fp64.sizes())
    return nullptr;
  const at::Tensor f = fp64.to(at::kDouble).flatten();
  nlohmann::json h = {{"lo", kHistLo}, {"hi", kHistHi}, {"bins", kHistBins}};
  Bin(res, f, h, "res");
  Bin(ref, f, h, "ref");
  return h;
}

}  // namespace parity::compare
