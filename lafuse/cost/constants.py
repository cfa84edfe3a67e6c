"""Cost-model constants with units, in one place.

The hardware rates are defaults for a machine that has not been calibrated (``lafuse calibrate``
writes measured ones into the profile, see :mod:`lafuse.cost.profile`); they are deliberately
conservative (a small 2-core cloud VM). The operation weights say how many "simple element-wise
operation" units one cell of an operation costs (paper 001 sec. 4.2 weights division, exp, log...).
"""

from __future__ import annotations

# ---- default hardware rates (overridden by a calibrated profile)
DEFAULT_MEM_READ_BW = 6.0e9  # bytes/s, streaming read of a large float64 array
DEFAULT_MEM_WRITE_BW = 3.0e9  # bytes/s, streaming write into reused memory (first touch: FIRST_TOUCH_BW)
DEFAULT_CACHE_BW = 1.2e10  # bytes/s, read + written by an element-wise op whose operands fit the cache
DEFAULT_CACHE_BYTES = 8 * 2**20  # bytes, the last-level cache (calibrate reads the machine's)
CACHE_SHARE = 0.5  # of the last-level cache an operator's operands can count on (others' live data)
DEFAULT_BLAS_FLOPS = 2.0e10  # FLOP/s, dense matrix multiply through BLAS (all threads)
DEFAULT_ELEMENTWISE_RATE = 5.0e8  # cells/s, simple binary op (x + y) on cache-resident data
DEFAULT_TRANSCENDENTAL_RATE = 1.0e8  # cells/s, exp/log/tanh
DEFAULT_SPARSE_RATE = 2.0e8  # non-zeros/s, CSR traversal (sparse-dense products, aggregates)
# s per row of a CSR (column of a CSC) operand a SciPy kernel loops over, beside its non-zeros: a tall
# CSR matrix of short rows pays it (1e6 x 100 at 5%: X %*% v 7.8 ms as CSR, 4.2 as CSC, here;
# benchmarks/sparse_forms.py)
SPARSE_SEGMENT_TIME = 4.0e-9
HELD_LOOKUP_TIME = 1.0e-6  # s, finding the converted form kept with a variable's value (plan.layout.local)
# s per execution of a block: a format choice saving less keeps the default formats (the conversion's
# own instruction costs about this much to dispatch, and the estimates of small kernels err more)
LAYOUT_MIN_SAVING = 2.0e-5
DEFAULT_INSTRUCTION_OVERHEAD = 1.0e-5  # s, interpreter dispatch + bookkeeping per instruction
DEFAULT_MATRIX_OP_OVERHEAD = 2.0e-5  # s, the same for an instruction on (small) matrices: kernel entry
DEFAULT_RAND_RATE = 5.0e7  # cells/s, dense rand() through lafuse's SystemDS-compatible generator
DEFAULT_TRANSPOSE_RATE = 5.0e7  # cells/s, t() of a large dense matrix (a strided copy)
DEFAULT_ROWAGG_RATE = 1.0e8  # cells/s, rowSums/rowMins over few columns (short inner reductions)
DEFAULT_CSV_READ_RATE = 1.0e7  # cells/s, parsing text (csv/ijv/mm) input
DEFAULT_CSV_WRITE_RATE = 2.0e6  # cells/s, formatting text output (Java-style doubles)
DEFAULT_BINARY_READ_BW = 1.0e9  # bytes/s, reading .npy from the page cache / disk
DEFAULT_FIRST_TOUCH_BW = 5.0e8  # bytes/s, writing memory the process never used before (page faults)
# Dask (runtime.dask), measured on this 2-core machine with 2 single-thread workers on loopback: one
# independent task's round trip through the scheduler ~1.7 ms (the reference's dask.array figures);
# blocks sent to the workers inside tasks, 64 blocks of 8 MB in 0.36 s (~1.4 GB/s, serialization bound)
DASK_TASK_TIME = 1.7e-3  # s per task of a distributed instruction
DASK_TRANSFER_BW = 1.4e9  # bytes/s, a block moved between this process and a worker
# of a Dask worker's memory limit a fused operator's task may plan to hold (theta_t, paper 004 §3.3):
# the worker spills from distributed's target of 0.6, and a task's pieces count twice there (the
# fetched blocks and the piece pasted from them). Not calibrated: benchmarks/fuseme_memory.py (2
# workers, U and V 234 MiB each) saw the broadcast operator fail once at 1 GiB and spill 0.95-2.3 GB a
# run otherwise, the cuboid one 1.3-1.4 GB; at 1.5 GiB the two spilled alike
TASK_MEMORY_FRACTION = 0.3
# bytes of a worker's memory limit its process holds before any data: an idle worker with NumPy,
# SciPy, lafuse and Numba imported (the fused kernels) measured 133 MiB RSS (62 MiB fresh); theta_t is
# the fraction of what remains after it and the worker's share of the block's distributed inputs
# (fusion.fuseme), at least of a quarter of the limit. At 384 MiB workers the autoencoder's cuboids
# planned 100 MB tasks against the whole limit and the workers paused and resumed for minutes without
# finishing; with the baseline alone, 73 MiB tasks beside a 320 MB X restarted workers for 15 minutes;
# with X's share too (29 MiB tasks) one full-batch step took 9 s
WORKER_BASELINE_BYTES = 140 << 20
DEFAULT_NET_BW = 1.4e9  # bytes/s, a block one Dask worker fetches from another (calibrate measured 2.9e9 on loopback here)
DEFAULT_CODEGEN_COMPILE_TIME = 1.3  # s, compiling one generated kernel cold (measured 1.2-1.7 s here)
# element-wise rate (cells/s, `lafuse calibrate`) of the machine the FUSED_* constants were measured on;
# they are scaled by the profiled machine's rate (cost.operators.kernel_slowdown)
KERNEL_CONSTANTS_ELEMENTWISE_RATE = 2.33e9
# simple operations/s inside a generated kernel (operands in registers, all threads, no fast-math):
# sum of a chain of 8, 16, 24, 32 alternating * and +/- over one dense 2e7-cell input took 9.7 (read
# bound), 30, 54, 92 ms (2 threads); 8e9 is the mean rate of the compute-bound chains
FUSED_OP_RATE = 8.0e9
# the cost of one cell of an operation inside a generated kernel, in simple operations at FUSED_OP_RATE,
# from the same measurement (sum(f(X)), 2e7 cells, 2 threads): X/(X+1) 14.5 ms, sqrt 28 ms, exp and log
# 50 ms, sin 98 ms, ^0.3 145 ms. Numba calls libm per cell here, where NumPy's ufuncs vectorize, so the
# ratios differ from the unfused WEIGHT_* below
FUSED_WEIGHT_DIVIDE = 5.0
FUSED_WEIGHT_SQRT = 10.0
FUSED_WEIGHT_TRANSCENDENTAL = 20.0
FUSED_WEIGHT_TRIG = 40.0
FUSED_WEIGHT_POW = 57.0
# tanh and sinh: libm's take 2.6-3.0x exp's time per cell (sum(f(X)) over 2e7 cells in [-1, 1), 2
# threads, two runs: exp 86 ms, tanh 224-256 ms, sinh 224-240 ms, cosh 136-163 ms, sin 138-146 ms);
# priced as exp before, a fused tanh(X %*% W + b) was expected to save 3x what it did
FUSED_WEIGHT_HYPERBOLIC = 55.0
# s per row and vector primitive or row view of a row kernel's per-row body (all threads; CSR main):
# each primitive is a small loop of run-time length, each view a reference count; measured 63 ms for
# multiLogReg's Hessian-vector product (10 primitives, outer product, 2 views) over 1e6 rows
FUSED_ROW_VECOP_TIME = 6.0e-9
# the same over a dense main, which runs the block body (BLAS per block of rows, gen_row_block.py):
# measured 30.6 ms for that product (13 primitives and views) over 1e6 rows, 2 threads
FUSED_ROW_BLOCK_VECOP_TIME = 1.85e-9
# s per iterated cell and CSR input of a cell or multi-aggregate kernel that iterates all cells (not
# only the main's non-zeros): the input's row is searched for each cell's column (csr_seek).
# Measured: colSums(P - Y) over dense P and CSR Y (1e6 x 2, 1/3 dense; multiLogReg) 7.8 ms, 2 threads
FUSED_CSR_SEEK_TIME = 3.5e-9
# s, Numba's start-up paid by the first kernel of a process on top of the above, in two parts that
# `lafuse calibrate` measures (HardwareProfile.numba_import_time, numba_first_load; these are the
# defaults): importing the code generator with Numba, llvmlite and the primitives (measured 0.26-0.34 s
# inside `lafuse run`, `--stats` "importing Numba", bytecode cached; `import numba` alone 0.19-0.27 s,
# then `import lafuse.codegen` 0.09-0.13 s), and the first load from the disk cache less a later load's
# CODEGEN_WARM_LOAD_TIME (NRT init, environment rebuild: the first 0.08-0.12 s, the next ones 10-12 ms;
# it was 0.19-0.25 s while Numba refreshed its registries on load, codegen.cache). A first kernel that
# calls BLAS pays SCIPY_BLAS_IMPORT_TIME on top. An earlier constant
# charged 0.25 s for both parts (import 0.16 s): the cost policy then fused MLP's and AutoEncoder's
# final evaluations, which run once, and lost 0.2-0.4 s a run to the start it underpriced
DEFAULT_NUMBA_IMPORT_TIME = 0.30
DEFAULT_NUMBA_FIRST_LOAD = 0.09
# s, initializing LLVM and compiling the primitives before a process's first cold compile, on top of
# the import and the kernel's own compile (first cold compile 2.6-3.0 s against 1.2-1.7 s for the next)
NUMBA_COLD_INIT = 1.45
CODEGEN_WARM_LOAD_TIME = 0.02  # s, loading a kernel from the on-disk plan cache (measured 11-35 ms)
# s a HOP of the partition, costing one fusion plan assignment of it (build_plan and plan_cost, memoized):
# the cost-based selector's exact search costs at most as many plans as the partition's stakes, (fuse-all's
# cost - the lower bound) x the DAG's expected runs, pay for at this price a HOP (fusion.select; measured
# 70 us a plan on random DAGs of 100000 x 1000 matrices, 153 us on alsCG's 12-point partition of 400 x 6,
# 420-510 us on the 59-HOP partition of an ALS-CG iteration with its CG steps unrolled: ~8 us a HOP)
PLAN_EVAL_TIME_PER_HOP = 8e-6
# the compiler skips the fusion optimizer (and its ~70 ms import) for a block run once whose every
# intermediate, written and read at first-touch speed, costs this many times less than one kernel load:
# no fused operator could pay there (compiler.fusion_cannot_pay); the factor covers slower machines
FUSION_SKIP_MARGIN = 4.0  # ratio
SCIPY_SPARSE_IMPORT_TIME = 0.19  # s, lafuse imports scipy.sparse on the first sparse value of a process
# s, the first kernel of a process that calls BLAS (Numba's np.dot takes scipy's BLAS) imports
# scipy.linalg.cython_blas while it loads: measured 0.13-0.16 s after NumPy and Numba; KMeans' fused
# t(P) %*% X loaded in 0.21 s, 0.05 s with scipy's BLAS imported before (cost.fused.blas_start)
SCIPY_BLAS_IMPORT_TIME = 0.15

# ---- operation weights, in simple-element-wise-op units per cell
WEIGHT_SIMPLE = 1.0  # + - * comparisons, min/max
WEIGHT_DIVIDE = 2.0  # /, %%, %/%
WEIGHT_POW = 8.0  # ^ with a non-integer exponent
WEIGHT_SQRT = 2.0
WEIGHT_TRIG = 6.0  # sin/cos/tan/... per cell, relative to the exp/log transcendental rate
# s per row of NumPy's broadcast of a column (row) vector over a dense matrix of fewer than SHORT_ROW_COLS
# columns, on top of the cells at the element-wise rate: the inner loop restarts per row. Measured
# A - x over 2.5e6 cells (1.07 ms at the element-wise rate): 3.1, 2.6, 2.3 ms at 5, 10, 20 columns,
# i.e. 4-10 ns per row; A - r with a row vector r: 4.7, 3.4 ms at 5, 10 columns, 7-9 ns per row
SHORT_ROW_COLS = 64
BROADCAST_COL_ROW_TIME = 6.0e-9
BROADCAST_ROW_ROW_TIME = 8.0e-9
SCALAR_DIVIDE_OVERHEAD = 8.0e-7  # s, a scalar '/' (Java division semantics: 0-divisor checks) beyond dispatch

WEIGHT_SPARSE_RAND = 10.0  # a sparse rand() non-zero costs this many dense rand cells (geometric skips,
# per-block position draws; measured on benchmarks/cost_programs/sparse_ops.dml)
# a CSR-CSR element-wise op per input non-zero, relative to sparse_rate (a traversal): measured
# X*Y with 2e6 + 2e6 non-zeros 24 ms, (X*Y)*Z with 2e5 + 2e6 7.3 ms (SciPy; calibrated rate 1.18e9/s)
WEIGHT_SPARSE_BINARY = 6.0
# s per row and per non-zero of a binary operation between a CSR and a dense operand that keeps the
# CSR pattern (SciPy: row indices of the non-zeros, a gather, eliminate_zeros). Measured CSR * dense
# (NumPy/SciPy, 1 thread): 1e6 x 1 at 20% 8.4 ms, at 5% 6.8 ms; 1e5 x 10 at 20% 2.9 ms; 2e4 x 50 1.6 ms
CSR_DENSE_ROW_TIME = 6.3e-9
# s per cell and per non-zero of making a dense result CSR (scipy.sparse.csr_array of a dense array,
# after a comparison or another operation whose result is sparse). Measured over 1e6 cells (1e5 x 10
# and 1000 x 1000, best of 15): 5.0-5.4 ms at 1% non-zeros, 7.7-8.4 ms at 10%, 15.7-17.6 ms at 30%
DENSE_TO_CSR_CELL_TIME = 5.0e-9
DENSE_TO_CSR_NZ_TIME = 3.3e-8
CSR_DENSE_NZ_TIME = 1.05e-8
# s per row of the tall operand of a dense product with a narrow result (at most SKINNY_MM_COLS rows
# or columns), where OpenBLAS pays per row more than the memory traffic: measured over X 1e6 x 10
# (80 MB): X %*% V 5.4-6.9 ms for V with 1-3 columns, t(X) %*% G 10.4-14.4 ms; over X 1e5 x 100 the
# memory traffic dominates (2.9 and 4.5 ms)
SKINNY_MM_COLS = 16
SKINNY_MM_ROW_TIME = 5.5e-9
SKINNY_TMM_ROW_TIME = 1.1e-8
# passes of a dense BLAS product over its result, on top of its FLOPs: OpenBLAS's dgemm first scales C
# by beta (= 0, a write pass), then its kernel adds each k-panel's block into C (a read-modify-write,
# not overlapped with the FLOPs when k is small). Measured U %*% t(V), 5000 x k times k x 5000 into a
# 200 MB result (2 threads; FLOPs alone at the calibrated BLAS rate 3.3, 13, 33, 67 ms): 21, 26, 48,
# 71 ms for k = 5, 20, 50, 100; FLOPs + two write passes gives 24, 34, 54, 88 ms, the roofline of
# FLOPs against one write pass gave 10, 13, 33, 67 ms
BLAS_RESULT_PASSES = 2.0
# FLOP/s of a dense product with a dimension of at most SKINNY_GEMM_DIM (OpenBLAS, 2 threads), far
# below the square-matrix rate calibrated as blas_flops (7.5e10 on the machine measured, the reference
# it is scaled by). Measured over 1e6 rows, best of 5: t(A) %*% B with A, B of (10, 50), (2, 100),
# (20, 20), (10, 10), (50, 10) columns 11.4, 5.5, 16.1, 9.3, 11.6 GFLOP/s; A %*% W of the same shapes
# 14.1, 3.1, 19.4, 11.1, 11.2. KMeans' t(P) %*% X over 1e6 x 50 was estimated at 30 ms, ran 83 ms.
# Below ~6 the rate falls with the dimension (SKINNY_GEMM_FLOPS_PER_DIM each): X 1e6 x 100 times V
# with 2, 3, 5 columns 111, 114, 126 ms (3.6, 5.3, 7.9 GFLOP/s), t(X) %*% Q 88, 113, 101 ms; one
# column is a matrix-vector product, bound by memory (38 ms), as the roofline prices it. multiLogReg's
# unfused Hessian-vector products were estimated at 51 ms a call and took 114 ms
SKINNY_GEMM_DIM = 64
SKINNY_GEMM_FLOPS = 1.1e10
SKINNY_GEMM_FLOPS_PER_DIM = 1.8e9
SKINNY_GEMM_REF_FLOPS = 7.5e10
# the middle dimension (second smallest of three) up to which SKINNY_GEMM_FLOPS caps the rate; above, the
# cap grows as the square root of middle / this (operators.gemm_rate). Measured (NumPy, 2 threads, 160 MB
# tall operand, best of 5) X %*% V | t(A) %*% X in GFLOP/s with V, A of k = 10 | 20 | 50 columns: X of
# 50 columns 21/17 | 27/28 | 35/18, 300 columns 16/21 | 28/37 | 46/57, 1000 columns 18/31 | 37/53 |
# 59/71; with the per-dimension rate the model prices them at 14 | 14 | 14, 23 | 35 | 35, 23 | 46 | 63
# (blas_flops 9.6e10), within 1.5x of both but X %*% V over 300 and 1000 columns at k = 10 (16, 18) and
# t(A) %*% X over 50 columns at k = 50 (18); the flat cap priced every one at 14
SKINNY_GEMM_MID_REF = 50.0
# the rate of such a product whose operands and result fit the cache (a mini-batch's), as a share of the
# calibrated blas_flops (large square products): measured 256 x 100 times 100 x 50 43 GFLOP/s, 100 x 256
# times 256 x 50 41, 1000 x 100 times 100 x 50 48 against 75 calibrated (NumPy, 2 threads, best of 2000)
CACHED_SKINNY_GEMM_SHARE = 0.55
WEIGHT_DENSE_SPARSE_MM = 2.0  # dense %*% sparse runs as t(t(sparse) %*% t(dense)): transposes on top

# ---- control flow (paper 003 eq. 1)
DEFAULT_WHILE_ITERATIONS = 10  # iterations assumed for a while loop or a for loop with unknown bounds
DEFAULT_UNKNOWN_DIM = 1000  # rows or cols assumed for a matrix whose size is unknown at costing time

# a sampled sum (hops.patterns.sampled_sums): element-wise-operation equivalents per non-zero beyond its
# dot product (gathering a row of U and of V, g, the product with X's value, the sum) [cells per nz]
SAMPLED_NZ_CELLS = 12.0
