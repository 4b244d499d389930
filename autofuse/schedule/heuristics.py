"""All profitability decisions in one replaceable object (Inductor's `choices.py`, as a value).

Note: legality lives in `legality.py`; nothing here can make a program wrong. The search (and
plans) replace this object or subclass it; nothing patches module globals.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Mapping, Sequence

import torch

from ..codegen.config import LaunchConfig, next_pow2
from ..codegen.device import REFERENCE, DeviceFacts, device_facts
from ..codegen.options import KernelView, apply_defaults, option
from ..codegen.tiling import Tiling
from ..lower.conv_layout import ConvSite, channels_last_pays
from .fusion import FusionGroup, is_outer_reduction, merged_space, reorders_loops


@dataclass(frozen=True)
class FusionScore:
    """The seed document's five-part score; compared with Inductor's 16x memory rule."""

    template_score: int
    node_type_score: int
    memory_score: int
    buffer_overlap_score: int
    proximity_score: int
    memory_ratio: int = 16

    def __lt__(self, other: "FusionScore") -> bool:
        if self.template_score != other.template_score:
            return self.template_score < other.template_score
        hi = max(self.memory_score, other.memory_score)
        lo = min(self.memory_score, other.memory_score)
        if hi > lo * self.memory_ratio:
            return self.memory_score < other.memory_score
        return (self.node_type_score, self.memory_score, self.buffer_overlap_score, self.proximity_score) < (
            other.node_type_score, other.memory_score, other.buffer_overlap_score, other.proximity_score)


@dataclass(frozen=True)
class Heuristics:
    """Thresholds and scoring used by lowering (realize), the fusion loop and codegen (configs)."""

    realize_reads_threshold: int = 4
    realize_opcount_threshold: int = 30
    realize_acc_reads_threshold: int = 8
    realize_max_inline_ops: int = 256
    max_fusion_size: int = 64
    max_rounds: int = 10
    pairwise_attempts: int = 64
    memory_ratio: int = 16
    score_memory_threshold: int = 0
    persistent_rnumel_max: int = 1024
    looped_rblock_max: int = 2048
    looped_cache_hints: bool = True      # a looped row reduction's default carries cache hints (see launch_config)
    # a pointwise node may join a reduction's kernel with its loops reordered (schedule/loops.py), as
    # Inductor's loop_ordering_after_fusion lets it: softmax over a leading dim becomes one kernel
    reorder_loops: bool = True
    interpreter_block_elems: int = 1 << 16
    split_below_programs_per_sm: int = 2  # split a reduction whose x grid is smaller than 2 programs per SM...
    split_min_rnumel: int = 4096          # ...and whose rows are at least this long
    # warps in flight the split aims for, per SM (4 programs of 8 warps): a program of fewer warps
    # gets proportionally more programs. The SM count is the device's (codegen/device.py).
    split_target_warps_per_sm: int = 4 * 8
    split_min_chunk: int = 1024           # r elements per chunk, at least
    # the same three for an outer reduction (choose_split): its chunks step 16-32 rows at a time, so
    # two steps make a chunk, and a split is one launch with its workspace allocated once, so small
    # column reductions split too (BatchNorm's gradient sums over 512 channels of 32 x 7 x 7 ran on
    # 8 programs in 124 us; over 2048 channels of the same rows, at its best split, in 21;
    # docs/defaults.md)
    split_outer_min_rnumel: int = 1024
    split_outer_min_chunk: int = 32
    split_outer_min_elements: int = 1 << 16
    # enough for a whole-tensor reduction to fill a GPU of up to 256 SMs (Inductor splits 2^30
    # elements 8192 ways into a second kernel; here the partials are combined by one program)
    split_max: int = 1024
    # partials one x block's last program combines (XBLOCK x split): a column sum's 64 lanes get
    # fewer chunks than a row's one, so the combine's values stay in registers
    split_combine_max_elements: int = 1 << 13
    # a reduction over fewer elements is a few µs in one program; splitting it saves the GPU little
    # (set when a split was two launches: cross-entropy's mean over 8192 rows cost 30 µs of host
    # time split, 10 µs not; the search may still split it)
    split_min_elements: int = 1 << 20
    # convolutions' operand layout: "auto" (conv_channels_last decides), "as_given" or
    # "channels_last"; the plan records the layout taken and the search tries both (docs/defaults.md)
    conv_layout: str = "auto"
    # "auto" hands convolutions channels-last operands on CUDA by Inductor's rule (lower/conv_layout.py):
    # each convolution class's average channels-last time ratio, weighting its multiply-adds in
    # inference graphs, and the fewest convolutions per graph node that make the layout worth it
    conv_cl_time_ratio: tuple[tuple[str, float], ...] = (("grouped", 1.358), ("small", 0.783), ("in_out", 0.725),
                                                         ("default", 0.823))
    conv_cl_max_nodes_per_conv: int = 300
    # how a channels-last value is computed: "memory" iterates in NHWC order (loads and stores
    # contiguous in one dim); "logical" iterates N, C, H, W with channels-last strides (2-D tiles),
    # so a consumer that writes NCHW (a returned activation) can share its kernel; "auto": logical
    # for values from which a returned activation is computed without a convolution between
    # them, memory order elsewhere (docs/defaults.md)
    channels_last_loops: str = "auto"
    # pad a matrix product's unaligned K / N to 16 bytes (lower/matmul.py) when it is compute-bound:
    # at least this many multiply-adds, and rows enough that the padding copy is small beside it
    pad_matmul_min_macs: int = 1 << 26
    pad_matmul_min_rows: int = 128
    pad_matmul_devices: tuple[str, ...] = ("cuda",)  # cuBLAS's alignment rule; the CPU's BLAS has none
    # f32 products are padded only when TF32 may run them on tensor cores (docs/defaults.md)
    pad_matmul_f32_without_tf32: bool = False
    # a column sum over the rows a row reduction reads (a norm's weight gradient) runs as partials
    # inside the row kernel, then a sum of the partials (lower/column_partials.py): for columns of
    # at most a persistent row kernel's width, and enough rows to be worth a second kernel
    column_partials: bool = True
    column_partial_min_cols: int = 2
    column_partial_max_cols: int = 4096
    column_partial_min_rows: int = 1024
    column_partial_programs_per_sm: int = 4
    # a scan's row runs persistent up to this many elements (Inductor's persistent threshold for
    # inner reductions, which its scans share), else it loops over RBLOCK chunks carrying the prefix
    scan_persistent_max: int = 1024
    # rows of a sort shorter than this share a program up to this many elements (sort_config)
    sort_row_elems: int = 256
    # an outer reduction (r strided, x contiguous) runs persistent up to this many r elements, as
    # Inductor's outer reductions do: the whole [XBLOCK, RBLOCK] tile's loads issue at once instead
    # of one 16-row step at a time
    outer_persistent_rnumel_max: int = 64
    # ... and up to this many where the kernel reads its columns again after the reduction
    outer_reread_persistent_max: int = 1024
    # a looped outer reduction over fewer columns than this steps 32 columns by 32 rows (one
    # 128-byte line of f32 per row), so its split has twice the x blocks to spread; wider ones keep
    # 64 x 16 (docs/defaults.md)
    outer_narrow_columns: int = 4096
    # looped rows at least this long that are read again after their reduction step 4096 elements
    # on 16 warps; shorter ones keep the one-pass rows' config (docs/defaults.md)
    multipass_min_rnumel: int = 16384
    # online softmax rows carry cache hints by default (off: measured slower on the corpus)
    online_cache_hints: bool = False
    # an online softmax row steps at most this share of masked lanes (`online_rblock`)
    online_max_waste: float = 0.15
    # var / var_mean (and the norms decomposed into them): "shifted", one pass of two sibling sums
    # of x - K (K the row's first element; lower/reductions.py), or "two_pass", the mean's pass
    # and then the squared deviations' (a looped norm then reads its rows once more), or "auto":
    # two passes where the row fits a persistent kernel (both passes over registers, as Inductor's
    # persistent Welford does), shifted where it loops
    variance: str = "auto"

    def variance_in_one_pass(self, n: int, rows: bool = True) -> bool:
        """Does a variance over n elements take the shifted one-pass form? Not where its kernel is
        persistent (`rows`: the reduced dims are innermost in memory; else the reduction reads
        columns, persistent only up to `outer_persistent_rnumel_max`): there the shift costs a
        load of K at every element and saves no pass (BERT's bf16 layer norms, 8192 rows of 768,
        took 456 us per forward shifted on the H200, Inductor's two-pass persistent kernels
        221 us), while a looped kernel reads its input once less (var over the middle dim of
        [512, 384, 1000] f32: 1.02x torch.compile's time shifted, 1.85x in two passes)."""
        if self.variance == "auto":
            limit = self.persistent_rnumel_max if rows else self.outer_persistent_rnumel_max
            return next_pow2(max(n, 1)) > limit
        return self.variance == "shifted"

    def online_rblock(self, rblock: int, rnumel: int) -> int:
        """The step of an online softmax's looped row: `rblock` halved (down to 256) until the padded
        steps leave at most `online_max_waste` of their lanes masked, else the step that leaves the
        fewest. Its update computes an exponential at every lane, masked ones too, so a row just
        past a power of two (4099 elements in 2048-element steps: half the lanes idle) pays in
        compute; over the measured online kernels whose rows waste a third to a half of 2048-element
        steps, 256-1024 ran 10-41% faster (docs/defaults.md)."""
        def waste(r: int) -> float:
            return -(-rnumel // r) * r / rnumel - 1
        steps = [r for r in (rblock, rblock // 2, rblock // 4, rblock // 8) if r >= 256] or [rblock]
        return next((r for r in steps if waste(r) <= self.online_max_waste), min(steps, key=waste))

    # ---- lowering ---------------------------------------------------------------------
    def should_realize(self, num_uses: int, num_loads: int, num_buffers: int, op_count: int) -> bool:
        """Realize a lazy value instead of recomputing it in each consumer? A value with several uses
        counts its distinct loads, as Inductor does, so a pooling window read by several consumers is
        computed once; a value with one use counts the buffers it reads, so a window over a window
        (two max pools in a row) stays one kernel."""
        if num_uses > 1 and (num_loads > self.realize_reads_threshold or op_count > self.realize_opcount_threshold):
            return True
        return num_buffers > self.realize_acc_reads_threshold or op_count > self.realize_max_inline_ops

    def pad_matmul(self, device: torch.device, dtype: torch.dtype, m: int, k: int, n: int,
                   batch: Sequence[int] = ()) -> bool:
        """Pad a matrix product's K / N to 16-byte rows? (CUDA, floating point, unaligned, large.)
        f32 only where its products may run on tensor cores (TF32 allowed): without TF32, cuBLAS
        runs them on CUDA cores, where alignment gains nothing and the padding copy is pure cost."""
        if torch.device(device).type not in self.pad_matmul_devices or dtype not in (torch.float16, torch.bfloat16, torch.float32):
            return False
        if dtype == torch.float32 and not (self.pad_matmul_f32_without_tf32 or torch.backends.cuda.matmul.allow_tf32):
            return False
        per = 16 // dtype.itemsize
        if k % per == 0 and n % per == 0:
            return False
        macs = m * k * n * math.prod(batch)
        return macs >= self.pad_matmul_min_macs and m >= self.pad_matmul_min_rows

    def conv_channels_last(self, device: torch.device, dtype: torch.dtype, sites: Sequence["ConvSite"] = (),
                           graph_nodes: int = 0, training: bool = False) -> bool:
        """Hand a graph's convolutions channels-last operands? ("auto": on CUDA, for floating point,
        where Inductor's layout rule would: `conv_layout.channels_last_pays`.)"""
        if self.conv_layout == "auto":
            return (torch.device(device).type == "cuda" and dtype.is_floating_point
                    and channels_last_pays(sites, graph_nodes, training, dict(self.conv_cl_time_ratio),
                                           self.conv_cl_max_nodes_per_conv))
        return self.conv_layout == "channels_last"

    # ---- fusion -------------------------------------------------------------------------
    def score_fusion(self, a: "FusionGroup", b: "FusionGroup", shared_bytes: int) -> FusionScore:
        same_type = (a.is_reduction == b.is_reduction) and shared_bytes > 0
        proximity = -max(abs(a.min_order - b.max_order), abs(b.min_order - a.max_order))
        return FusionScore(2 if shared_bytes > 0 else 1, int(same_type), shared_bytes, 0, proximity, self.memory_ratio)

    def can_fuse_profitably(self, a: "FusionGroup", b: "FusionGroup", shared_bytes: int) -> str | None:
        """None if the fusion is worth taking, else why not."""
        if shared_bytes <= self.score_memory_threshold:
            return "no shared data"
        if len(a.nodes) + len(b.nodes) > self.max_fusion_size:
            return f"fusion would exceed {self.max_fusion_size} nodes"
        if not self.reorder_loops and reorders_loops(a, b):
            return "a node would run with its loops reordered (reorder_loops is off)"
        return self.why_not_keep_split(a, b)

    def why_not_keep_split(self, a: "FusionGroup", b: "FusionGroup") -> str | None:
        """None unless a reduction the GPU default would split (few outputs, long rows) would take in
        a node reading its value inside the r loop: the merged kernel could not split, and its few
        programs would run the whole reduction (a whole-tensor norm and the division by it: one
        program for 10^9 elements). Inductor splits such reductions before fusion, so they never
        fuse that way either; the consumer runs as its own kernel after the split one."""
        space = merged_space(a, b)
        if isinstance(space, str) or not space[2]:
            return None
        split = option("split")
        # the size rule first: the legality check traces the kernel's bodies (online softmax pairs)
        wanting = [g for g in (a, b) if g.is_reduction
                   and self.wants_split(g.numel, g.rnumel, is_outer_reduction(g, self.persistent_rnumel_max),
                                        device_facts(g.device))
                   and split.eligible(KernelView.of(g), False, 1) is None]
        if not wanting:
            return None
        merged = FusionGroup(sorted(a.nodes + b.nodes, key=lambda n: n.order), *space)
        why = split.eligible(KernelView.of(merged), False, 1)
        return None if why is None else f"the reduction would no longer split: {why}"

    def wants_split(self, numel: int, rnumel: int, outer: bool, device: DeviceFacts) -> bool:
        """Would the GPU default config of a splittable reduction over (numel, rnumel) split it?"""
        cfg = self._launch_config("reduction", numel, rnumel, False, outer)
        return self.choose_split(cfg, numel, rnumel, device, outer) > 1

    # ---- codegen -------------------------------------------------------------------------
    def launch_config(self, kind: str, numel: int, rnumel: int, interpret: bool, outer: bool = False,
                      legal: Mapping[str, bool] | None = None, device: DeviceFacts = REFERENCE,
                      tile: Tiling | None = None, passes: int = 1, writes_rows: bool = False,
                      strided: bool = False) -> LaunchConfig:
        """`outer`: the reduction walks memory with a stride (e.g. a column sum), so lanes must run
        along x, where memory is contiguous, and the r loop takes short steps. `legal`: option name
        -> whether the defaults may turn it on for the kernel (`codegen.options.default_legality`;
        a missing name is False). Where "split" is legal (codegen/split.py), a long reduction on the
        GPU with too few x blocks to fill the SMs gets more programs, as Inductor's split reductions
        do. Where "online" is legal (a softmax sum that may run in its max's loop, codegen/online.py),
        a looped kernel reads its rows once less. Where "cache_hints" is legal
        (codegen/cache_hints.py), a looped row reduction on the GPU gets them, as Inductor's looped
        kernels do: at this default (one row, RBLOCK 2048, 8 warps) they took rmsnorm 137.4 -> 129.8
        µs, the seed example at 16384x4096 137.6 -> 132.2 µs and layernorm 147.0 -> 146.0 µs on the
        H200 (docs/defaults.md). Online softmax kernels take them only with `online_cache_hints`;
        split and outer kernels were not measured with them and keep none. Where "YBLOCK" is legal,
        a pointwise kernel given `tile`, its (y, x) split, runs as 2-D tiles (codegen/tiling.py).
        `device`: the GPU's facts (its SM count sizes a split).
        `passes`: how many times a looped kernel walks its r range (`schedule.loops.r_passes`); a
        kernel that reads its rows again after a reduction (a norm, a softmax) wants more loads in
        flight per pass. `writes_rows`: an outer reduction's epilogue stores contiguously along r
        (`schedule.fusion.writes_along_r`). `strided`: a pointwise kernel reads with a small stride
        along its innermost dim (`schedule.fusion.reads_strided`: a pooling window)."""
        if kind == "sort":
            return self.sort_config(numel, rnumel, interpret)
        if kind == "scan":  # a reduction's config; scans take no split, online or cache hints
            return replace(self, persistent_rnumel_max=self.scan_persistent_max)._launch_config(
                "scan", numel, rnumel, interpret, outer)
        cfg = self._launch_config(kind, numel, rnumel, interpret, outer, passes, writes_rows, strided)
        return apply_defaults(self, cfg, kind, numel, rnumel, interpret, outer, device,
                              {} if legal is None else legal, tile)

    def sort_config(self, numel: int, rnumel: int, interpret: bool) -> LaunchConfig:
        """A row sort's kernel (codegen/scan.py) holds each row whole, on one warp: the network's
        steps across warps go through shared memory. On the H200, 32768 rows of 1021 f32 sorted
        for their values in 0.41 ms on one warp a row against 0.85-1.76 ms on 2-16 warps and
        0.91-2.76 ms with 2-4 rows a program; rows of 250 in 0.23 ms against 0.30 on 2 warps
        (docs/defaults.md). Rows shorter than `sort_row_elems` share a warp up to that many
        elements, and a strided row (a sort along a middle dim) takes the same rule (neither
        measured)."""
        rblock = next_pow2(max(rnumel, 1))
        if interpret:
            return LaunchConfig(XBLOCK=max(1, min(next_pow2(max(numel, 1)), self.interpreter_block_elems // rblock)),
                                RBLOCK=rblock, persistent=True)
        xblock = min(next_pow2(max(numel, 1)), max(1, self.sort_row_elems // rblock))
        return LaunchConfig(XBLOCK=xblock, RBLOCK=rblock, num_warps=1, persistent=True)

    def column_partial_config(self, numel: int, rnumel: int, interpret: bool) -> LaunchConfig:
        """A row kernel with column partials (codegen/columns.py) holds its rows whole: the
        persistent row rule, and rows wider than it takes one per step on a warp per 512
        elements (16 per thread: the row, its gradient and each column accumulator in registers)."""
        rblock = next_pow2(max(rnumel, 1))
        if interpret or rblock <= self.persistent_rnumel_max:
            wide = replace(self, persistent_rnumel_max=max(self.persistent_rnumel_max, rblock))
            return wide.launch_config("reduction", numel, rnumel, interpret)
        return LaunchConfig(XBLOCK=1, RBLOCK=rblock, num_warps=min(16, rblock // 512), persistent=True)

    def choose_split(self, cfg: LaunchConfig, numel: int, rnumel: int, device: DeviceFacts = REFERENCE,
                     outer: bool = False) -> int:
        """A power of two bringing the grid near `split_target_warps_per_sm` warps in flight on every
        SM of `device`; 1 when the x grid is already large enough, the rows too short, the whole
        reduction small (or the kernel persistent). An `outer` reduction (a column sum) splits from
        shorter columns, in shorter chunks: its x blocks are 32-64 columns wide, so a few thousand
        columns leave most SMs idle (a weight gradient's sum over 2048 tokens of 2048 features ran
        on 32 programs)."""
        xprograms = -(-max(numel, 1) // cfg.XBLOCK)
        min_rnumel, min_chunk, min_elements = (
            (self.split_outer_min_rnumel, self.split_outer_min_chunk, self.split_outer_min_elements) if outer
            else (self.split_min_rnumel, self.split_min_chunk, self.split_min_elements))
        if (cfg.persistent or rnumel < min_rnumel
                or xprograms >= self.split_below_programs_per_sm * device.sm_count
                or numel * rnumel < min_elements):
            return 1
        limit = min(self.split_max, self.split_combine_max_elements // cfg.XBLOCK,
                    self.split_target_warps_per_sm * device.sm_count // cfg.num_warps // xprograms,
                    rnumel // max(cfg.RBLOCK, min_chunk))
        split = 1
        while split * 2 <= limit:
            split *= 2
        return split

    def _launch_config(self, kind: str, numel: int, rnumel: int, interpret: bool, outer: bool,
                       passes: int = 1, writes_rows: bool = False, strided: bool = False) -> LaunchConfig:
        if kind == "pointwise":
            if interpret:
                return LaunchConfig(XBLOCK=min(next_pow2(max(numel, 1)), self.interpreter_block_elems))
            if strided:
                # Inductor's other pointwise config, 2 elements a lane: a strided read's lanes then
                # touch 4x fewer sectors per load (max pooling 3x3 / stride 2 over f32: 1.92 -> 1.03x
                # torch.compile's time; the same config made contiguous kernels 8-90% slower, bf16
                # the most; docs/defaults.md)
                return LaunchConfig(XBLOCK=min(512, next_pow2(max(numel, 1))), num_warps=8)
            # Inductor's pointwise block: 1024 elements on 4 warps, 8 per thread, so a 16-bit
            # dtype's loads are 16 bytes wide (8 warps gave bf16 8-byte loads: SiLU, GELU and
            # affine programs in bf16 ran at 1.10-1.19x torch.compile's time on the H200)
            xblock = min(1024, next_pow2(max(numel, 1)))
            return LaunchConfig(XBLOCK=xblock, num_warps=4)
        rblock_full = next_pow2(max(rnumel, 1))
        if outer and not interpret:
            # 64 lanes of 4 warps, 16-row steps: the fastest of 95 column-sum configs on the H200
            # (16384x4096 f32, split 16: 65.2 us against 70.8 us for 128 lanes of 8 warps, 32-row
            # steps)
            if passes > 1 and writes_rows and rblock_full > 16:
                # columns reduced, then an epilogue writing rows: 16 columns (whole sectors of the
                # column reads) by 128 rows (256-byte row stores in bf16) on 16 warps, looped; the
                # resident programs' columns stay in L2 for the second pass. A bf16 column mean
                # times a row vector: 177.6 us so against 748 at 64 x 16 looped and about 410 held
                # whole at 16 x 1024 (Inductor 155; docs/defaults.md)
                rblock = min(rblock_full, 128)
                return LaunchConfig(XBLOCK=min(16, next_pow2(max(numel, 1))), RBLOCK=rblock, num_warps=16,
                                    persistent=rblock == rblock_full)
            if passes > 1 and self.outer_persistent_rnumel_max < rblock_full <= self.outer_reread_persistent_max:
                # columns read again after their reduction (a softmax over a middle dim): the whole
                # column in registers, tiles of 8192 elements and at least 16 columns on 32 warps
                # (8 columns of f32 read half sectors); short steps re-read each column from DRAM
                # (the working set of the resident programs outgrows L2). Columns of at most 128:
                # tiles of 4096 on 16 warps (a transposed bf16 logsumexp over 94: 22.8 us against
                # 35.0 at 64 x 128 on 32 warps; docs/defaults.md)
                tile = 4096 if rblock_full <= 128 else 8192
                xblock = min(max(16, tile // rblock_full), next_pow2(max(numel, 1)))
                return LaunchConfig(XBLOCK=xblock, RBLOCK=rblock_full, persistent=True,
                                    num_warps=max(4, min(32, xblock * rblock_full // 256)))
            if 16 < rblock_full <= self.outer_persistent_rnumel_max:
                # the widest x block of Inductor's persistent choices (8, 32, 128 lanes) whose tile
                # stays within 4096 elements: 128 x 32 or 32 x 64, 8 warps
                xblock = min(next(x for x in (128, 32, 8, 1) if x * rblock_full <= 4096), next_pow2(max(numel, 1)))
                return LaunchConfig(XBLOCK=xblock, RBLOCK=rblock_full, num_warps=8 if xblock * rblock_full >= 2048
                                    else 4, persistent=True)
            narrow = numel < self.outer_narrow_columns
            xblock = min(32 if narrow else 64, next_pow2(max(numel, 1)))
            rblock = min(rblock_full, 32 if narrow else 16)
            return LaunchConfig(XBLOCK=xblock, RBLOCK=rblock, num_warps=4, persistent=rblock == rblock_full)
        if interpret:
            persistent = rblock_full <= 4096
            rblock = rblock_full if persistent else 4096
            xblock = max(1, min(next_pow2(max(numel, 1)), self.interpreter_block_elems // rblock))
            return LaunchConfig(XBLOCK=xblock, RBLOCK=rblock, persistent=persistent)
        if rblock_full <= self.persistent_rnumel_max:
            if rblock_full >= 512 and kind == "scan":
                # one row per program on 2 warps (a scan's combine spans the row): cumsum, cumprod
                # and an exclusive cumsum of 32768 rows of 1021 f32 ran 1-3% faster than on 4 warps
                # and than 2 rows per program (docs/defaults.md)
                return LaunchConfig(XBLOCK=1, RBLOCK=rblock_full, num_warps=rblock_full // 512, persistent=True)
            if rblock_full >= 512:
                # two rows per program on 2 warps: over the measured row kernels of 257-1024
                # elements, 7% faster than one row on 4 warps, 4% faster than 4 rows on 4 warps
                # (geomeans, docs/defaults.md)
                return LaunchConfig(XBLOCK=min(2, next_pow2(max(numel, 1))), RBLOCK=rblock_full, num_warps=2,
                                    persistent=True)
            if rblock_full >= 64:
                # eight rows of 33-128 elements per program on one warp, four rows of 129-256 on 2
                # warps (16 elements a thread: at 32, a layer norm over bf16 rows of 187 took 40.2 us
                # against 29.6): the fastest or nearly so over the measured row kernels of those
                # lengths (docs/defaults.md)
                rows = 8 if rblock_full <= 128 else 4
                return LaunchConfig(XBLOCK=min(rows, next_pow2(max(numel, 1))), RBLOCK=rblock_full,
                                    num_warps=max(1, rblock_full // 128), persistent=True)
            xblock = max(1, min(next_pow2(max(numel, 1)), 4096 // rblock_full, 64))
            warps = 4 if rblock_full * xblock <= 2048 else 8
            return LaunchConfig(XBLOCK=xblock, RBLOCK=rblock_full, num_warps=warps, persistent=True)
        if passes > 1 and rnumel >= self.multipass_min_rnumel:
            # a long looped row read again after its reduction: 4096-element steps on 16 warps
            # (multi-dim layer norms over 16 640 and 65 536 elements: 0.89 and 0.96x
            # torch.compile's time against 1.16 and 1.05x at 2048 on 8; docs/defaults.md)
            return LaunchConfig(XBLOCK=1, RBLOCK=min(rblock_full, 2 * self.looped_rblock_max), num_warps=16,
                                persistent=False)
        rblock = min(rblock_full, self.looped_rblock_max)
        return LaunchConfig(XBLOCK=1, RBLOCK=rblock, num_warps=8, persistent=False)
