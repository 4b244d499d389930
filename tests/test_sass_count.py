"""benchmarks.sass_count's parser: instructions of a kernel and of each loop body (a backward branch)."""
from benchmarks.sass_count import counts

SASS = """
        /*0000*/                   MOV R1, c[0x0][0x28] ;
.L_x_0:
        /*0010*/                   LDG.E.128 R4, desc[UR4][R2.64] ;
        /*0020*/                   FFMA R6, R4, R5, -R7 ;
        /*0030*/              @!P0 BRA `(.L_x_0) ;
        /*0040*/                   MUFU.EX2 R8, R6 ;
        /*0050*/                   BRA `(.L_x_1) ;
.L_x_1:
        /*0060*/                   EXIT ;
"""


def test_counts_kernel_and_loop_bodies():
    total, loops = counts(SASS)
    assert total == 7
    assert loops == [(3, {"LDG": 1, "FFMA": 1, "BRA": 1})]  # the forward branch to .L_x_1 is no loop


def test_runtime_bound_puts_rnumel_back_and_loads_are_counted():
    from benchmarks.sass_count import ldg_count, runtime_bound
    src = "    for roffset in range(0, 4096, RBLOCK):\n    for roffset in range(0, 300, RBLOCK):\n"
    assert runtime_bound(src) == "    for roffset in range(0, rnumel, RBLOCK):\n" * 2
    assert ldg_count(SASS) == 1
