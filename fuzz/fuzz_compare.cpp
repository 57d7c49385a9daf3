// The comparator on arbitrary tensor pairs: SameTensor (every rule of same(), the statistics)
// and the error histogram, over every dtype the repro format stores, equal or mismatched dtypes
// and shapes, any bit patterns (NaN, Inf, denormals), with the options drawn from the input.
//
// Input layout (missing bytes read as zero; the data bytes repeat cyclically):
//   [0] ref dtype  [1] res dtype (bit 7 set: a different one, from bits 0-6)  [2] option bits
//   [3] tol choice  [4] rank 0-3 (bit 7: res gets one more element in its last dim)
//   [5..7] dims 0-7  [8..] data for ref, then res, then the fp64 reference
#include <ATen/ops/empty.h>

#include <cstdint>
#include <cstring>
#include <optional>
#include <vector>

#include "compare/histogram.h"
#include "compare/same.h"

namespace {

constexpr c10::ScalarType kTypes[] = {
    c10::ScalarType::Bool,   c10::ScalarType::Byte,         c10::ScalarType::Char,          c10::ScalarType::Short,
    c10::ScalarType::UInt16, c10::ScalarType::Int,          c10::ScalarType::UInt32,        c10::ScalarType::Long,
    c10::ScalarType::UInt64, c10::ScalarType::Half,         c10::ScalarType::BFloat16,      c10::ScalarType::Float,
    c10::ScalarType::Double, c10::ScalarType::ComplexFloat, c10::ScalarType::Float8_e4m3fn, c10::ScalarType::Float8_e5m2,
};
constexpr size_t kNumTypes = sizeof(kTypes) / sizeof(kTypes[0]);
constexpr double kTols[] = {0.0, 1e-4, 1e-3, 1e-2, 0.1, 1.0, 1e-8, 4e-3};

class Reader {
 public:
  Reader(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  uint8_t Byte(size_t i) const { return i < size_ ? data_[i] : 0; }
  // A tensor of `type` and `shape` filled from the data bytes after the header, cyclically.
  at::Tensor Tensor(c10::ScalarType type, const std::vector<int64_t>& shape) {
    at::Tensor t = at::empty(shape, at::TensorOptions().dtype(type));
    auto* out = static_cast<uint8_t*>(t.data_ptr());
    const size_t payload = size_ > kHeader ? size_ - kHeader : 0;
    for (size_t i = 0; i < t.nbytes(); ++i) out[i] = payload == 0 ? 0 : data_[kHeader + (cursor_++ % payload)];
    if (type == c10::ScalarType::Bool) t = t.view(at::kByte).bitwise_and(1).to(at::kBool);  // only 0/1 are bools
    return t;
  }
  static constexpr size_t kHeader = 8;

 private:
  const uint8_t* data_;
  size_t size_;
  size_t cursor_ = 0;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Reader in(data, size);
  const c10::ScalarType ref_type = kTypes[in.Byte(0) % kNumTypes];
  const c10::ScalarType res_type = (in.Byte(1) & 0x80) ? kTypes[(in.Byte(1) & 0x7f) % kNumTypes] : ref_type;
  const uint8_t bits = in.Byte(2);
  parity::compare::SameOptions options;
  options.cos_similarity = bits & 1;
  options.equal_nan = bits & 2;
  options.exact_dtype = bits & 4;
  options.ignore_non_fp = bits & 8;
  options.use_larger_multiplier_for_smaller_tensor = bits & 16;
  options.force_max_multiplier = bits & 32;
  options.use_iou_for_bool = bits & 64;
  const bool with_fp64 = bits & 128;
  options.tol = kTols[in.Byte(3) % 8];
  const int rank = in.Byte(4) % 4;
  std::vector<int64_t> shape;
  for (int d = 0; d < rank; ++d) shape.push_back(in.Byte(5 + d) % 8);
  std::vector<int64_t> res_shape = shape;
  if ((in.Byte(4) & 0x80) && rank > 0) res_shape.back() += 1;

  at::Tensor ref = in.Tensor(ref_type, shape);
  at::Tensor res = in.Tensor(res_type, res_shape);
  std::optional<at::Tensor> fp64;
  if (with_fp64) fp64 = in.Tensor(c10::ScalarType::Double, shape);

  // Exceptions are findings too: the comparator must turn every input into a verdict.
  auto verdict = parity::compare::SameTensor(ref, res, fp64, options);
  (void)verdict.ToJson();
  if (fp64) (void)parity::compare::ErrorHistogram(ref, res, *fp64);
  return 0;
}
