# AOT ID: ['1_inference']
from ctypes import c_void_p, c_long, c_int
import torch
import math
import random
import os
import tempfile
from math import inf, nan
from cmath import nanj
from torch._inductor.hooks import run_intermediate_hooks
from torch._inductor.utils import maybe_profile
from torch._inductor.codegen.memory_planning import _align as align
from torch import device, empty_strided
from torch._inductor.async_compile import AsyncCompile
from torch._inductor.select_algorithm import extern_kernels
import triton
import triton.language as tl
from torch._inductor.runtime.triton_heuristics import start_graph, end_graph
from torch._C import _cuda_getCurrentRawStream as get_raw_stream

aten = torch.ops.aten
inductor_ops = torch.ops.inductor
_quantized = torch.ops._quantized
assert_size_stride = torch._C._dynamo.guards.assert_size_stride
assert_alignment = torch._C._dynamo.guards.assert_alignment
empty_strided_cpu = torch._C._dynamo.guards._empty_strided_cpu
empty_strided_cpu_pinned = torch._C._dynamo.guards._empty_strided_cpu_pinned
empty_strided_cuda = torch._C._dynamo.guards._empty_strided_cuda
empty_strided_xpu = torch._C._dynamo.guards._empty_strided_xpu
empty_strided_mtia = torch._C._dynamo.guards._empty_strided_mtia
reinterpret_tensor = torch._C._dynamo.guards._reinterpret_tensor
alloc_from_pool = torch.ops.inductor._alloc_from_pool
async_compile = AsyncCompile()
empty_strided_p2p = torch._C._distributed_c10d._SymmetricMemory.empty_strided_p2p


# kernel path: /tmp/torchinductor_root/ql/cqlg5sleodhsgiqykurrsnnmjtjwgywsan54e5flsm6wukqdr7x5.py
# Topologically Sorted Source Nodes: [mul, add, logsumexp], Original ATen: [aten.mul, aten.add, aten.logsumexp]
# Source node to ATen node mapping:
#   add => add
#   logsumexp => abs_1, add_1, amax, convert_element_type, convert_element_type_1, eq, exp, full_default, log, squeeze, sub, sum_1, where
#   mul => mul
# Graph fragment:
#   %arg0_1 : Tensor "bf16[65536, 94][1, 65536]cuda:0" = PlaceHolder[target=arg0_1]
#   %arg1_1 : Tensor "bf16[94][1]cuda:0" = PlaceHolder[target=arg1_1]
#   %mul : Tensor "bf16[65536, 94][1, 65536]cuda:0" = PlaceHolder[target=mul]
#   %arg2_1 : Tensor "bf16[94][1]cuda:0" = PlaceHolder[target=arg2_1]
#   %add : Tensor "bf16[65536, 94][1, 65536]cuda:0" = PlaceHolder[target=add]
#   %amax : Tensor "f32[65536, 1][1, 65536]cuda:0" = PlaceHolder[target=amax]
#   %sum_1 : Tensor "f32[65536][1]cuda:0" = PlaceHolder[target=sum_1]
#   %mul : Tensor "bf16[65536, 94][1, 65536]cuda:0"[num_users=2] = call_function[target=torch.ops.aten.mul.Tensor](args = (%arg0_1, %arg1_1), kwargs = {})
#   %add : Tensor "bf16[65536, 94][1, 65536]cuda:0"[num_users=2] = call_function[target=torch.ops.aten.add.Tensor](args = (%mul, %arg2_1), kwargs = {})
#   %convert_element_type : Tensor "f32[65536, 94][1, 65536]cuda:0"[num_users=2] = call_function[target=torch.ops.prims.convert_element_type.default](args = (%add, torch.float32), kwargs = {})
#   %amax : Tensor "f32[65536, 1][1, 1]cuda:0"[num_users=2] = call_function[target=torch.ops.aten.amax.default](args = (%convert_element_type, [-1], True), kwargs = {})
#   %abs_1 : Tensor "f32[65536, 1][1, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.abs.default](args = (%amax,), kwargs = {})
#   %eq : Tensor "b8[65536, 1][1, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.eq.Scalar](args = (%abs_1, inf), kwargs = {})
#   %full_default : Tensor "f32[][]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.full.default](args = ([], 0.0), kwargs = {dtype: torch.float32, layout: torch.strided, device: cuda:0, pin_memory: False})
#   %where : Tensor "f32[65536, 1][1, 1]cuda:0"[num_users=2] = call_function[target=torch.ops.aten.where.self](args = (%eq, %full_default, %amax), kwargs = {})
#   %sub : Tensor "f32[65536, 94][1, 65536]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.sub.Tensor](args = (%convert_element_type, %where), kwargs = {})
#   %exp : Tensor "f32[65536, 94][1, 65536]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.exp.default](args = (%sub,), kwargs = {})
#   %sum_1 : Tensor "f32[65536][1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.sum.dim_IntList](args = (%exp, [-1]), kwargs = {})
#   %log : Tensor "f32[65536][1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.log.default](args = (%sum_1,), kwargs = {})
#   %squeeze : Tensor "f32[65536][1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.squeeze.dims](args = (%where, [-1]), kwargs = {})
#   %add_1 : Tensor "f32[65536][1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.add.Tensor](args = (%log, %squeeze), kwargs = {})
#   %convert_element_type_1 : Tensor "bf16[65536][1]cuda:0"[num_users=1] = call_function[target=torch.ops.prims.convert_element_type.default](args = (%add_1, torch.bfloat16), kwargs = {})
#   return %mul,%add,%amax,%sum_1,%convert_element_type_1
triton_red_fused_add_logsumexp_mul_0 = async_compile.triton('triton_red_fused_add_logsumexp_mul_0', '''
import triton
import triton.language as tl

from torch._inductor.runtime import triton_helpers, triton_heuristics
from torch._inductor.runtime.triton_helpers import libdevice, math as tl_math
from torch._inductor.runtime.hints import AutotuneHint, ReductionHint, TileHint, DeviceProperties
triton_helpers.set_driver_to_gpu()

@triton_heuristics.reduction(
    size_hints={'x': 65536, 'r0_': 128},
    reduction_hint=ReductionHint.DEFAULT,
    filename=__file__,
    triton_meta={'signature': {'in_ptr0': '*bf16', 'in_ptr1': '*bf16', 'in_ptr2': '*bf16', 'out_ptr0': '*bf16', 'out_ptr1': '*bf16', 'out_ptr4': '*bf16', 'xnumel': 'i32', 'r0_numel': 'i32', 'XBLOCK': 'constexpr', 'R0_BLOCK': 'constexpr'}, 'device': DeviceProperties(type='cuda', index=0, multi_processor_count=132, cc=90, major=9, regs_per_multiprocessor=65536, max_threads_per_multi_processor=2048, max_threads_per_block=1024, warp_size=32), 'constants': {}, 'native_matmul': False, 'enable_fp_fusion': True, 'launch_pdl': False, 'disable_ftz': False, 'configs': [{(0,): [['tt.divisibility', 16]], (1,): [['tt.divisibility', 16]], (2,): [['tt.divisibility', 16]], (3,): [['tt.divisibility', 16]], (4,): [['tt.divisibility', 16]], (5,): [['tt.divisibility', 16]], (6,): [['tt.divisibility', 16]]}]},
    inductor_meta={'grid_type': 'Grid1D', 'autotune_hints': set(), 'kernel_name': 'triton_red_fused_add_logsumexp_mul_0', 'mutated_arg_names': [], 'optimize_mem': True, 'no_x_dim': False, 'atomic_add_found': False, 'num_load': 4, 'num_store': 3, 'num_reduction': 2, 'backend_hash': '91D1D1166449D9E2EB66EB9770C9E2C3B0FEB787341F27FEB4D3F0338DA50336', 'assert_indirect_indexing': True, 'autotune_local_cache': True, 'autotune_pointwise': True, 'autotune_remote_cache': None, 'force_disable_caches': False, 'dynamic_scale_rblock': True, 'max_autotune': False, 'max_autotune_pointwise': False, 'min_split_scan_rblock': 256, 'spill_threshold': 16, 'store_cubin': False, 'deterministic': False, 'force_filter_reduction_configs': False, 'mix_order_reduction_allow_multi_stages': False, 'are_deterministic_algorithms_enabled': False, 'tiling_scores': {'x': 61865984, 'r0_': 376}}
)
@triton.jit
def triton_red_fused_add_logsumexp_mul_0(in_ptr0, in_ptr1, in_ptr2, out_ptr0, out_ptr1, out_ptr4, xnumel, r0_numel, XBLOCK : tl.constexpr, R0_BLOCK : tl.constexpr):
    xnumel = 65536
    r0_numel = 94
    rnumel = r0_numel
    RBLOCK: tl.constexpr = R0_BLOCK
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[:, None]
    xmask = tl.full([XBLOCK], True, tl.int1)[:, None]
    r0_base = tl.arange(0, R0_BLOCK)[None, :]
    rbase = r0_base
    x0 = xindex
    _tmp7 = tl.full([XBLOCK, R0_BLOCK], float("-inf"), tl.float32)
    for r0_offset in tl.range(0, r0_numel, R0_BLOCK):
        r0_index = r0_offset + r0_base
        r0_mask = r0_index < r0_numel
        roffset = r0_offset
        rindex = r0_index
        r0_1 = r0_index
        tmp0 = tl.load(in_ptr0 + (x0 + 65536*r0_1), r0_mask, eviction_policy='evict_first', other=0.0).to(tl.float32)
        tmp1 = tl.load(in_ptr1 + (r0_1), r0_mask, eviction_policy='evict_last', other=0.0).to(tl.float32)
        tmp3 = tl.load(in_ptr2 + (r0_1), r0_mask, eviction_policy='evict_last', other=0.0).to(tl.float32)
        tmp2 = tmp0 * tmp1
        tmp4 = tmp2 + tmp3
        tmp5 = tmp4.to(tl.float32)
        tmp6 = tl.broadcast_to(tmp5, [XBLOCK, R0_BLOCK])
        tmp8 = triton_helpers.maximum(_tmp7, tmp6)
        _tmp7 = tl.where(r0_mask, tmp8, _tmp7)
        tl.store(out_ptr0 + (x0 + 65536*r0_1), tmp2, r0_mask)
        tl.store(out_ptr1 + (x0 + 65536*r0_1), tmp4, r0_mask)
    tmp7 = triton_helpers.max2(_tmp7, 1)[:, None]
    _tmp19 = tl.full([XBLOCK, R0_BLOCK], 0, tl.float32)
    for r0_offset in tl.range(0, r0_numel, R0_BLOCK):
        r0_index = r0_offset + r0_base
        r0_mask = r0_index < r0_numel
        roffset = r0_offset
        rindex = r0_index
        r0_1 = r0_index
        tmp9 = tl.load(out_ptr1 + (x0 + 65536*r0_1), r0_mask, eviction_policy='evict_first', other=0.0).to(tl.float32)
        tmp10 = tmp9.to(tl.float32)
        tmp11 = tl_math.abs(tmp7)
        tmp12 = tl.full([1, 1], float("inf"), tl.float32)
        tmp13 = tmp11 == tmp12
        tmp14 = tl.full([1, 1], 0.0, tl.float32)
        tmp15 = tl.where(tmp13, tmp14, tmp7)
        tmp16 = tmp10 - tmp15
        tmp17 = libdevice.exp(tmp16)
        tmp18 = tl.broadcast_to(tmp17, [XBLOCK, R0_BLOCK])
        tmp20 = _tmp19 + tmp18
        _tmp19 = tl.where(r0_mask, tmp20, _tmp19)
    tmp19 = tl.sum(_tmp19, 1)[:, None]
    tmp21 = tl_math.log(tmp19)
    tmp22 = tl_math.abs(tmp7)
    tmp23 = tl.full([1, 1], float("inf"), tl.float32)
    tmp24 = tmp22 == tmp23
    tmp25 = tl.full([1, 1], 0.0, tl.float32)
    tmp26 = tl.where(tmp24, tmp25, tmp7)
    tmp27 = tmp21 + tmp26
    tmp28 = tmp27.to(tl.float32)
    tl.store(out_ptr4 + (x0), tmp28, None)
''', device_str='cuda')


async_compile.wait(globals())
del async_compile

class Runner:
    def __init__(self, partitions):
        self.partitions = partitions

    def recursively_apply_fns(self, fns):
        new_callables = []
        for fn, c in zip(fns, self.partitions):
            new_callables.append(fn(c))
        self.partitions = new_callables

    def call(self, args):
        arg0_1, arg1_1, arg2_1 = args
        args.clear()
        assert_size_stride(arg0_1, (65536, 94), (1, 65536))
        assert_size_stride(arg1_1, (94, ), (1, ))
        assert_size_stride(arg2_1, (94, ), (1, ))
        with torch.cuda._DeviceGuard(0):
            torch.cuda.set_device(0)
            buf0 = empty_strided_cuda((65536, 94), (1, 65536), torch.bfloat16)
            buf1 = empty_strided_cuda((65536, 94), (1, 65536), torch.bfloat16)
            buf4 = empty_strided_cuda((65536, ), (1, ), torch.bfloat16)
            # Topologically Sorted Source Nodes: [mul, add, logsumexp], Original ATen: [aten.mul, aten.add, aten.logsumexp]
            stream0 = get_raw_stream(0)
            triton_red_fused_add_logsumexp_mul_0.run(arg0_1, arg1_1, arg2_1, buf0, buf1, buf4, 65536, 94, stream=stream0)
            del arg0_1
            del arg1_1
            del arg2_1
        return (buf4, buf1, buf0, )

runner = Runner(partitions=[])
call = runner.call
recursively_apply_fns = runner.recursively_apply_fns


def get_args():
    from torch._dynamo.testing import rand_strided
    arg0_1 = rand_strided((65536, 94), (1, 65536), device='cuda:0', dtype=torch.bfloat16)
    arg1_1 = rand_strided((94, ), (1, ), device='cuda:0', dtype=torch.bfloat16)
    arg2_1 = rand_strided((94, ), (1, ), device='cuda:0', dtype=torch.bfloat16)
    return [arg0_1, arg1_1, arg2_1]


def benchmark_compiled_module(args, times=10, repeat=10):
    from torch._inductor.utils import print_performance
    fn = lambda: call(list(args))
    return print_performance(fn, times=times, repeat=repeat)


if __name__ == "__main__":
    from torch._inductor.wrapper_benchmark import compiled_module_main
    args = get_args()
    compiled_module_main('None', lambda times, repeat: benchmark_compiled_module(args, times=times, repeat=repeat))
