#include "interpreter/layout.h"

#include <ATen/ops/empty_strided.h>

#include <algorithm>

#include "interpreter/interpreter.h"

namespace parity::interp {
namespace detail {

using ir::Node;

bool IsFloatingDtype(c10::ScalarType t) {
  return t == c10::kFloat || t == c10::kHalf || t == c10::kBFloat16 || t == c10::kDouble;
}

c10::ScalarType Followed(c10::ScalarType t, c10::ScalarType run) {
  if (IsFloatingDtype(t)) return run;
  if (c10::isComplexType(t) && (run == c10::kDouble || run == c10::kFloat || run == c10::kHalf)) return c10::toComplexType(run);
  return t;
}

namespace {

// Whether `stride` lays out a tensor of `shape` densely without overlap (what empty_strided
// can hold and copy_ can write): sorted by stride, each dim's stride is the product of the
// sizes of the dims inside it. Dims of size 1 may have any stride.
bool DenseLayout(const std::vector<int64_t>& shape, const std::vector<int64_t>& stride) {
  std::vector<size_t> dims;
  for (size_t d = 0; d < shape.size(); ++d)
    if (shape[d] != 1) dims.push_back(d);
  std::sort(dims.begin(), dims.end(), [&](size_t a, size_t b) { return stride[a] < stride[b]; });
  int64_t expected = 1;
  for (size_t d : dims) {
    if (shape[d] == 0) return false;
    if (stride[d] != expected) return false;
    expected *= shape[d];
  }
  return true;
}

// Whether two stride lists lay out `shape` alike (strides of size-1 dims do not matter).
bool SameLayout(c10::IntArrayRef shape, c10::IntArrayRef a, const std::vector<int64_t>& b) {
  for (size_t d = 0; d < shape.size(); ++d)
    if (shape[d] != 1 && a[d] != b[d]) return false;
  return true;
}

// The one rule of a float-dtype run (the fp64 reference) for values the graph makes itself: a
// floating result in another floating dtype becomes the run's dtype. Inputs, parameters and
// dtype arguments follow it already (PrepareTensor, Operand::kDtype); this catches what the
// graph pins by default: factory ops with dtype=None (zeros, full, scalar_tensor: float32), so
// a buffer made in the graph, an index_put_/scatter destination or source and the checks of
// _assert_tensor_metadata all meet tensors of one dtype.
at::Tensor FollowFloatDtype(const at::Tensor& t, c10::ScalarType dtype) {
  if (!t.defined() || Followed(t.scalar_type(), dtype) == t.scalar_type()) return t;
  return t.to(Followed(t.scalar_type(), dtype));
}

}  // namespace

void FollowFloatDtype(c10::IValue& v, c10::ScalarType dtype) {
  if (v.isTensor()) {
    at::Tensor t = FollowFloatDtype(v.toTensor(), dtype);
    if (!t.is_same(v.toTensor())) v = std::move(t);
  } else if (v.isTuple()) {
    const auto& el = v.toTupleRef().elements();
    if (std::none_of(el.begin(), el.end(), [&](const c10::IValue& x) {
          return x.isTensor() && x.toTensor().defined() && Followed(x.toTensor().scalar_type(), dtype) != x.toTensor().scalar_type();
        }))
      return;
    std::vector<c10::IValue> items(el.begin(), el.end());
    for (auto& x : items) FollowFloatDtype(x, dtype);
    v = c10::ivalue::Tuple::create(std::move(items));
  } else if (v.isTensorList()) {
    c10::List<at::Tensor> l = v.toTensorList();
    for (size_t k = 0; k < l.size(); ++k) l.set(k, FollowFloatDtype(l.get(k), dtype));
  }
}

void RelayoutValue(c10::IValue& v, const Node& n) {
  if (v.isTensor()) {
    if (!n.meta.empty()) v = WithCapturedLayout(v.toTensor(), n.meta[0]);
  } else if (v.isTuple()) {
    const auto& el = v.toTupleRef().elements();
    std::vector<c10::IValue> items(el.begin(), el.end());
    bool changed = false;
    for (size_t k = 0; k < items.size() && k < n.meta.size(); ++k)
      if (items[k].isTensor()) {
        at::Tensor t = WithCapturedLayout(items[k].toTensor(), n.meta[k]);
        changed = changed || !t.is_same(items[k].toTensor());
        items[k] = std::move(t);
      }
    if (changed) v = c10::ivalue::Tuple::create(std::move(items));
  }
}

}  // namespace detail

at::Tensor WithCapturedLayout(const at::Tensor& t, const std::optional<ir::TensorMeta>& meta) {
  if (!meta || !t.defined() || meta->stride.size() != static_cast<size_t>(t.dim()) || t.sizes() != c10::IntArrayRef(meta->shape) ||
      detail::SameLayout(t.sizes(), t.strides(), meta->stride) || !detail::DenseLayout(meta->shape, meta->stride))
    return t;
  return at::empty_strided(meta->shape, meta->stride, t.options()).copy_(t);
}

at::Tensor PrepareTensor(const at::Tensor& t, const RunOptions& options) {
  at::Tensor out = t;
  if (options.float_dtype && detail::Followed(t.scalar_type(), *options.float_dtype) != t.scalar_type())
    out = out.to(detail::Followed(t.scalar_type(), *options.float_dtype));
  if (out.device() != options.device) out = out.to(options.device);
  return out;
}

}  // namespace parity::interp
