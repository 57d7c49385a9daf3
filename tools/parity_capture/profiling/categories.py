"""What a kernel is: its category from the generated code Inductor wrote (Triton's heuristics
decorator, C++ accumulators and templates), not from its name; the ops counted as matmul,
convolution or attention work."""
from __future__ import annotations

import re
from typing import Dict, List



# Inductor names a CPU kernel's profiler record "graph_<id>_<kernel>".
_GRAPH_PREFIX = re.compile(r"^graph_\d+_")



# Inductor's extern kernels (ATen calls it makes instead of generating code) that do matmul,
# convolution or attention work (also any op named *conv* or _scaled_dot_product*); any other
# ATen op seen in a compiled run is "other".
_MATMUL_CONV = {"mm", "addmm", "bmm", "baddbmm", "_scaled_mm", "matmul", "linear", "_int_mm", "_linear_pointwise",
                "mkl_linear", "_weight_int8pack_mm", "_flash_attention_forward", "_efficient_attention_forward"}



# Runtime API events the profiler may hang device kernels on; the op above them launched them.
_RUNTIME_API = ("cudaLaunch", "cuLaunch", "hipLaunch", "hipExtModuleLaunch", "cudaMemcpy", "cudaMemset")



def kernel_category(source: str) -> str:
    """The category of a generated kernel from its source, as Inductor decided it when it wrote
    the kernel: Triton kernels carry their heuristics decorator (pointwise, reduction,
    persistent_reduction, template, foreach); C++ kernels are reductions when they keep an
    accumulator, templates when they are GEMM templates, else pointwise."""
    m = re.search(r"@triton_heuristics\.(\w+)\(", source)
    if m:
        kind = m.group(1)
        return {"pointwise": "pointwise", "reduction": "reduction", "persistent_reduction": "persistent_reduction",
                "template": "template", "foreach": "pointwise", "split_scan": "reduction",
                "cooperative_reduction": "reduction", "user_autotune": "template"}.get(kind, "other")
    if "@triton.jit" in source:
        return "template"
    if "CppMicroGemm" in source or "cpp_template" in source or "GemmTemplate" in source:
        return "template"
    if "tmp_acc" in source:
        return "reduction"
    return "pointwise"



def code_phase(code: str) -> str:
    """"backward" for the module of an AOTAutograd backward graph (its header names the AOT
    graph: `# AOT ID: ['0_backward']`), else "forward"."""
    m = re.search(r"^# AOT ID: \[([^\]]*)\]", code[:2000], re.M)
    return "backward" if m and "_backward" in m.group(1) else "forward"



def generated_kernels(codes: List[str]) -> Dict[str, Dict[str, str]]:
    """phase -> name -> category of every kernel defined in the compiled modules' source."""
    phases: Dict[str, Dict[str, str]] = {"forward": {}, "backward": {}}
    for code in codes:
        out = phases[code_phase(code)]
        # `<name> = async_compile.<kind>('<name>', ...source...)` up to the next definition.
        starts = [(m.start(), m.group(1)) for m in re.finditer(r"^(\w+) = async_compile\.\w+\(", code, re.M)]
        for i, (pos, name) in enumerate(starts):
            end = starts[i + 1][0] if i + 1 < len(starts) else len(code)
            out[name] = kernel_category(code[pos:end])
    return phases



def op_short_name(name: str) -> str:
    """'aten::addmm', 'extern_kernels.addmm', 'aten.addmm.default', 'torch.ops.aten.addmm.default'
    -> 'addmm'."""
    parts = name.split("::")[-1].split(".")
    if parts[:2] == ["torch", "ops"] and len(parts) >= 4:
        return parts[3]
    if parts[0] in ("extern_kernels", "aten") and len(parts) > 1:
        return parts[1]
    return parts[0]



def is_matmul_conv(name: str) -> bool:
    op = op_short_name(name)
    return name.startswith(("aten::", "mkldnn::", "mkl::", "onednn::")) and (
        op in _MATMUL_CONV or op.startswith("_scaled_dot_product") or "conv" in op)
