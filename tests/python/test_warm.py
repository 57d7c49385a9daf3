"""warm.py: what a process prepares before its first Inductor compile."""
import os
import platform
import subprocess
import sys
import threading
import time

import pytest
import torch

from parity_capture import warm

TOOLS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools")


def test_warm_up_prepares_the_first_compile_and_only_logs_a_failure(capsys):
    """--warm (a minify's slots, before their workers listen): dynamo and Inductor imported and the
    CPU's vector ISA chosen; a device that cannot be warmed (CUDA where there is none) is logged,
    never raised: the first compile meets it again and reports it."""
    from torch._inductor import cpu_vec_isa
    warm.warm_up("cpu")
    assert "torch._inductor.compile_fx" in sys.modules and "torch._dynamo" in sys.modules
    assert cpu_vec_isa.valid_vec_isa_list.cache_info().currsize == 1  # probed, cached for the compiles
    assert "warmed up for cpu" in capsys.readouterr().err
    if not torch.cuda.is_available():
        warm.warm_up("cuda")
        assert "warm-up for cuda failed" in capsys.readouterr().err


def test_the_kernel_header_prepared_beside_the_imports_is_the_one_a_kernel_build_asks_for():
    """warm_up prepares Inductor's precompiled CPU kernel header in a thread beside its imports,
    with the call a kernel's build makes: in a fresh process, the thread imports nothing beyond
    KERNEL_HEADER_IMPORTS (imported before it starts, so no two threads import at once), and a
    kernel compiled after it finds that call answered (Inductor's cache of it hit, the header not
    preprocessed again). A torch that changes the call or the imports fails here."""
    code = """if True:
        import importlib, sys, torch
        from parity_capture import warm
        for m in warm.KERNEL_HEADER_IMPORTS:
            importlib.import_module(m)
        before = set(sys.modules)
        warm.cpu_kernel_header()
        assert set(sys.modules) == before, sorted(set(sys.modules) - before)
        from torch._inductor import codecache
        assert codecache._precompile_header.cache_info().misses == 1
        torch.compile(lambda t: torch.sigmoid(t) * 3 + 1, backend="inductor", fullgraph=True)(torch.randn(64))
        info = codecache._precompile_header.cache_info()
        assert info.misses == 1 and info.hits >= 1, info
        print("ok")
    """
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=TOOLS))
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stdout + r.stderr


def test_the_isa_chosen_with_caches_on_serves_a_compile_with_them_off(monkeypatch):
    """The profiling child compiles with Inductor's caches off; the ISA chosen before (caches on)
    is what that compile gets, with no probe built again."""
    import torch._inductor.config as cfg
    from torch._inductor import cpu_vec_isa
    cpu_vec_isa.valid_vec_isa_list.cache_clear()  # as in a fresh process
    getattr(cpu_vec_isa.VecISA, "_VecISA__bool__impl").cache_clear()
    warm.pick_cpu_isa()

    def no_build(self, code):
        raise AssertionError("a probe was built again")
    monkeypatch.setattr(cpu_vec_isa.VecISA, "check_build", no_build)
    with cfg.patch(force_disable_caches=True):
        assert cpu_vec_isa.pick_vec_isa()


def _fresh_isa_answers():
    """Inductor's ISA answers forgotten, as in a fresh process: the list's and each ISA's own."""
    from torch._inductor import cpu_vec_isa
    cpu_vec_isa.valid_vec_isa_list.cache_clear()
    classes = [cpu_vec_isa.VecISA]
    for cls in classes:
        classes.extend(cls.__subclasses__())
        for name in ("_VecISA__bool__impl", "__bool__"):
            if hasattr(cls.__dict__.get(name), "cache_clear"):
                cls.__dict__[name].cache_clear()


@pytest.mark.skipif(sys.platform != "linux" or platform.machine() != "x86_64", reason="the list asks several ISAs on x86 only")
def test_the_isa_probes_build_side_by_side_and_the_list_is_inductors(monkeypatch):
    """A cold worker's ISA list builds a probe per ISA the CPU claims: asked a thread each, the
    builds overlap, and the list is the one Inductor makes of the same answers one by one."""
    from torch._inductor import cpu_vec_isa
    warm.probe_isas_side_by_side()
    lock, running, most = threading.Lock(), [0], [0]

    def slow_build(self, code):
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        time.sleep(0.2)
        with lock:
            running[0] -= 1
        return str(self) != "avx512"  # one ISA refused: the list leaves it out

    monkeypatch.setattr(cpu_vec_isa, "x86_isa_checker", lambda: ["avx2", "avx512", "avx512_vnni"])
    monkeypatch.setattr(cpu_vec_isa.VecISA, "check_build", slow_build)
    try:
        _fresh_isa_answers()
        one_by_one = [str(isa) for isa in cpu_vec_isa.valid_vec_isa_list.__wrapped__()]
        assert most[0] == 1
        _fresh_isa_answers()
        most[0] = 0
        side_by_side = [str(isa) for isa in cpu_vec_isa.valid_vec_isa_list()]
        assert most[0] >= 2
        assert side_by_side == one_by_one and "avx512" not in side_by_side and "avx2" in side_by_side
    finally:
        _fresh_isa_answers()  # the next test's list is the real one's


def test_a_fork_server_prepares_the_cpu_s_first_compile_only_where_no_cuda_device_is(monkeypatch, capsys):
    """first_compile_paid (the fork server, before it serves): without a CUDA device the CPU's
    vector ISA chosen and one graph compiled; with one neither (a compile would initialise CUDA,
    and the ISA's probes, which CUDA workers never ask, held the server's first fork back)."""
    calls = []
    monkeypatch.setattr(warm, "pick_cpu_isa", lambda: calls.append("isa"))
    monkeypatch.setattr(torch, "compile", lambda *a, **k: calls.append("compile"))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    warm.first_compile_paid()
    assert calls == []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    warm.first_compile_paid()
    assert calls == ["isa", "compile"]
    assert "the first compile failed" in capsys.readouterr().err  # the stand-in returned no function
