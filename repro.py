
import os
os.environ['TORCHINDUCTOR_CACHE_DIR'] = '/tmp/tmpvzag5xee/pytorch-minifier/inductor-cache'
os.environ['_TORCHINDUCTOR_PYOBJECT_TENSOR_DATA_PTR'] = '140538200902688'
os.environ.pop('TORCHDYNAMO_REPRO_AFTER', None)
os.environ.pop('TORCHDYNAMO_REPRO_LEVEL', None)

import torch
from torch import tensor, device
import torch.fx as fx
from torch._dynamo.testing import rand_strided
from math import inf
import torch._inductor.inductor_prims



import torch._dynamo.config
import torch._inductor.config
import torch._functorch.config
import torch.fx.experimental._config
torch._dynamo.config.debug_dir_root = '/tmp/tmpvzag5xee/pytorch-minifier'
torch._inductor.config.cpp.inject_relu_bug_TESTING_ONLY = 'accuracy'
torch._inductor.config.deterministic = False
torch._inductor.config.inplace_buffers = True
torch._inductor.config.comprehensive_padding = True
torch._inductor.config.triton.store_cubin = False
torch._functorch.config.functionalize_rng_ops = False
torch._functorch.config.fake_tensor_allow_unsafe_data_ptr_access = True
torch._functorch.config.unlift_effect_tokens = False
torch._functorch.config.selective_decompose = False



isolate_fails_code_str = None





if "__compile_source__" in globals():
    import inspect as __after_aot_inspect
    import linecache as __after_aot_linecache
    __after_aot_filename = __after_aot_inspect.currentframe().f_code.co_filename
    __after_aot_linecache.cache[__after_aot_filename] = (
        len(__compile_source__),
        None,
        __compile_source__.splitlines(True),
        __after_aot_filename,
    )
# torch version: 2.13.0+cpu
# torch cuda version: None
# torch git version: cf30153c4c131c8164ee7798e5022d810682e2cb


# torch.cuda.is_available()==False, no GPU info collected
torch._higher_order_ops.triton_kernel_wrap.kernel_side_table.reset_table()

from torch.nn import *
class Repro(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()



    def forward(self, arg0_1, arg1_1, arg2_1, arg3_1, arg4_1, arg5_1, arg6_1, arg7_1, arg8_1, arg9_1, arg10_1, arg11_1, arg12_1, arg13_1, arg14_1, arg15_1, arg16_1, arg17_1, arg18_1, arg19_1, arg20_1, arg21_1, arg22_1, arg23_1, arg24_1):
        permute = torch.ops.aten.permute.default(arg0_1, [1, 0]);  arg0_1 = None
        addmm = torch.ops.aten.addmm.default(arg1_1, arg2_1, permute);  arg1_1 = arg2_1 = permute = None
        mul = torch.ops.aten.mul.Tensor(addmm, 0.5)
        mul_1 = torch.ops.aten.mul.Tensor(addmm, 0.7071067811865476)
        erf = torch.ops.aten.erf.default(mul_1);  mul_1 = None
        add = torch.ops.aten.add.Tensor(erf, 1);  erf = None
        mul_2 = torch.ops.aten.mul.Tensor(mul, add);  mul = add = None
        sigmoid = torch.ops.aten.sigmoid.default(addmm);  addmm = None
        mul_3 = torch.ops.aten.mul.Tensor(mul_2, sigmoid);  mul_2 = sigmoid = None
        tanh = torch.ops.aten.tanh.default(mul_3)
        mul_4 = torch.ops.aten.mul.Tensor(tanh, 0.1);  tanh = None
        add_1 = torch.ops.aten.add.Tensor(mul_3, mul_4);  mul_3 = mul_4 = None
        permute_1 = torch.ops.aten.permute.default(arg3_1, [1, 0]);  arg3_1 = None
        addmm_1 = torch.ops.aten.addmm.default(arg4_1, add_1, permute_1);  arg4_1 = add_1 = permute_1 = None
        mul_5 = torch.ops.aten.mul.Tensor(addmm_1, 0.5)
        mul_6 = torch.ops.aten.mul.Tensor(addmm_1, 0.7071067811865476)
        erf_1 = torch.ops.aten.erf.default(mul_6);  mul_6 = None
        add_2 = torch.ops.aten.add.Tensor(erf_1, 1);  erf_1 = None
        mul_7 = torch.ops.aten.mul.Tensor(mul_5, add_2);  mul_5 = add_2 = None
        sigmoid_1 = torch.ops.aten.sigmoid.default(addmm_1);  addmm_1 = None
        mul_8 = torch.ops.aten.mul.Tensor(mul_7, sigmoid_1);  mul_7 = sigmoid_1 = None
        tanh_1 = torch.ops.aten.tanh.default(mul_8)
        mul_9 = torch.ops.aten.mul.Tensor(tanh_1, 0.1);  tanh_1 = None
        add_3 = torch.ops.aten.add.Tensor(mul_8, mul_9);  mul_8 = mul_9 = None
        permute_2 = torch.ops.aten.permute.default(arg5_1, [1, 0]);  arg5_1 = None
        addmm_2 = torch.ops.aten.addmm.default(arg6_1, add_3, permute_2);  arg6_1 = add_3 = permute_2 = None
        mul_10 = torch.ops.aten.mul.Tensor(addmm_2, 0.5)
        mul_11 = torch.ops.aten.mul.Tensor(addmm_2, 0.7071067811865476)
        erf_2 = torch.ops.aten.erf.default(mul_11);  mul_11 = None
        add_4 = torch.ops.aten.add.Tensor(erf_2, 1);  erf_2 = None
        mul_12 = torch.ops.aten.mul.Tensor(mul_10, add_4);  mul_10 = add_4 = None
        sigmoid_2 = torch.ops.aten.sigmoid.default(addmm_2);  addmm_2 = None
        mul_13 = torch.ops.aten.mul.Tensor(mul_12, sigmoid_2);  mul_12 = sigmoid_2 = None
        tanh_2 = torch.ops.aten.tanh.default(mul_13)
        mul_14 = torch.ops.aten.mul.Tensor(tanh_2, 0.1);  tanh_2 = None
        add_5 = torch.ops.aten.add.Tensor(mul_13, mul_14);  mul_13 = mul_14 = None
        permute_3 = torch.ops.aten.permute.default(arg7_1, [1, 0]);  arg7_1 = None
        addmm_3 = torch.ops.aten.addmm.default(arg8_1, add_5, permute_3);  arg8_1 = add_5 = permute_3 = None
        mul_15 = torch.ops.aten.mul.Tensor(addmm_3, 0.5)
        mul_16 = torch.ops.aten.mul.Tensor(addmm_3, 0.7071067811865476)
        erf_3 = torch.ops.aten.erf.default(mul_16);  mul_16 = None
        add_6 = torch.ops.aten.add.Tensor(erf_3, 1);  erf_3 = None
        mul_17 = torch.ops.aten.mul.Tensor(mul_15, add_6);  mul_15 = add_6 = None
        sigmoid_3 = torch.ops.aten.sigmoid.default(addmm_3);  addmm_3 = None
        mul_18 = torch.ops.aten.mul.Tensor(mul_17, sigmoid_3);  mul_17 = sigmoid_3 = None
        tanh_3 = torch.ops.aten.tanh.default(mul_18)
        mul_19 = torch.ops.aten.mul.Tensor(tanh_3, 0.1);  tanh_3 = None
        add_7 = torch.ops.aten.add.Tensor(mul_18, mul_19);  mul_18 = mul_19 = None
        permute_4 = torch.ops.aten.permute.default(arg9_1, [1, 0]);  arg9_1 = None
        addmm_4 = torch.ops.aten.addmm.default(arg10_1, add_7, permute_4);  arg10_1 = add_7 = permute_4 = None
        mul_20 = torch.ops.aten.mul.Tensor(addmm_4, 0.5)
        mul_21 = torch.ops.aten.mul.Tensor(addmm_4, 0.7071067811865476)
        erf_4 = torch.ops.aten.erf.default(mul_21);  mul_21 = None
        add_8 = torch.ops.aten.add.Tensor(erf_4, 1);  erf_4 = None
        mul_22 = torch.ops.aten.mul.Tensor(mul_20, add_8);  mul_20 = add_8 = None
        sigmoid_4 = torch.ops.aten.sigmoid.default(addmm_4);  addmm_4 = None
        mul_23 = torch.ops.aten.mul.Tensor(mul_22, sigmoid_4);  mul_22 = sigmoid_4 = None
        tanh_4 = torch.ops.aten.tanh.default(mul_23)
        mul_24 = torch.ops.aten.mul.Tensor(tanh_4, 0.1);  tanh_4 = None
        add_9 = torch.ops.aten.add.Tensor(mul_23, mul_24);  mul_23 = mul_24 = None
        permute_5 = torch.ops.aten.permute.default(arg11_1, [1, 0]);  arg11_1 = None
        addmm_5 = torch.ops.aten.addmm.default(arg12_1, add_9, permute_5);  arg12_1 = add_9 = permute_5 = None
        mul_25 = torch.ops.aten.mul.Tensor(addmm_5, 0.5)
        mul_26 = torch.ops.aten.mul.Tensor(addmm_5, 0.7071067811865476)
        erf_5 = torch.ops.aten.erf.default(mul_26);  mul_26 = None
        add_10 = torch.ops.aten.add.Tensor(erf_5, 1);  erf_5 = None
        mul_27 = torch.ops.aten.mul.Tensor(mul_25, add_10);  mul_25 = add_10 = None
        sigmoid_5 = torch.ops.aten.sigmoid.default(addmm_5);  addmm_5 = None
        mul_28 = torch.ops.aten.mul.Tensor(mul_27, sigmoid_5);  mul_27 = sigmoid_5 = None
        tanh_5 = torch.ops.aten.tanh.default(mul_28)
        mul_29 = torch.ops.aten.mul.Tensor(tanh_5, 0.1);  tanh_5 = None
        add_11 = torch.ops.aten.add.Tensor(mul_28, mul_29);  mul_28 = mul_29 = None
        permute_6 = torch.ops.aten.permute.default(arg13_1, [1, 0]);  arg13_1 = None
        addmm_6 = torch.ops.aten.addmm.default(arg14_1, add_11, permute_6);  arg14_1 = add_11 = permute_6 = None
        relu = torch.ops.aten.relu.default(addmm_6);  addmm_6 = None
        tanh_6 = torch.ops.aten.tanh.default(relu)
        mul_30 = torch.ops.aten.mul.Tensor(tanh_6, 0.1);  tanh_6 = None
        add_12 = torch.ops.aten.add.Tensor(relu, mul_30);  relu = mul_30 = None
        permute_7 = torch.ops.aten.permute.default(arg15_1, [1, 0]);  arg15_1 = None
        addmm_7 = torch.ops.aten.addmm.default(arg16_1, add_12, permute_7);  arg16_1 = add_12 = permute_7 = None
        mul_31 = torch.ops.aten.mul.Tensor(addmm_7, 0.5)
        mul_32 = torch.ops.aten.mul.Tensor(addmm_7, 0.7071067811865476)
        erf_6 = torch.ops.aten.erf.default(mul_32);  mul_32 = None
        add_13 = torch.ops.aten.add.Tensor(erf_6, 1);  erf_6 = None
        mul_33 = torch.ops.aten.mul.Tensor(mul_31, add_13);  mul_31 = add_13 = None
        sigmoid_6 = torch.ops.aten.sigmoid.default(addmm_7);  addmm_7 = None
        mul_34 = torch.ops.aten.mul.Tensor(mul_33, sigmoid_6);  mul_33 = sigmoid_6 = None
        tanh_7 = torch.ops.aten.tanh.default(mul_34)
        mul_35 = torch.ops.aten.mul.Tensor(tanh_7, 0.1);  tanh_7 = None
        add_14 = torch.ops.aten.add.Tensor(mul_34, mul_35);  mul_34 = mul_35 = None
        permute_8 = torch.ops.aten.permute.default(arg17_1, [1, 0]);  arg17_1 = None
        addmm_8 = torch.ops.aten.addmm.default(arg18_1, add_14, permute_8);  arg18_1 = add_14 = permute_8 = None
        mul_36 = torch.ops.aten.mul.Tensor(addmm_8, 0.5)
        mul_37 = torch.ops.aten.mul.Tensor(addmm_8, 0.7071067811865476)
        erf_7 = torch.ops.aten.erf.default(mul_37);  mul_37 = None
        add_15 = torch.ops.aten.add.Tensor(erf_7, 1);  erf_7 = None
        mul_38 = torch.ops.aten.mul.Tensor(mul_36, add_15);  mul_36 = add_15 = None
        sigmoid_7 = torch.ops.aten.sigmoid.default(addmm_8);  addmm_8 = None
        mul_39 = torch.ops.aten.mul.Tensor(mul_38, sigmoid_7);  mul_38 = sigmoid_7 = None
        tanh_8 = torch.ops.aten.tanh.default(mul_39)
        mul_40 = torch.ops.aten.mul.Tensor(tanh_8, 0.1);  tanh_8 = None
        add_16 = torch.ops.aten.add.Tensor(mul_39, mul_40);  mul_39 = mul_40 = None
        permute_9 = torch.ops.aten.permute.default(arg19_1, [1, 0]);  arg19_1 = None
        addmm_9 = torch.ops.aten.addmm.default(arg20_1, add_16, permute_9);  arg20_1 = add_16 = permute_9 = None
        mul_41 = torch.ops.aten.mul.Tensor(addmm_9, 0.5)
        mul_42 = torch.ops.aten.mul.Tensor(addmm_9, 0.7071067811865476)
        erf_8 = torch.ops.aten.erf.default(mul_42);  mul_42 = None
        add_17 = torch.ops.aten.add.Tensor(erf_8, 1);  erf_8 = None
        mul_43 = torch.ops.aten.mul.Tensor(mul_41, add_17);  mul_41 = add_17 = None
        sigmoid_8 = torch.ops.aten.sigmoid.default(addmm_9);  addmm_9 = None
        mul_44 = torch.ops.aten.mul.Tensor(mul_43, sigmoid_8);  mul_43 = sigmoid_8 = None
        tanh_9 = torch.ops.aten.tanh.default(mul_44)
        mul_45 = torch.ops.aten.mul.Tensor(tanh_9, 0.1);  tanh_9 = None
        add_18 = torch.ops.aten.add.Tensor(mul_44, mul_45);  mul_44 = mul_45 = None
        permute_10 = torch.ops.aten.permute.default(arg21_1, [1, 0]);  arg21_1 = None
        addmm_10 = torch.ops.aten.addmm.default(arg22_1, add_18, permute_10);  arg22_1 = add_18 = permute_10 = None
        mul_46 = torch.ops.aten.mul.Tensor(addmm_10, 0.5)
        mul_47 = torch.ops.aten.mul.Tensor(addmm_10, 0.7071067811865476)
        erf_9 = torch.ops.aten.erf.default(mul_47);  mul_47 = None
        add_19 = torch.ops.aten.add.Tensor(erf_9, 1);  erf_9 = None
        mul_48 = torch.ops.aten.mul.Tensor(mul_46, add_19);  mul_46 = add_19 = None
        sigmoid_9 = torch.ops.aten.sigmoid.default(addmm_10);  addmm_10 = None
        mul_49 = torch.ops.aten.mul.Tensor(mul_48, sigmoid_9);  mul_48 = sigmoid_9 = None
        tanh_10 = torch.ops.aten.tanh.default(mul_49)
        mul_50 = torch.ops.aten.mul.Tensor(tanh_10, 0.1);  tanh_10 = None
        add_20 = torch.ops.aten.add.Tensor(mul_49, mul_50);  mul_49 = mul_50 = None
        permute_11 = torch.ops.aten.permute.default(arg23_1, [1, 0]);  arg23_1 = None
        addmm_11 = torch.ops.aten.addmm.default(arg24_1, add_20, permute_11);  arg24_1 = add_20 = permute_11 = None
        mul_51 = torch.ops.aten.mul.Tensor(addmm_11, 0.5)
        mul_52 = torch.ops.aten.mul.Tensor(addmm_11, 0.7071067811865476)
        erf_10 = torch.ops.aten.erf.default(mul_52);  mul_52 = None
        add_21 = torch.ops.aten.add.Tensor(erf_10, 1);  erf_10 = None
        mul_53 = torch.ops.aten.mul.Tensor(mul_51, add_21);  mul_51 = add_21 = None
        sigmoid_10 = torch.ops.aten.sigmoid.default(addmm_11);  addmm_11 = None
        mul_54 = torch.ops.aten.mul.Tensor(mul_53, sigmoid_10);  mul_53 = sigmoid_10 = None
        tanh_11 = torch.ops.aten.tanh.default(mul_54)
        mul_55 = torch.ops.aten.mul.Tensor(tanh_11, 0.1);  tanh_11 = None
        add_22 = torch.ops.aten.add.Tensor(mul_54, mul_55);  mul_54 = mul_55 = None
        return (add_22,)

def load_args(reader):
    buf0 = reader.storage('274390df51b8eff1808edbcc1f59b050a27ed86c', 4096)
    reader.tensor(buf0, (32, 32), requires_grad=True, is_leaf=True)  # arg0_1
    buf1 = reader.storage('0216165c62b281f45bcf4aa669970f559a132dc0', 128)
    reader.tensor(buf1, (32,), requires_grad=True, is_leaf=True)  # arg1_1
    buf2 = reader.storage('b656ec50330747a52b5d8a7f70b2ead07ae5b8fb', 1024)
    reader.tensor(buf2, (8, 32), is_leaf=True)  # arg2_1
    buf3 = reader.storage('cfc32ff72fcaf84f9eb5561f04745297fb1e40c9', 4096)
    reader.tensor(buf3, (32, 32), requires_grad=True, is_leaf=True)  # arg3_1
    buf4 = reader.storage('1d224f58200d23d7cbfd02721c8323f69fa5d948', 128)
    reader.tensor(buf4, (32,), requires_grad=True, is_leaf=True)  # arg4_1
    buf5 = reader.storage('f295a6cc92a54f2e975840a314579562676a961f', 4096)
    reader.tensor(buf5, (32, 32), requires_grad=True, is_leaf=True)  # arg5_1
    buf6 = reader.storage('cc225dfd4de69ab1c5aeeaf055ae88d91cafc9bd', 128)
    reader.tensor(buf6, (32,), requires_grad=True, is_leaf=True)  # arg6_1
    buf7 = reader.storage('7686825e8678a5ff9c494118f3ba68d16481a870', 4096)
    reader.tensor(buf7, (32, 32), requires_grad=True, is_leaf=True)  # arg7_1
    buf8 = reader.storage('dc12df7e97130d9eab3437fa4affa2db33b4b6ac', 128)
    reader.tensor(buf8, (32,), requires_grad=True, is_leaf=True)  # arg8_1
    buf9 = reader.storage('d8cb663f533dc6edb204941866a6af4d9b8542f6', 4096)
    reader.tensor(buf9, (32, 32), requires_grad=True, is_leaf=True)  # arg9_1
    buf10 = reader.storage('6763b8ddd3994e41eaa94af17eaf2a95c39d7e25', 128)
    reader.tensor(buf10, (32,), requires_grad=True, is_leaf=True)  # arg10_1
    buf11 = reader.storage('bead1c491e7ef05a7f499640a73264d4e7e126ae', 4096)
    reader.tensor(buf11, (32, 32), requires_grad=True, is_leaf=True)  # arg11_1
    buf12 = reader.storage('f6411e18f4b6a575b16aeea3ede46ac56e6e244d', 128)
    reader.tensor(buf12, (32,), requires_grad=True, is_leaf=True)  # arg12_1
    buf13 = reader.storage('1fac62f1394efb5702ce4fd04d6655ae646b1744', 4096)
    reader.tensor(buf13, (32, 32), requires_grad=True, is_leaf=True)  # arg13_1
    buf14 = reader.storage('558b448bdbfabb17df8a793bb5daa66d7b76eb72', 128)
    reader.tensor(buf14, (32,), requires_grad=True, is_leaf=True)  # arg14_1
    buf15 = reader.storage('50caaa6a3c42572ba752e957a2e3aff0d5b3523c', 4096)
    reader.tensor(buf15, (32, 32), requires_grad=True, is_leaf=True)  # arg15_1
    buf16 = reader.storage('7e5baef7fea7b61817add7f7f8f338289cfa54fe', 128)
    reader.tensor(buf16, (32,), requires_grad=True, is_leaf=True)  # arg16_1
    buf17 = reader.storage('851a08c0dc262337dfd5ba8cce34fd936f74ce9d', 4096)
    reader.tensor(buf17, (32, 32), requires_grad=True, is_leaf=True)  # arg17_1
    buf18 = reader.storage('f3dd799f3e38f11eb62c3a07cd441ce166f51a41', 128)
    reader.tensor(buf18, (32,), requires_grad=True, is_leaf=True)  # arg18_1
    buf19 = reader.storage('2213475c7753bc517a67084027b2c49e7628db40', 4096)
    reader.tensor(buf19, (32, 32), requires_grad=True, is_leaf=True)  # arg19_1
    buf20 = reader.storage('ef8b60d637bc4782188dbb06bf5d0a8037980ea1', 128)
    reader.tensor(buf20, (32,), requires_grad=True, is_leaf=True)  # arg20_1
    buf21 = reader.storage('ec0fcfaca6869a42ff5d3d0ef67ad669ad113d45', 4096)
    reader.tensor(buf21, (32, 32), requires_grad=True, is_leaf=True)  # arg21_1
    buf22 = reader.storage('8595a70f02d16582e28dbc90843968fe4d08c361', 128)
    reader.tensor(buf22, (32,), requires_grad=True, is_leaf=True)  # arg22_1
    buf23 = reader.storage('eaff15e24bb5d72c723983e4eb389c41eceb7da5', 4096)
    reader.tensor(buf23, (32, 32), requires_grad=True, is_leaf=True)  # arg23_1
    buf24 = reader.storage('d07663e8ee6838b75b3f47767725596524bd1ead', 128)
    reader.tensor(buf24, (32,), requires_grad=True, is_leaf=True)  # arg24_1
load_args._version = 0
mod = Repro()
if __name__ == '__main__':
    from torch._dynamo.repro.after_aot import run_repro
    with torch.no_grad():
        run_repro(mod, load_args, accuracy=True, command='run', save_dir='/tmp/tmpvzag5xee/pytorch-minifier/run_2026_11_22_12_17_01_328712-pid_15633/minifier/checkpoints', tracing_mode='real', check_str=None)
        # To run it separately, do 
        # mod, args = run_repro(mod, load_args, accuracy=True, command='get_args', save_dir='/tmp/tmpvzag5xee/pytorch-minifier/run_2026_11_22_12_17_01_328712-pid_15633/minifier/checkpoints', tracing_mode='real', check_str=None)
        # mod(*args)