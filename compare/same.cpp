#include "compare/same.h"

#include <ATen/ops/_to_copy.h>
#include <ATen/ops/allclose.h>
#include <ATen/ops/any.h>
#include <ATen/ops/bitwise_and.h>
#include <ATen/ops/bitwise_or.h>
#include <ATen/ops/cosine_similarity.h>
#include <ATen/ops/isnan.h>
#include <ATen/ops/scalar_tensor.h>
#include <ATen/ops/sum.h>

#include <algorithm>
#include <cmath>
#include <sstream>

namespace parity::compare {

const char* ToString(Rule r) {
  switch (r) {
    case Rule::kDtypeMismatch: return "dtype_mismatch";
    case Rule::kShapeMismatch: return "shape_mismatch";
    case Rule::kBoolIgnored: return "bool_ignored";
    case Rule::kBoolIou: return "bool_iou";
    case Rule::kBoolAllclose: return "bool_allclose";
    case Rule::kCosineAllclose: return "cosine_allclose";
    case Rule::kCosine: return "cosine";
    case Rule::kAllclose: return "allclose";
    case Rule::kNanEscape: return "nan_escape";
    case Rule::kRmse: return "rmse";
    case Rule::kRmseNanEqual: return "rmse_nan_equal";
    case Rule::kIgnoredNonFp: return "ignored_non_fp";
    case Rule::kAllcloseFailed: return "allclose_failed";
    case Rule::kEquality: return "equality";
    case Rule::kStructure: return "structure";
    case Rule::kBitwise: return "bitwise";
    case Rule::kRandom: return "random";
    case Rule::kNoiseBudget: return "noise_budget";
  }
  return "?";
}

namespace {

std::string Fmt(double v) {
  std::ostringstream os;
  os.precision(6);
  os << v;
  return os.str();
}

bool AnyNan(const at::Tensor& t) { return t.is_floating_point() && at::isnan(t).any().item<bool>(); }

// allclose as torch computes it; the streaming pass gives the same answer for float32/float64
// pairs on the CPU without temporaries.
bool Allclose(const at::Tensor& a, const at::Tensor& b, double tol, bool equal_nan, std::optional<TensorStats>& stats,
              const std::optional<at::Tensor>& fp64) {
  const bool fast = a.device().is_cpu() && b.device().is_cpu() && a.scalar_type() == b.scalar_type() &&
                    (a.scalar_type() == at::kFloat || a.scalar_type() == at::kDouble) && a.sizes() == b.sizes();
  if (fast) {
    if (!stats) stats = ComputeStats(a, b, fp64, tol, equal_nan);
    return stats->mismatches == 0;
  }
  return at::allclose(a, b, tol, tol, equal_nan);
}

}  // namespace

double RmseMultiplier(const at::Tensor& ref, const at::Tensor& res, int64_t fp64_numel, const SameOptions& o) {
  if (o.force_max_multiplier) return 10.0;
  double m = (res.scalar_type() == at::kHalf || res.scalar_type() == at::kBFloat16) ? 3.0 : 2.0;
  if (o.use_larger_multiplier_for_smaller_tensor && fp64_numel <= 10)
    m = 10.0;
  else if (o.use_larger_multiplier_for_smaller_tensor && fp64_numel <= 500)
    m = 8.0;
  else if (fp64_numel < 1000 || (ref.dim() == 4 && ref.size(-1) == 1 && ref.size(-2) == 1) || o.tol >= 2 * 1e-2)
    m = 3.0;
  return m;
}

Status CheckTolerance(double tol, const std::string& flag) {
  if (!(tol >= 0) || !std::isfinite(tol))
    return Error::BadInput(flag + " " + std::to_string(tol) + ": expected a finite number >= 0");
  return Status::Ok();
}

Verdict SameTensor(const at::Tensor& ref_in, const at::Tensor& res_in, const std::optional<at::Tensor>& fp64_in,
                   const SameOptions& o) {
  Verdict v;
  at::Tensor ref = ref_in.detach(), res = res_in.detach();
  at::Tensor fp64 = fp64_in ? fp64_in->detach() : ref;
  if (ref.is_sparse()) {
    ref = ref.to_dense();
    res = res.is_sparse() ? res.to_dense() : res;
  }
  // float8 has too few kernels to compare in: compare its values as float32 (exact upcast).
  if (c10::isFloat8Type(ref.scalar_type())) ref = ref.to(at::kFloat);
  if (c10::isFloat8Type(res.scalar_type())) res = res.to(at::kFloat);
  if (fp64_in && c10::isFloat8Type(fp64.scalar_type())) fp64 = fp64.to(at::kFloat);
  if (!fp64_in) fp64 = ref;
  auto fail = [&](Rule r, std::string msg) {
    v.pass = false;
    v.rule = r;
    v.message = std::move(msg);
    return v;
  };
  auto pass = [&](Rule r) {
    v.pass = true;
    v.rule = r;
    return v;
  };
  const bool fp64_is_double = fp64.scalar_type() == at::kDouble && fp64.numel() == ref.numel();
  std::optional<at::Tensor> fp64_for_stats;
  if (fp64_is_double) fp64_for_stats = fp64;
  if (ref.sizes() != res.sizes())
    return fail(Rule::kShapeMismatch, "shape mismatch " + c10::str(ref.sizes()) + " vs " + c10::str(res.sizes()));
  if (o.compute_stats) v.stats = ComputeStats(ref, res, fp64_for_stats, o.tol, o.equal_nan);

  if (o.exact_dtype) {
    if (ref.scalar_type() != res.scalar_type())
      return fail(Rule::kDtypeMismatch,
                  std::string("dtype mismatch ") + c10::toString(ref.scalar_type()) + ", " + c10::toString(res.scalar_type()));
    if (ref.scalar_type() == at::kBool) {
      if (o.ignore_non_fp) return pass(Rule::kBoolIgnored);
      if (o.use_iou_for_bool) {
        const double inter = at::bitwise_and(ref, res).sum().item<double>();
        const double uni = at::bitwise_or(ref, res).sum().item<double>();
        if (uni == 0) return inter == 0 ? pass(Rule::kBoolIou) : fail(Rule::kBoolIou, "IoU: empty union");
        const double iou = static_cast<double>(static_cast<float>(inter) / static_cast<float>(uni));
        if (iou < o.iou_threshold) return fail(Rule::kBoolIou, "IoU accuracy failed: " + Fmt(iou) + " < " + Fmt(o.iou_threshold));
        return pass(Rule::kBoolIou);
      }
      if (at::allclose(ref.to(at::kByte), res.to(at::kByte), o.tol, o.tol, o.equal_nan)) return pass(Rule::kBoolAllclose);
      return fail(Rule::kBoolAllclose, "Accuracy failed: uint8 tensor did not match");
    }
  }

  if (o.cos_similarity) {
    at::Tensor a = ref.flatten().to(at::kFloat), b = res.flatten().to(at::kFloat);
    if (at::allclose(a, b, o.tol, o.tol, /*equal_nan=*/true)) return pass(Rule::kCosineAllclose);
    const double score = at::cosine_similarity(a, b, 0, 1e-6).item<double>();
    if (v.stats) v.stats->cosine = score;
    if (score >= 0.99) return pass(Rule::kCosine);
    return fail(Rule::kCosine, "Similarity score=" + Fmt(score) + " < 0.99");
  }

  if (!o.exact_dtype && ref.scalar_type() != res.scalar_type()) {
    ref = ref.to(res.scalar_type());
    if (o.compute_stats) v.stats = ComputeStats(ref, res, fp64_for_stats, o.tol, o.equal_nan);
  }
  if (Allclose(ref, res, o.tol, o.equal_nan, v.stats, fp64_for_stats)) return pass(Rule::kAllclose);

  if (fp64.scalar_type() == at::kDouble) {
    constexpr double kLooseTol = 1e-2 * 4;
    if (!v.stats || !fp64_for_stats) v.stats = ComputeStats(ref, res, fp64, o.tol, o.equal_nan);
    // The NaN escape: ref has NaN, res and fp64 do not, and res matches fp64 loosely.
    if (v.stats->ref_nan > 0 && v.stats->res_nan == 0 && !AnyNan(fp64) &&
        at::allclose(fp64.to(res.scalar_type()), res, kLooseTol, kLooseTol, o.equal_nan))
      return pass(Rule::kNanEscape);
    // rmse(fp64_ref, x) = sqrt(mean((fp64_ref - x)^2)), in double.
    const double ref_error = v.stats->rmse_ref_vs_fp64;
    const double res_error = v.stats->rmse_res_vs_fp64;
    v.multiplier = RmseMultiplier(ref, res, fp64.numel(), o);
    bool ok = res_error <= v.multiplier * ref_error + o.tol / 10.0;
    if (ok) return pass(Rule::kRmse);
    if (o.equal_nan && std::isnan(ref_error) && std::isnan(res_error)) return pass(Rule::kRmseNanEqual);
    return fail(Rule::kRmse, "RMSE (res-fp64): " + Fmt(res_error) + ", (ref-fp64): " + Fmt(ref_error) +
                                 ", multiplier: " + Fmt(v.multiplier) + ", tol: " + Fmt(o.tol));
  }
  if (o.ignore_non_fp) return pass(Rule::kIgnoredNonFp);
  return fail(Rule::kAllcloseFailed, "Accuracy failed: allclose not within tol=" + Fmt(o.tol));
}

namespace {

struct Walker {
  const SameOptions& o;
  SameResult& out;

  void Leaf(Verdict v, const std::string& path) {
    v.path = path;
    out.pass = out.pass && v.pass;
    out.leaves.push_back(std::move(v));
  }
  void Structure(const std::string& path, std::string msg) {
    Verdict v;
    v.pass = false;
    v.rule = Rule::kStructure;
    v.message = std::move(msg);
    Leaf(std::move(v), path);
  }

  static bool IsSeq(const c10::IValue& v) { return v.isTuple() || v.isList(); }
  static std::vector<c10::IValue> Items(const c10::IValue& v) {
    if (v.isTuple()) return v.toTupleRef().elements().vec();
    return v.toList().vec();
  }
  static at::Tensor FloatTensor(double d) { return at::scalar_tensor(d, at::kFloat); }

  void Visit(const c10::IValue& ref, const c10::IValue& res, const c10::IValue& fp64, const std::string& path) {
    if (IsSeq(ref)) {
      if (!IsSeq(res)) return Structure(path, "type mismatch: ref is a sequence, res is " + res.tagKind());
      auto a = Items(ref), b = Items(res);
      if (a.size() != b.size())
        return Structure(path, "Length mismatch: " + std::to_string(a.size()) + " vs " + std::to_string(b.size()));
      std::vector<c10::IValue> f = IsSeq(fp64) ? Items(fp64) : std::vector<c10::IValue>();
      for (size_t k = 0; k < a.size(); ++k) Visit(a[k], b[k], k < f.size() ? f[k] : a[k], path + "[" + std::to_string(k) + "]");
      return;
    }
    if (ref.isGenericDict()) {
      if (!res.isGenericDict()) return Structure(path, "type mismatch: ref is a dict, res is " + res.tagKind());
      auto rd = ref.toGenericDict(), sd = res.toGenericDict();
      std::vector<std::pair<std::string, c10::IValue>> keys;
      for (const auto& e : rd) keys.emplace_back(e.key().isString() ? e.key().toStringRef() : c10::str(e.key()), e.key());
      if (rd.size() != sd.size()) return Structure(path, "keys mismatch");
      std::sort(keys.begin(), keys.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
      for (const auto& [name, key] : keys) {
        if (!sd.contains(key)) return Structure(path, "keys mismatch: res lacks '" + name + "'");
        c10::IValue f = fp64.isGenericDict() && fp64.toGenericDict().contains(key) ? fp64.toGenericDict().at(key) : rd.at(key);
        Visit(rd.at(key), sd.at(key), f, path + "['" + name + "']");
      }
      return;
    }
    if (ref.isTensor() || ref.isDouble()) {
      at::Tensor a = ref.isTensor() ? ref.toTensor() : FloatTensor(ref.toDouble());
      if (!res.isTensor() && !res.isDouble()) return Structure(path, "type mismatch: ref is a tensor, res is " + res.tagKind());
      at::Tensor b = res.isTensor() ? res.toTensor() : FloatTensor(res.toDouble());
      std::optional<at::Tensor> f;
      if (fp64.isTensor())
        f = fp64.toTensor();
      else if (fp64.isDouble())
        f = FloatTensor(fp64.toDouble());
      return Leaf(SameTensor(a, b, f, o), path);
    }
    // int, bool, str, None, device: equality.
    Verdict v;
    v.rule = Rule::kEquality;
    v.pass = o.ignore_non_fp || ref == res;
    if (!v.pass) v.message = "Accuracy failed (" + ref.tagKind() + "): " + c10::str(ref) + " != " + c10::str(res);
    Leaf(std::move(v), path);
  }
};

}  // namespace

SameResult Same(const c10::IValue& ref, const c10::IValue& res, const c10::IValue& fp64_ref, const SameOptions& options) {
  SameResult out;
  Walker w{options, out};
  w.Visit(ref, res, fp64_ref.isNone() ? ref : fp64_ref, "");
  return out;
}

nlohmann::json Verdict::ToJson() const {
  nlohmann::json j = {{"path", path}, {"pass", pass}, {"rule", ToString(rule)}};
  if (!message.empty()) j["message"] = message;
  if (multiplier > 0) j["multiplier"] = multiplier;
  if (stats) j["stats"] = stats->ToJson();
  return j;
}

nlohmann::json SameResult::ToJson() const {
  nlohmann::json arr = nlohmann::json::array();
  for (const auto& l : leaves) arr.push_back(l.ToJson());
  return {{"pass", pass}, {"outputs", arr}};
}

}  // namespace parity::compare
