#include "compare/histogram.h"

#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "compare/chunks.h"
#include "compare/stats.h"

namespace parity::compare {

namespace {

// One pass over a tensor's errors against fp64 (contiguous CPU data: `t` float or double, `f`
// double), in parallel chunks each counting into its own bins. A finite non-zero error e goes
// to bin floor((log10(e) clamped to [lo, hi)) - lo) * bins / (hi - lo)), as torch.histc of the
// clamped log10 bins it (BinByLog10, the definition; BinTable answers it without a logarithm).
struct Counts {
  std::array<int64_t, kHistBins> bins{};
  int64_t zero = 0, nonfinite = 0;
};

constexpr double kScale = kHistBins / (kHistHi - kHistLo);

// The bin of a finite error e > 0, by its definition.
int BinByLog10(double e) {
  const double x = std::min(std::max(std::log10(e), kHistLo), kHistHi - 1e-9);
  const int64_t b = static_cast<int64_t>((x - kHistLo) * kScale);
  return static_cast<int>(std::min<int64_t>(std::max<int64_t>(b, 0), kHistBins - 1));
}

// BinByLog10 without a logarithm per element (two thirds of a BERT train step's comparison went
// to log10: measured with perf, 110M gradients). A positive double's binade (its exponent bits)
// spans 0.3 of a decade, so at most two bin edges: the table holds each binade's first bin and
// the smallest doubles where the definition's bin steps up, found by bisection over the binade's
// bit patterns with BinByLog10 itself. An error within a relative 1e-9 of such an edge is binned
// by the definition (log10 is within an ulp or two of exact: whatever it does near an edge is
// inside that margin), so every error lands where BinByLog10 puts it. In front of it, a finer
// table by the exponent and the top mantissa bits (a 32nd of a binade) answers the bin of every
// slice that neither holds an edge nor comes within that margin of one: most errors.
class BinTable {
 public:
  static constexpr int kZero = kHistBins, kNonFinite = kHistBins + 1, kSlots = kHistBins + 2;
  static const BinTable& Get() {
    static const BinTable table;
    return table;
  }
  // The slot of an error e >= 0 (its absolute value): a bin, kZero or kNonFinite.
  int Of(double e) const {
    if (e == 0) return kZero;
    uint64_t bits;
    std::memcpy(&bits, &e, sizeof bits);
    const uint8_t slot = slices_[bits >> kSliceShift];
    if (slot != kNearAnEdge) [[likely]]
      return slot;
    const Binade& b = binades_[bits >> 52];
    for (int j = 0; j < b.nears; ++j)
      if (e >= b.near_lo[j] && e <= b.near_hi[j]) return BinByLog10(e);
    return b.first + (e >= b.edge[0]) + (e >= b.edge[1]);
  }

 private:
  static constexpr double kNear = 1e-9;
  static constexpr int kSliceShift = 52 - 5;  // 32 slices a binade
  static constexpr uint8_t kNearAnEdge = 255;
  static_assert(kScale * 0.30103 < 2.0, "a binade (0.301 decades) spans at most two bin edges");
  static_assert(kSlots < kNearAnEdge);
  struct Binade {
    int first = 0, edges = 0, nears = 0;
    std::array<double, 2> edge{kNoEdge, kNoEdge};  // where the bin steps up, in increasing order
    // [near_lo, near_hi]: within kNear of an edge, the binade's own or a neighbour's.
    std::array<double, 4> near_lo{}, near_hi{};
  };
  static constexpr double kNoEdge = std::numeric_limits<double>::infinity();
  static double FromBits(uint64_t bits) {
    double d;
    std::memcpy(&d, &bits, sizeof d);
    return d;
  }
  static uint64_t LastOf(uint64_t first, int shift) { return first | ((uint64_t{1} << shift) - 1); }

  BinTable() {
    for (uint64_t exponent = 0; exponent < 0x7ff; ++exponent) {  // 0x7ff: Inf and NaN, never binned
      const uint64_t lo = exponent << 52, hi = LastOf(lo, 52);
      Binade& b = binades_[exponent];
      b.first = BinByLog10(FromBits(lo == 0 ? 1 : lo));  // the binade's smallest positive value
      const int last = BinByLog10(FromBits(hi));
      for (int target = b.first + 1; target <= last; ++target) {
        uint64_t below = lo, at = hi;  // BinByLog10(below) < target <= BinByLog10(at)
        while (at - below > 1) {
          const uint64_t mid = below + (at - below) / 2;
          (BinByLog10(FromBits(mid)) >= target ? at : below) = mid;
        }
        b.edge[static_cast<size_t>(b.edges++)] = FromBits(at);
      }
    }
    for (uint64_t exponent = 0; exponent < 0x7ff; ++exponent) {
      Binade& b = binades_[exponent];
      const double lo = FromBits(exponent << 52), hi = FromBits(LastOf(exponent << 52, 52));
      for (uint64_t n = exponent == 0 ? 0 : exponent - 1; n <= std::min<uint64_t>(exponent + 1, 0x7fe); ++n)
        for (int j = 0; j < binades_[n].edges; ++j) {
          const double edge = binades_[n].edge[static_cast<size_t>(j)];
          if (edge >= lo * (1 - 2 * kNear) && edge <= hi * (1 + 2 * kNear) && b.nears < static_cast<int>(b.near_lo.size())) {
            b.near_lo[static_cast<size_t>(b.nears)] = edge * (1 - kNear);
            b.near_hi[static_cast<size_t>(b.nears++)] = edge * (1 + kNear);
          }
        }
    }
    for (uint64_t slice = 0; slice < slices_.size(); ++slice) {
      const uint64_t exponent = slice >> (52 - kSliceShift);
      if (exponent == 0x7ff) {
        slices_[slice] = kNonFinite;
        continue;
      }
      const uint64_t first = slice << kSliceShift;
      const double lo = FromBits(first == 0 ? 1 : first), hi = FromBits(LastOf(first, kSliceShift));
      const Binade& b = binades_[exponent];
      bool near = false;
      for (int j = 0; j < b.nears; ++j) near |= b.near_lo[j] <= hi && b.near_hi[j] >= lo;
      const int bin = BinByLog10(lo);
      slices_[slice] = near || BinByLog10(hi) != bin ? kNearAnEdge : static_cast<uint8_t>(bin);
    }
  }
  std::array<Binade, 0x800> binades_{};
  std::array<uint8_t, size_t{1} << (64 - kSliceShift - 1)> slices_{};  // by the bits of a positive double
};

template <typename T>
Counts Bin(const T* t, const double* f, int64_t n) {
  constexpr int64_t kChunk = 1 << 16;
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  std::vector<Counts> parts(static_cast<size_t>(chunks));
  const BinTable& table = BinTable::Get();
  struct None {};
  ForEachChunk<None>(chunks, [&](None&, int64_t c) {
    // Four copies of the counts, taken in turn: consecutive errors in one bin do not wait for
    // each other's increment. Slots past the bins: zero errors, non-finite ones (BinTable::Of).
    std::array<std::array<int64_t, BinTable::kSlots>, 4> sub{};
    const int64_t end = std::min(n, (c + 1) * kChunk);
    for (int64_t i = c * kChunk; i < end; ++i) {
      const double e = std::abs(static_cast<double>(t[i]) - f[i]);
      ++sub[static_cast<size_t>(i & 3)][static_cast<size_t>(table.Of(e))];
    }
    Counts& p = parts[static_cast<size_t>(c)];
    for (const auto& s : sub) {
      for (int k = 0; k < kHistBins; ++k) p.bins[static_cast<size_t>(k)] += s[static_cast<size_t>(k)];
      p.zero += s[BinTable::kZero];
      p.nonfinite += s[BinTable::kNonFinite];
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
