// The distribution of errors against the fp64 reference, as Polygraphy's error histograms show
// it: |res - fp64| and |ref - fp64| in log10 bins, so a plot shows whether the backend's errors
// sit where eager's own do or decades above them. Knows nothing of graphs.
#pragma once

#include <ATen/core/Tensor.h>
#include <nlohmann/json.hpp>

namespace parity::compare {

inline constexpr double kHistLo = -12.0, kHistHi = 2.0;  // log10 of the error; outside: the end bins
inline constexpr int kHistBins = 56;                     // a quarter decade each

// {"lo", "hi", "bins", "res": counts, "ref": counts, "res_zero", "ref_zero", "res_nonfinite",
// "ref_nonfinite"}; null when there is nothing to bin (no fp64 reference, not floating, empty,
// or shapes differ).
nlohmann::json ErrorHistogram(const at::Tensor& ref, const at::Tensor& res, const at::Tensor& fp64);

}  // namespace parity::compare
