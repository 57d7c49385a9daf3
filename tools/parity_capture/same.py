"""The comparison rules of torch._dynamo.utils.same on one tensor pair, as parity's C++
comparator (compare/same.cpp) applies them: the one Python copy, used by the standalone
repro.py (which inlines this file) and tested on the same conformance corpus as the C++ side.
Needs only torch. Returns (passed, rule, message)."""
import math

import torch

LOOSE_TOL = 1e-2 * 4  # the NaN escape's allclose tolerance


def rmse_multiplier(ref, res, fp64_numel, tol, use_larger_multiplier_for_smaller_tensor=False,
                    force_max_multiplier=False):
    if force_max_multiplier:
        return 10.0
    m = 3.0 if res.dtype in (torch.float16, torch.bfloat16) else 2.0
    if use_larger_multiplier_for_smaller_tensor and fp64_numel <= 10:
        m = 10.0
    elif use_larger_multiplier_for_smaller_tensor and fp64_numel <= 500:
        m = 8.0
    elif fp64_numel < 1000 or (ref.dim() == 4 and ref.shape[-1] == 1 and ref.shape[-2] == 1) or tol >= 2 * 1e-2:
        m = 3.0
    return m


def _rmse(a, b):
    return torch.sqrt(torch.mean(torch.square(a.double() - b.double()))).item()


def same_tensor(ref, res, fp64=None, tol=1e-4, equal_nan=False, cos_similarity=False, exact_dtype=True,
                ignore_non_fp=False, use_larger_multiplier_for_smaller_tensor=False, force_max_multiplier=False,
                use_iou_for_bool=False, iou_threshold=0.99):
    ref, res = ref.detach(), res.detach()
    fp64 = ref if fp64 is None else fp64.detach()
    if ref.is_sparse:
        ref = ref.to_dense()
        res = res.to_dense() if res.is_sparse else res
    if ref.shape != res.shape:
        return False, "shape_mismatch", f"shape mismatch {list(ref.shape)} vs {list(res.shape)}"
    if exact_dtype:
        if ref.dtype != res.dtype:
            return False, "dtype_mismatch", f"dtype mismatch {ref.dtype}, {res.dtype}"
        if ref.dtype == torch.bool:
            if ignore_non_fp:
                return True, "bool_ignored", ""
            if use_iou_for_bool:
                inter = (ref & res).sum().item()
                union = (ref | res).sum().item()
                if union == 0:
                    return inter == 0, "bool_iou", "" if inter == 0 else "IoU: empty union"
                iou = float(torch.tensor(inter, dtype=torch.float32) / torch.tensor(union, dtype=torch.float32))
                ok = iou >= iou_threshold
                return ok, "bool_iou", "" if ok else f"IoU accuracy failed: {iou:g} < {iou_threshold:g}"
            ok = torch.allclose(ref.to(torch.uint8), res.to(torch.uint8), atol=tol, rtol=tol, equal_nan=equal_nan)
            return ok, "bool_allclose", "" if ok else "Accuracy failed: uint8 tensor did not match"
    if cos_similarity:
        a, b = ref.flatten().to(torch.float32), res.flatten().to(torch.float32)
        if torch.allclose(a, b, atol=tol, rtol=tol, equal_nan=True):
            return True, "cosine_allclose", ""
        score = torch.nn.functional.cosine_similarity(a, b, dim=0, eps=1e-6).item()
        return score >= 0.99, "cosine", "" if score >= 0.99 else f"Similarity score={score:g} < 0.99"
    if not exact_dtype and ref.dtype != res.dtype:
        ref = ref.to(res.dtype)
    if torch.allclose(ref, res, atol=tol, rtol=tol, equal_nan=equal_nan):
        return True, "allclose", ""
    if fp64.dtype == torch.float64:
        if (ref.is_floating_point() and torch.isnan(ref).any() and not torch.isnan(res).any()
                and not torch.isnan(fp64).any()
                and torch.allclose(fp64.to(res.dtype), res, atol=LOOSE_TOL, rtol=LOOSE_TOL, equal_nan=equal_nan)):
            return True, "nan_escape", ""
        res_error, ref_error = _rmse(fp64, res), _rmse(fp64, ref)
        m = rmse_multiplier(ref, res, fp64.numel(), tol, use_larger_multiplier_for_smaller_tensor, force_max_multiplier)
        if res_error <= m * ref_error + tol / 10.0:
            return True, "rmse", ""
        if equal_nan and math.isnan(ref_error) and math.isnan(res_error):
            return True, "rmse_nan_equal", ""
        return False, "rmse", (f"RMSE (res-fp64): {res_error:g}, (ref-fp64): {ref_error:g}, multiplier: {m:g}, "
                               f"tol: {tol:g}")
    if ignore_non_fp:
        return True, "ignored_non_fp", ""
    return False, "allclose_failed", f"Accuracy failed: allclose not within tol={tol:g}"
