"""warm.py: what a process prepares before its first Inductor compile."""
import sys

import torch

from parity_capture import warm


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
