// nsdiag calibration kernels: one "bad" kernel that clearly has a problem and a
// "good" twin that does not, per cause slug of the nsdiag rule table.
//
// Build:   nvcc -O3 -arch=sm_90 -lineinfo -o calib tests/calibration/calib.cu
// Profile: ncu --set full --clock-control none -f -o calib ./calib
//
//   ./calib            run every case once, in a fixed order (bad, then good)
//   ./calib NAME...    run only these; NAME is a case slug (both kernels,
//                      e.g. shared-bank-conflicts) or one kernel name
//                      (e.g. shared_bank_conflicts_bad)
//   ./calib --list     print the case slugs, one per line
//
// Kernel names are <cause_with_underscores>_bad / _good (plain, non-template
// __global__ functions).  Inputs are allocated once, initialised by init_*
// kernels, and freed at exit.  Every kernel is followed by
// cudaGetLastError + cudaDeviceSynchronize; any error aborts with exit(1).
// Sizes target an H200 (132 SMs): every kernel should take ~10 us .. ~5 ms.

#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <mma.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#define CK(call)                                                              \
    do {                                                                      \
        cudaError_t e_ = (call);                                              \
        if (e_ != cudaSuccess) {                                              \
            fprintf(stderr, "calib: CUDA error '%s' at %s:%d: %s\n", #call,   \
                    __FILE__, __LINE__, cudaGetErrorString(e_));              \
            exit(1);                                                          \
        }                                                                     \
    } while (0)

// ---------------------------------------------------------------------------
// Sizes
// ---------------------------------------------------------------------------
static const int LG2_N_BIG = 26;
static const size_t N_BIG = size_t(1) << LG2_N_BIG;   // 64M floats = 256 MB per buffer
static const size_t N_CHASE = size_t(64) << 20;  // 64M uint32 = 256 MB (power of 2)
static const int TR_N = 8192;                     // transpose: 8192 x 8192 floats = 256 MB
static const int GEMM_N = 2048;                   // GEMM M = N = K
static const int CHASE_STEPS = 4096;              // memory-latency: dependent loads per thread
static const int LOWOCC_STEPS = 32;               // low-occupancy: dependent loads per thread
static const int LOWOCC_THREADS = 64;
static const int LOWOCC_SMEM = 200 * 1024;        // dynamic smem request of low_occupancy_bad
static const size_t L2_WS_FLOATS = size_t(4) << 20;  // l2-bound working set: 16 MB
static const int L2_READS = 1024;                 // float4 reads per thread (l2-bound)
static const size_t ATOMIC_N = size_t(4) << 20;   // atomic-contention: 4M adds
static const int LAUNCHES = 20;                   // launch-overhead: number of tiny launches
static const size_t LAUNCH_GOOD_N = size_t(LAUNCHES) * 32 * 8192;  // 13.1M floats

// ---------------------------------------------------------------------------
// Init kernels
// ---------------------------------------------------------------------------
__global__ void init_float(float* p, size_t n) {
    size_t stride = size_t(gridDim.x) * blockDim.x;
    for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
        p[i] = float((unsigned(i) * 2654435761u) >> 22) * (1.0f / 1024.0f);  // [0,1)
}

// chase[i] = (a*i + c) mod 2^k: a full-period LCG (Hull-Dobell: c odd,
// a = 1 mod 4), so following p = chase[p] walks one cycle through all n
// entries, jumping pseudo-randomly across the whole 256 MB buffer.
__global__ void init_chase(unsigned* p, size_t n) {
    unsigned mask = unsigned(n - 1);
    size_t stride = size_t(gridDim.x) * blockDim.x;
    for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
        p[i] = (1664525u * unsigned(i) + 1013904223u) & mask;
}

// Small multiples of 1/16: exact in half; GEMM sums stay exact in fp32, so the
// FMA GEMM and the tensor-core GEMM must agree bit for bit.
__global__ void init_half(__half* p, size_t n, int mul, int add, int mod, int off) {
    size_t stride = size_t(gridDim.x) * blockDim.x;
    for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
        int v = int((i * size_t(mul) + size_t(add)) % size_t(mod)) - off;
        p[i] = __float2half(float(v) * (1.0f / 16.0f));
    }
}

// ---------------------------------------------------------------------------
// Shared device helpers
// ---------------------------------------------------------------------------
// 8 independent FMA chains: enough ILP to keep the FP32 pipe busy.
__device__ __forceinline__ float fma_chain8(float x, int iters, float m, float c) {
    float a0 = x, a1 = x + 1.f, a2 = x + 2.f, a3 = x + 3.f;
    float a4 = x + 4.f, a5 = x + 5.f, a6 = x + 6.f, a7 = x + 7.f;
#pragma unroll 4
    for (int i = 0; i < iters; ++i) {
        a0 = fmaf(a0, m, c); a1 = fmaf(a1, m, c); a2 = fmaf(a2, m, c); a3 = fmaf(a3, m, c);
        a4 = fmaf(a4, m, c); a5 = fmaf(a5, m, c); a6 = fmaf(a6, m, c); a7 = fmaf(a7, m, c);
    }
    return ((a0 + a1) + (a2 + a3)) + ((a4 + a5) + (a6 + a7));
}

__device__ __forceinline__ size_t gtid() {
    return size_t(blockIdx.x) * blockDim.x + threadIdx.x;
}

// ---------------------------------------------------------------------------
// dram-bandwidth-saturated
// ---------------------------------------------------------------------------
// BAD: float4 grid-stride copy of 256 MB -> 256 MB; 4 independent 16-byte loads
// in flight per thread, nothing else: DRAM throughput is the only limit.
__global__ void dram_bandwidth_saturated_bad(const float4* __restrict__ in,
                                             float4* __restrict__ out, size_t n4) {
    size_t stride = size_t(gridDim.x) * blockDim.x;
    size_t i = gtid();
    for (; i + 3 * stride < n4; i += 4 * stride) {
        float4 v0 = in[i], v1 = in[i + stride], v2 = in[i + 2 * stride], v3 = in[i + 3 * stride];
        out[i] = v0; out[i + stride] = v1; out[i + 2 * stride] = v2; out[i + 3 * stride] = v3;
    }
    for (; i < n4; i += stride) out[i] = in[i];
}

// GOOD: compute-bound FMA loop on one float per thread from a 1 MB buffer:
// ~2 MB of DRAM traffic for ~0.1 ms of FMA work.
__global__ void dram_bandwidth_saturated_good(const float* __restrict__ small, size_t nsmall_mask,
                                              float* __restrict__ out, int iters, float m, float c) {
    size_t i = gtid();
    out[i] = fma_chain8(small[i & nsmall_mask], iters, m, c);
}

// ---------------------------------------------------------------------------
// uncoalesced-global-access
// ---------------------------------------------------------------------------
// BAD: thread t reads in[(t*32) % n + (t*32) / n] (a stride-32 permutation of
// all n elements; n = 2^lg2n so it is done with shifts): the 32 lanes of a
// warp hit 32 different 128-byte lines, so each request needs 32 sectors and
// uses 4 of every 32 bytes fetched.  Writes are coalesced.
__global__ void uncoalesced_global_access_bad(const float* __restrict__ in,
                                              float* __restrict__ out, size_t n, int lg2n) {
    size_t t = gtid();
    if (t >= n) return;
    size_t j = ((t << 5) & (n - 1)) | (t >> (lg2n - 5));
    out[t] = in[j] * 2.0f + 1.0f;
}

// GOOD: same element count, read coalesced (4 sectors per warp request).
__global__ void uncoalesced_global_access_good(const float* __restrict__ in,
                                               float* __restrict__ out, size_t n) {
    size_t t = gtid();
    if (t >= n) return;
    out[t] = in[t] * 2.0f + 1.0f;
}

// ---------------------------------------------------------------------------
// shared-bank-conflicts
// ---------------------------------------------------------------------------
// 32x32 tile transpose, block 32x8.  After the transpose read, each thread
// sweeps SMEM_SWEEPS rotated column reads of the tile so that shared-memory
// loads dominate the run time.  Output: sum of the sweeps (same in both).
#define TILE 32
#define BROWS 8
#define SMEM_SWEEPS 8

// BAD: tile[32][32]: a warp reading a column (fixed col, 32 rows) hits one
// bank 32 times -> 32-way conflict, 32 wavefronts per request.
__global__ void shared_bank_conflicts_bad(const float* __restrict__ in,
                                          float* __restrict__ out, int n) {
    __shared__ float tile[TILE][TILE];
    int x = blockIdx.x * TILE + threadIdx.x;
    int y = blockIdx.y * TILE + threadIdx.y;
#pragma unroll
    for (int j = 0; j < TILE; j += BROWS)
        tile[threadIdx.y + j][threadIdx.x] = in[size_t(y + j) * n + x];   // row write: no conflict
    __syncthreads();
    x = blockIdx.y * TILE + threadIdx.x;
    y = blockIdx.x * TILE + threadIdx.y;
#pragma unroll
    for (int j = 0; j < TILE; j += BROWS) {
        float acc = 0.f;
#pragma unroll
        for (int r = 0; r < SMEM_SWEEPS; ++r)
            acc += tile[(threadIdx.x + r) & (TILE - 1)][threadIdx.y + j];   // column read: 32-way
        out[size_t(y + j) * n + x] = acc;
    }
}

// GOOD: tile[32][33]: padding shifts each row by one bank, the column read
// touches 32 distinct banks (1 wavefront per request).
__global__ void shared_bank_conflicts_good(const float* __restrict__ in,
                                           float* __restrict__ out, int n) {
    __shared__ float tile[TILE][TILE + 1];
    int x = blockIdx.x * TILE + threadIdx.x;
    int y = blockIdx.y * TILE + threadIdx.y;
#pragma unroll
    for (int j = 0; j < TILE; j += BROWS)
        tile[threadIdx.y + j][threadIdx.x] = in[size_t(y + j) * n + x];
    __syncthreads();
    x = blockIdx.y * TILE + threadIdx.x;
    y = blockIdx.x * TILE + threadIdx.y;
#pragma unroll
    for (int j = 0; j < TILE; j += BROWS) {
        float acc = 0.f;
#pragma unroll
        for (int r = 0; r < SMEM_SWEEPS; ++r)
            acc += tile[(threadIdx.x + r) & (TILE - 1)][threadIdx.y + j];   // conflict-free
        out[size_t(y + j) * n + x] = acc;
    }
}

// ---------------------------------------------------------------------------
// local-memory-spill
// ---------------------------------------------------------------------------
// Both: a 64-float per-thread array, 16 relaxation sweeps over it per 1024
// updates.  All indices are compile-time constants (fully unrolled), so the
// array can live in registers -- if it fits.
// BAD: __launch_bounds__(256, 8) caps the kernel at 32 registers (8 blocks of
// 256 threads per SM), but ~70 values are live: ptxas spills about half of
// them (stack frame + spill stores/loads) and the loop runs ~50 LDL + ~50 STL
// per 64 updates.  ~270 B of local data x 2048 threads per SM does not fit L1,
// so most spill traffic goes to L2.
__global__ void __launch_bounds__(256, 8) local_memory_spill_bad(float* __restrict__ out,
                                                                 int iters, float m) {
    float a[64];
    float x = float(threadIdx.x) * 1e-3f;
#pragma unroll
    for (int k = 0; k < 64; ++k) a[k] = x + float(k);
    for (int it = 0; it < iters; it += 64) {
#pragma unroll
        for (int k = 0; k < 64; ++k)                       // too many live values -> spills
            a[k] = fmaf(a[(k + 1) & 63] - a[k], m, a[k]);
    }
    float s = 0.f;
#pragma unroll
    for (int k = 0; k < 64; ++k) s += a[k];
    out[gtid()] = s;
}

// GOOD: identical code without the register cap: ptxas uses ~70 registers,
// 0 bytes stack, no local memory traffic (occupancy 3 blocks/SM is plenty).
__global__ void local_memory_spill_good(float* __restrict__ out, int iters, float m) {
    float a[64];
    float x = float(threadIdx.x) * 1e-3f;
#pragma unroll
    for (int k = 0; k < 64; ++k) a[k] = x + float(k);
    for (int it = 0; it < iters; it += 64) {
#pragma unroll
        for (int k = 0; k < 64; ++k)                       // constant indices -> registers
            a[k] = fmaf(a[(k + 1) & 63] - a[k], m, a[k]);
    }
    float s = 0.f;
#pragma unroll
    for (int k = 0; k < 64; ++k) s += a[k];
    out[gtid()] = s;
}

// ---------------------------------------------------------------------------
// memory-latency
// ---------------------------------------------------------------------------
// BAD: one warp per SM; each thread follows its own chain p = chase[p] across
// 256 MB: every load depends on the previous one, so each warp waits a full
// DRAM latency per step and the memory system is nearly idle.
__global__ void memory_latency_bad(const unsigned* __restrict__ chase, unsigned* __restrict__ out,
                                   int steps, unsigned mask) {
    unsigned t = unsigned(gtid());
    unsigned p = (t * 2654435761u) & mask;    // scattered starting points
    for (int s = 0; s < steps; ++s) p = chase[p];
    out[t] = p;
}

// GOOD: the same number of 4-byte loads, independent and coalesced, spread
// over a full grid: throughput-bound instead of latency-bound.
__global__ void memory_latency_good(const unsigned* __restrict__ chase, unsigned* __restrict__ out,
                                    size_t count) {
    size_t stride = size_t(gridDim.x) * blockDim.x;
    size_t i = gtid();
    unsigned s = 0;
    for (; i + 3 * stride < count; i += 4 * stride) {      // 4 independent loads in flight
        unsigned v0 = chase[i], v1 = chase[i + stride], v2 = chase[i + 2 * stride],
                 v3 = chase[i + 3 * stride];
        s += (v0 + v1) + (v2 + v3);
    }
    for (; i < count; i += stride) s += chase[i];
    out[gtid()] = s;
}

// ---------------------------------------------------------------------------
// l2-bound
// ---------------------------------------------------------------------------
// BAD: every thread reads L2_READS float4 from a 16 MB working set (fits the
// L2, not the L1) with __ldcg (cache-global: L2 only, L1 bypassed).  The
// grid-stride index wraps modulo the working set (n4 = 2^k float4), so each
// SM keeps touching new lines.  After the first pass everything hits L2:
// L2 throughput high, DRAM low.
__global__ void l2_bound_bad(const float4* __restrict__ ws, unsigned n4_mask, unsigned step,
                             float* __restrict__ out, int reads) {
    unsigned idx = unsigned(gtid()) & n4_mask;
    float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll 8
    for (int r = 0; r < reads; ++r) {
        float4 v = __ldcg(&ws[idx]);
        acc.x += v.x; acc.y += v.y; acc.z += v.z; acc.w += v.w;
        idx = (idx + step) & n4_mask;
    }
    out[gtid()] = (acc.x + acc.y) + (acc.z + acc.w);
}

// GOOD: same number of float4 reads, but from a 4 KB per-block slice staged
// once in shared memory (step is a run-time argument, so the compiler cannot
// hoist the loads): L2 traffic is negligible.
__global__ void l2_bound_good(const float4* __restrict__ ws, unsigned n4_mask, int sstep,
                              float* __restrict__ out, int reads) {
    __shared__ float4 slice[256];          // blockDim.x == 256
    slice[threadIdx.x] = ws[(blockIdx.x * 256u + threadIdx.x) & n4_mask];
    __syncthreads();
    int idx = threadIdx.x;
    float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll 8
    for (int r = 0; r < reads; ++r) {
        float4 v = slice[idx];
        acc.x += v.x; acc.y += v.y; acc.z += v.z; acc.w += v.w;
        idx = (idx + sstep) & 255;
    }
    out[gtid()] = (acc.x + acc.y) + (acc.z + acc.w);
}

// ---------------------------------------------------------------------------
// warp-divergence
// ---------------------------------------------------------------------------
// BAD: branch on (threadIdx.x & 1): every warp has odd and even lanes, so it
// runs both long loops one after the other with half its lanes masked off
// (~16 active threads per instruction instead of 32).
__global__ void warp_divergence_bad(float* __restrict__ out, int iters,
                                    float m1, float c1, float m2, float c2) {
    float x = float(threadIdx.x) * 1e-3f, y = x + 1.f, z = x + 2.f, w = x + 3.f;
    if (threadIdx.x & 1) {
        for (int i = 0; i < iters; ++i) {
            x = fmaf(x, m1, c1); y = fmaf(y, m1, c1); z = fmaf(z, m1, c1); w = fmaf(w, m1, c1);
        }
    } else {
        for (int i = 0; i < iters; ++i) {
            x = fmaf(m2, x, -c2); y = fmaf(m2, y, -c2); z = fmaf(m2, z, -c2); w = fmaf(m2, w, -c2);
        }
    }
    out[gtid()] = (x + y) + (z + w);
}

// GOOD: same two loops, branch on the warp index ((threadIdx.x >> 5) & 1):
// uniform within each warp, no lanes idle.
__global__ void warp_divergence_good(float* __restrict__ out, int iters,
                                     float m1, float c1, float m2, float c2) {
    float x = float(threadIdx.x) * 1e-3f, y = x + 1.f, z = x + 2.f, w = x + 3.f;
    if ((threadIdx.x >> 5) & 1) {
        for (int i = 0; i < iters; ++i) {
            x = fmaf(x, m1, c1); y = fmaf(y, m1, c1); z = fmaf(z, m1, c1); w = fmaf(w, m1, c1);
        }
    } else {
        for (int i = 0; i < iters; ++i) {
            x = fmaf(m2, x, -c2); y = fmaf(m2, y, -c2); z = fmaf(m2, z, -c2); w = fmaf(m2, w, -c2);
        }
    }
    out[gtid()] = (x + y) + (z + w);
}

// ---------------------------------------------------------------------------
// compute-pipe-saturated
// ---------------------------------------------------------------------------
// BAD: pure FFMA loop, 8 independent accumulators, full occupancy: the FMA
// pipe issues almost every cycle.
__global__ void compute_pipe_saturated_bad(float* __restrict__ out, int iters, float m, float c) {
    out[gtid()] = fma_chain8(float(threadIdx.x) * 1e-3f, iters, m, c);
}

// GOOD: memory-streaming kernel with one FMA per element: the FMA pipe idles.
__global__ void compute_pipe_saturated_good(const float4* __restrict__ in,
                                            float4* __restrict__ out, size_t n4) {
    size_t stride = size_t(gridDim.x) * blockDim.x;
    for (size_t i = gtid(); i < n4; i += stride) {
        float4 v = in[i];
        out[i] = make_float4(fmaf(v.x, 2.f, 1.f), fmaf(v.y, 2.f, 1.f),
                             fmaf(v.z, 2.f, 1.f), fmaf(v.w, 2.f, 1.f));
    }
}

// ---------------------------------------------------------------------------
// fp64-heavy
// ---------------------------------------------------------------------------
// BAD: DFMA loop (FP64 pipe: half the FP32 rate on H200, far less on
// consumer parts).
__global__ void fp64_heavy_bad(float* __restrict__ out, int iters, double m, double c) {
    double x = double(threadIdx.x) * 1e-3;
    double a0 = x, a1 = x + 1, a2 = x + 2, a3 = x + 3, a4 = x + 4, a5 = x + 5, a6 = x + 6, a7 = x + 7;
#pragma unroll 4
    for (int i = 0; i < iters; ++i) {
        a0 = fma(a0, m, c); a1 = fma(a1, m, c); a2 = fma(a2, m, c); a3 = fma(a3, m, c);
        a4 = fma(a4, m, c); a5 = fma(a5, m, c); a6 = fma(a6, m, c); a7 = fma(a7, m, c);
    }
    out[gtid()] = float(((a0 + a1) + (a2 + a3)) + ((a4 + a5) + (a6 + a7)));
}

// GOOD: the same loop in float (FFMA).
__global__ void fp64_heavy_good(float* __restrict__ out, int iters, float m, float c) {
    out[gtid()] = fma_chain8(float(threadIdx.x) * 1e-3f, iters, m, c);
}

// ---------------------------------------------------------------------------
// special-function-heavy
// ---------------------------------------------------------------------------
// BAD: 4 independent chains of __sinf / __expf / rsqrtf / __logf: each is one
// MUFU (XU pipe, 16 lanes/clk/SM = 1/8 of the FMA rate) plus at most one FMUL.
__global__ void special_function_heavy_bad(float* __restrict__ out, int iters, float k1, float k2) {
    float a = float(threadIdx.x) * 1e-3f, b = a + 0.5f, c = a + 1.0f, d = a + 1.5f;
    for (int i = 0; i < iters; ++i) {
        a = fmaf(__sinf(a), k1, k2);       // MUFU.SIN, stays in [0.1, 1.1]
        b = __expf(-b);                    // MUFU.EX2, stays in (0, 1]
        c = rsqrtf(c + k2);                // MUFU.RSQ, stays in (0, 3.2]
        d = __logf(d + 2.0f);              // MUFU.LG2, stays in [0.69, 1.7]
    }
    out[gtid()] = (a + b) + (c + d);
}

// GOOD: the same 4 chains with short FMA polynomials instead of SFU calls.
__global__ void special_function_heavy_good(float* __restrict__ out, int iters, float k1, float k2) {
    float a = float(threadIdx.x) * 1e-3f, b = a + 0.5f, c = a + 1.0f, d = a + 1.5f;
    for (int i = 0; i < iters; ++i) {
        a = fmaf(fmaf(a * a, -0.1666f, 1.0f), a * k1, k2);    // ~sin
        b = fmaf(fmaf(b, 0.5f, -1.0f), b, 1.0f) * 0.9f;       // ~exp(-b)
        c = fmaf(fmaf(c, 0.375f, -1.25f), c, 1.875f) * k1;    // ~rsqrt
        d = fmaf(fmaf(d, -0.1f, 0.6f), d, 0.3f) * 0.8f;       // ~log
    }
    out[gtid()] = (a + b) + (c + d);
}

// ---------------------------------------------------------------------------
// barrier-stall
// ---------------------------------------------------------------------------
// BAD: 1024-thread blocks; every iteration only warp 0 does 64 dependent-ish
// FMAs, then all 32 warps hit __syncthreads(): 31 warps spend nearly all their
// time stalled on the barrier.
__global__ void __launch_bounds__(1024) barrier_stall_bad(float* __restrict__ out, int iters,
                                                          float m, float c) {
    float a0 = float(threadIdx.x) * 1e-3f, a1 = a0 + 1.f, a2 = a0 + 2.f, a3 = a0 + 3.f;
    for (int it = 0; it < iters; ++it) {
        if (threadIdx.x < 32) {                // warp 0 only (warp-uniform: no divergence)
#pragma unroll
            for (int k = 0; k < 16; ++k) {
                a0 = fmaf(a0, m, c); a1 = fmaf(a1, m, c); a2 = fmaf(a2, m, c); a3 = fmaf(a3, m, c);
            }
        }
        __syncthreads();
    }
    out[gtid()] = (a0 + a1) + (a2 + a3);
}

// GOOD: the same total work per block (iters*64 FMAs per lane of warp 0)
// spread evenly over all 32 warps (iters/32 iterations each), no barrier.
__global__ void __launch_bounds__(1024) barrier_stall_good(float* __restrict__ out, int iters,
                                                           float m, float c) {
    float a0 = float(threadIdx.x) * 1e-3f, a1 = a0 + 1.f, a2 = a0 + 2.f, a3 = a0 + 3.f;
    int my_iters = iters / 32;
    for (int it = 0; it < my_iters; ++it) {
#pragma unroll
        for (int k = 0; k < 16; ++k) {
            a0 = fmaf(a0, m, c); a1 = fmaf(a1, m, c); a2 = fmaf(a2, m, c); a3 = fmaf(a3, m, c);
        }
    }
    out[gtid()] = (a0 + a1) + (a2 + a3);
}

// ---------------------------------------------------------------------------
// atomic-contention
// ---------------------------------------------------------------------------
// BAD: 4M threads each atomicAdd(float) to the SAME address: the L2 slice that
// owns it serialises all of them.  (float adds are not reassociated, so the
// compiler cannot warp-aggregate them.)
__global__ void atomic_contention_bad(const float* __restrict__ in, float* sum, size_t n) {
    size_t i = gtid();
    if (i < n) atomicAdd(&sum[0], in[i]);
}

// GOOD: warp shuffle reduction + shared-memory block reduction, then one
// atomicAdd per block (16K atomics instead of 4M).
__global__ void atomic_contention_good(const float* __restrict__ in, float* sum, size_t n) {
    __shared__ float warp_sums[32];
    size_t i = gtid();
    float v = (i < n) ? in[i] : 0.f;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) warp_sums[warp] = v;
    __syncthreads();
    if (warp == 0) {
        int nwarps = (blockDim.x + 31) >> 5;
        v = (lane < nwarps) ? warp_sums[lane] : 0.f;
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
        if (lane == 0) atomicAdd(&sum[1], v);
    }
}

// ---------------------------------------------------------------------------
// low-occupancy
// ---------------------------------------------------------------------------
// Both: 64-thread blocks, each thread follows a dependent pointer chain of
// LOWOCC_STEPS loads (latency-bound; needs many warps to hide latency).
// BAD: launched with a 200 KB dynamic shared-memory request: only 1 block
// (2 warps) fits per SM -> theoretical occupancy 2/64 = 3%, and the grid runs
// in ~64 waves with the memory system mostly idle.
__global__ void low_occupancy_bad(const unsigned* __restrict__ chase, unsigned* __restrict__ out,
                                  int steps, unsigned mask) {
    extern __shared__ unsigned dyn_smem[];
    unsigned t = unsigned(gtid());
    unsigned p = (t * 2654435761u) & mask;
    for (int s = 0; s < steps; ++s) p = chase[p];
    dyn_smem[threadIdx.x] = p;                 // touch the (huge) request lightly
    __syncthreads();
    out[t] = dyn_smem[threadIdx.x ^ 1];
}

// GOOD: the same kernel and grid with a 256-byte static buffer: 32 blocks
// (64 warps) per SM, 100% theoretical occupancy.
__global__ void low_occupancy_good(const unsigned* __restrict__ chase, unsigned* __restrict__ out,
                                   int steps, unsigned mask) {
    __shared__ unsigned small_smem[LOWOCC_THREADS];
    unsigned t = unsigned(gtid());
    unsigned p = (t * 2654435761u) & mask;
    for (int s = 0; s < steps; ++s) p = chase[p];
    small_smem[threadIdx.x] = p;
    __syncthreads();
    out[t] = small_smem[threadIdx.x ^ 1];
}

// ---------------------------------------------------------------------------
// tail-effect
// ---------------------------------------------------------------------------
// Both: 1024-thread blocks, ~100 us of FMA work each, <=32 registers so 2
// blocks fit per SM (one wave = 2 * #SMs blocks).
// BAD: grid = 1 wave + ~11%: the last few blocks run alone on a few SMs while
// the rest of the GPU idles.
__global__ void __launch_bounds__(1024, 2) tail_effect_bad(float* __restrict__ out, int iters,
                                                           float m, float c) {
    out[gtid()] = fma_chain8(float(threadIdx.x) * 1e-3f, iters, m, c);
}

// GOOD: grid = exactly 2 full waves, same per-block work.
__global__ void __launch_bounds__(1024, 2) tail_effect_good(float* __restrict__ out, int iters,
                                                            float m, float c) {
    out[gtid()] = fma_chain8(float(threadIdx.x) * 1e-3f, iters, m, c);
}

// ---------------------------------------------------------------------------
// small-grid
// ---------------------------------------------------------------------------
// BAD: the whole FMA workload on 16 blocks of 256 threads: 16 of 132 SMs busy.
__global__ void small_grid_bad(float* __restrict__ out, int iters, float m, float c) {
    out[gtid()] = fma_chain8(float(threadIdx.x) * 1e-3f, iters, m, c);
}

// GOOD: the same total work over #SMs*8 blocks (every SM, full occupancy).
__global__ void small_grid_good(float* __restrict__ out, int iters, float m, float c) {
    out[gtid()] = fma_chain8(float(threadIdx.x) * 1e-3f, iters, m, c);
}

// ---------------------------------------------------------------------------
// launch-overhead
// ---------------------------------------------------------------------------
// BAD: 1 block of 32 threads adding one number each, launched LAUNCHES times:
// each launch is a ~2 us ncu result whose SMs are essentially idle.
__global__ void launch_overhead_bad(float* x) {
    x[threadIdx.x] += 1.0f;
}

// GOOD: all LAUNCHES units batched into one launch of reasonable size (each
// unit widened to 32*8192 floats so the single launch lasts tens of us).
__global__ void launch_overhead_good(float* x, size_t n) {
    size_t i = gtid();
    if (i < n) x[i] += 1.0f;
}

// ---------------------------------------------------------------------------
// tensor-core-unused
// ---------------------------------------------------------------------------
// C[M][N] = A[M][K] * B[K][N]; A, B half row-major, C float row-major.
#define GBM 64
#define GBN 64
#define GBK 16

// BAD: classic shared-memory tiled GEMM (64x64 block tile, 4x4 outputs per
// thread) that converts the halves to float and multiplies with FFMA: the FP16
// data never touches the tensor cores (tensor pipe 0%, FMA pipe busy).
__global__ void __launch_bounds__(256) tensor_core_unused_bad(const __half* __restrict__ A,
                                                              const __half* __restrict__ B,
                                                              float* __restrict__ C,
                                                              int M, int N, int K) {
    __shared__ __align__(16) float As[GBK][GBM];   // A tile, stored transposed: As[k][m]
    __shared__ __align__(16) float Bs[GBK][GBN];
    int tx = threadIdx.x, ty = threadIdx.y, t = ty * 16 + tx;
    int bm = blockIdx.y * GBM, bn = blockIdx.x * GBN;
    int a_row = t >> 2, a_col = (t & 3) * 4;     // 64 rows x 16 k: 4 halves per thread
    int b_row = t >> 4, b_col = (t & 15) * 4;    // 16 k x 64 cols: 4 halves per thread
    float acc[4][4];
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] = 0.f;

    for (int k0 = 0; k0 < K; k0 += GBK) {
        const __half2* pa = reinterpret_cast<const __half2*>(A + size_t(bm + a_row) * K + k0 + a_col);
        float2 a01 = __half22float2(pa[0]), a23 = __half22float2(pa[1]);
        As[a_col + 0][a_row] = a01.x; As[a_col + 1][a_row] = a01.y;
        As[a_col + 2][a_row] = a23.x; As[a_col + 3][a_row] = a23.y;
        const __half2* pb = reinterpret_cast<const __half2*>(B + size_t(k0 + b_row) * N + bn + b_col);
        float2 b01 = __half22float2(pb[0]), b23 = __half22float2(pb[1]);
        *reinterpret_cast<float4*>(&Bs[b_row][b_col]) = make_float4(b01.x, b01.y, b23.x, b23.y);
        __syncthreads();
#pragma unroll
        for (int k = 0; k < GBK; ++k) {
            float4 a = *reinterpret_cast<const float4*>(&As[k][ty * 4]);
            float4 b = *reinterpret_cast<const float4*>(&Bs[k][tx * 4]);
            float av[4] = {a.x, a.y, a.z, a.w}, bv[4] = {b.x, b.y, b.z, b.w};
#pragma unroll
            for (int i = 0; i < 4; ++i)
#pragma unroll
                for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < 4; ++i)
        *reinterpret_cast<float4*>(&C[size_t(bm + ty * 4 + i) * N + bn + tx * 4]) =
            make_float4(acc[i][0], acc[i][1], acc[i][2], acc[i][3]);
}

// GOOD: the same GEMM with WMMA (HMMA tensor-core instructions): 4 warps per
// block, each warp owns one 16x16 tile of C, fp16 inputs, fp32 accumulate.
__global__ void tensor_core_unused_good(const __half* __restrict__ A, const __half* __restrict__ B,
                                        float* __restrict__ C, int M, int N, int K) {
    using namespace nvcuda;
    int warp = threadIdx.x >> 5;
    int row = blockIdx.y * 32 + (warp >> 1) * 16;
    int col = blockIdx.x * 32 + (warp & 1) * 16;
    wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> fa;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::row_major> fb;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> fc;
    wmma::fill_fragment(fc, 0.0f);
    for (int k = 0; k < K; k += 16) {
        wmma::load_matrix_sync(fa, A + size_t(row) * K + k, K);
        wmma::load_matrix_sync(fb, B + size_t(k) * N + col, N);
        wmma::mma_sync(fc, fa, fb, fc);
    }
    wmma::store_matrix_sync(C + size_t(row) * N + col, fc, N, wmma::mem_row_major);
}

// ---------------------------------------------------------------------------
// uncoalesced-global-store (the store side of uncoalesced-global-access)
// ---------------------------------------------------------------------------
// BAD: the mirror of uncoalesced_global_access_bad: coalesced reads, and thread t
// writes out[(t*32) % n + (t*32) / n], so the 32 lanes of a warp write 32 different
// 128-byte lines: 32 sectors per store request, 4 useful bytes in each.
__global__ void uncoalesced_global_store_bad(const float* __restrict__ in,
                                             float* __restrict__ out, size_t n, int lg2n) {
    size_t t = gtid();
    if (t >= n) return;
    size_t j = ((t << 5) & (n - 1)) | (t >> (lg2n - 5));
    out[j] = in[t] * 2.0f + 1.0f;
}

// GOOD: the same copy, written coalesced (4 sectors per warp request).
__global__ void uncoalesced_global_store_good(const float* __restrict__ in,
                                              float* __restrict__ out, size_t n) {
    size_t t = gtid();
    if (t >= n) return;
    out[t] = in[t] * 2.0f + 1.0f;
}

// ---------------------------------------------------------------------------
// tail-effect-gemm (wave quantisation of a GEMM)
// ---------------------------------------------------------------------------
// Both: the WMMA GEMM of tensor_core_unused_good, one 32x32 tile of C per block of
// 4 warps, tile t of a 1-D grid at (t / (N/32), t % (N/32)), K swept `reps` times so a
// block runs tens of microseconds.  The dynamic shared memory the launch reserves
// (GEMM_TAIL_SMEM, unused, as a library kernel's staging buffers would be) allows 2
// blocks per SM: one wave is 2 x #SMs tiles.  The grid is the tile count.
// BAD: one tile more than a full wave (265 on an H200): ncu's waves per SM prints
// 1.00, while the extra tile runs alone in a second wave.
// GOOD: exactly one full wave of tiles (264).
__device__ __forceinline__ void wmma_tile(const __half* __restrict__ A,
                                          const __half* __restrict__ B, float* __restrict__ C,
                                          int N, int K, int reps) {
    using namespace nvcuda;
    int tiles_n = N / 32;
    int tile = blockIdx.x, warp = threadIdx.x >> 5;
    int row = (tile / tiles_n) * 32 + (warp >> 1) * 16;
    int col = (tile % tiles_n) * 32 + (warp & 1) * 16;
    wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> fa;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::row_major> fb;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> fc;
    wmma::fill_fragment(fc, 0.0f);
    for (int r = 0; r < reps; ++r)
        for (int k = 0; k < K; k += 16) {
            wmma::load_matrix_sync(fa, A + size_t(row) * K + k, K);
            wmma::load_matrix_sync(fb, B + size_t(k) * N + col, N);
            wmma::mma_sync(fc, fa, fb, fc);
        }
    wmma::store_matrix_sync(C + size_t(row) * N + col, fc, N, wmma::mem_row_major);
}

__global__ void __launch_bounds__(128) tail_effect_gemm_bad(const __half* __restrict__ A,
                                                            const __half* __restrict__ B,
                                                            float* __restrict__ C, int N, int K,
                                                            int reps) {
    wmma_tile(A, B, C, N, K, reps);
}

__global__ void __launch_bounds__(128) tail_effect_gemm_good(const __half* __restrict__ A,
                                                             const __half* __restrict__ B,
                                                             float* __restrict__ C, int N, int K,
                                                             int reps) {
    wmma_tile(A, B, C, N, K, reps);
}

// ===========================================================================
// Host side
// ===========================================================================
struct Ctx {
    cudaDeviceProp prop;
    int nsm;
    float* a;          // 256 MB input (init_float)
    float* b;          // 256 MB output / scratch
    unsigned* chase;   // 256 MB pointer-chase permutation
    float* smallbuf;   // 1 MB input
    float* sums;       // 2 floats for atomic-contention
    __half* ga;        // GEMM A
    __half* gb;        // GEMM B
    float* gc_bad;     // GEMM C from tensor_core_unused_bad
    float* gc_good;    // GEMM C from tensor_core_unused_good
    bool gemm_bad_ran;
};
static Ctx G;
static int g_kernels_run = 0;
static const size_t SMALL_N = size_t(256) << 10;   // 256K floats = 1 MB

// Launch-check helper: check the launch, sync, report the elapsed time.
struct Timer {
    cudaEvent_t e0, e1;
    Timer() { CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1)); CK(cudaEventRecord(e0)); }
    void done(const char* kname, const char* how) {
        CK(cudaGetLastError());
        CK(cudaEventRecord(e1));
        CK(cudaDeviceSynchronize());
        float ms = 0.f;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        printf("  %-34s %-44s %9.3f ms\n", kname, how, ms);
        fflush(stdout);
        CK(cudaEventDestroy(e0)); CK(cudaEventDestroy(e1));
        ++g_kernels_run;
    }
};

static std::string cfg(long long grid, int block, int smem = 0) {
    char buf[128];
    if (smem) snprintf(buf, sizeof buf, "grid=%lld block=%d dsmem=%d", grid, block, smem);
    else snprintf(buf, sizeof buf, "grid=%lld block=%d", grid, block);
    return buf;
}

// Common launch shape for the throughput kernels: 8 blocks of 256 per SM.
static int full_blocks() { return G.nsm * 8; }
static const float FM = 0.999f, FC = 0.001f;   // FMA chain constants (bounded values)

// --- dram-bandwidth-saturated
static void run_dram_bad() {
    int blocks = full_blocks();
    Timer t;
    dram_bandwidth_saturated_bad<<<blocks, 256>>>((const float4*)G.a, (float4*)G.b, N_BIG / 4);
    t.done("dram_bandwidth_saturated_bad", cfg(blocks, 256).c_str());
}
static void run_dram_good() {
    int blocks = full_blocks();
    Timer t;
    dram_bandwidth_saturated_good<<<blocks, 256>>>(G.smallbuf, SMALL_N - 1, G.b, 2048, FM, FC);
    t.done("dram_bandwidth_saturated_good", cfg(blocks, 256).c_str());
}

// --- uncoalesced-global-access
static void run_uncoal_bad() {
    long long blocks = (long long)(N_BIG / 256);
    Timer t;
    uncoalesced_global_access_bad<<<(unsigned)blocks, 256>>>(G.a, G.b, N_BIG, LG2_N_BIG);
    t.done("uncoalesced_global_access_bad", cfg(blocks, 256).c_str());
}
static void run_uncoal_good() {
    long long blocks = (long long)(N_BIG / 256);
    Timer t;
    uncoalesced_global_access_good<<<(unsigned)blocks, 256>>>(G.a, G.b, N_BIG);
    t.done("uncoalesced_global_access_good", cfg(blocks, 256).c_str());
}

// --- shared-bank-conflicts
static void run_bank_bad() {
    dim3 grid(TR_N / TILE, TR_N / TILE), block(TILE, BROWS);
    Timer t;
    shared_bank_conflicts_bad<<<grid, block>>>(G.a, G.b, TR_N);
    t.done("shared_bank_conflicts_bad", "grid=256x256 block=32x8");
}
static void run_bank_good() {
    dim3 grid(TR_N / TILE, TR_N / TILE), block(TILE, BROWS);
    Timer t;
    shared_bank_conflicts_good<<<grid, block>>>(G.a, G.b, TR_N);
    t.done("shared_bank_conflicts_good", "grid=256x256 block=32x8");
}

// --- local-memory-spill
static const int LOCAL_ITERS = 1024;   // multiple of 64
static void run_local_bad() {
    int blocks = full_blocks();
    Timer t;
    local_memory_spill_bad<<<blocks, 256>>>(G.b, LOCAL_ITERS, 0.5f);
    t.done("local_memory_spill_bad", cfg(blocks, 256).c_str());
}
static void run_local_good() {
    int blocks = full_blocks();
    Timer t;
    local_memory_spill_good<<<blocks, 256>>>(G.b, LOCAL_ITERS, 0.5f);
    t.done("local_memory_spill_good", cfg(blocks, 256).c_str());
}

// --- memory-latency
static size_t latency_total_loads() {
    size_t n = size_t(G.nsm) * 32 * CHASE_STEPS;
    return n < N_CHASE ? n : N_CHASE;
}
static void run_lat_bad() {
    Timer t;
    memory_latency_bad<<<G.nsm, 32>>>(G.chase, (unsigned*)G.b, CHASE_STEPS, unsigned(N_CHASE - 1));
    t.done("memory_latency_bad", cfg(G.nsm, 32).c_str());
}
static void run_lat_good() {
    int blocks = full_blocks();
    Timer t;
    memory_latency_good<<<blocks, 256>>>(G.chase, (unsigned*)G.b, latency_total_loads());
    t.done("memory_latency_good", cfg(blocks, 256).c_str());
}

// --- l2-bound
static void run_l2_bad() {
    int blocks = full_blocks();
    size_t n4 = L2_WS_FLOATS / 4;                // power of 2
    unsigned step = unsigned((size_t(blocks) * 256) % n4);   // grid stride mod the working set
    Timer t;
    l2_bound_bad<<<blocks, 256>>>((const float4*)G.a, unsigned(n4 - 1), step, G.b, L2_READS);
    t.done("l2_bound_bad", cfg(blocks, 256).c_str());
}
static void run_l2_good() {
    int blocks = full_blocks();
    Timer t;
    l2_bound_good<<<blocks, 256>>>((const float4*)G.a, unsigned(L2_WS_FLOATS / 4 - 1), 32, G.b,
                                   L2_READS);
    t.done("l2_bound_good", cfg(blocks, 256).c_str());
}

// --- warp-divergence
static const int DIV_ITERS = 4096;
static void run_div_bad() {
    int blocks = full_blocks();
    Timer t;
    warp_divergence_bad<<<blocks, 256>>>(G.b, DIV_ITERS, FM, FC, 0.998f, 0.002f);
    t.done("warp_divergence_bad", cfg(blocks, 256).c_str());
}
static void run_div_good() {
    int blocks = full_blocks();
    Timer t;
    warp_divergence_good<<<blocks, 256>>>(G.b, DIV_ITERS, FM, FC, 0.998f, 0.002f);
    t.done("warp_divergence_good", cfg(blocks, 256).c_str());
}

// --- compute-pipe-saturated
static void run_pipe_bad() {
    int blocks = full_blocks();
    Timer t;
    compute_pipe_saturated_bad<<<blocks, 256>>>(G.b, 8192, FM, FC);
    t.done("compute_pipe_saturated_bad", cfg(blocks, 256).c_str());
}
static void run_pipe_good() {
    int blocks = full_blocks();
    Timer t;
    compute_pipe_saturated_good<<<blocks, 256>>>((const float4*)G.a, (float4*)G.b, N_BIG / 4);
    t.done("compute_pipe_saturated_good", cfg(blocks, 256).c_str());
}

// --- fp64-heavy
static const int FP64_ITERS = 2048;
static void run_fp64_bad() {
    int blocks = full_blocks();
    Timer t;
    fp64_heavy_bad<<<blocks, 256>>>(G.b, FP64_ITERS, 0.999, 0.001);
    t.done("fp64_heavy_bad", cfg(blocks, 256).c_str());
}
static void run_fp64_good() {
    int blocks = full_blocks();
    Timer t;
    fp64_heavy_good<<<blocks, 256>>>(G.b, FP64_ITERS, FM, FC);
    t.done("fp64_heavy_good", cfg(blocks, 256).c_str());
}

// --- special-function-heavy
static const int SFU_ITERS = 1024;
static void run_sfu_bad() {
    int blocks = full_blocks();
    Timer t;
    special_function_heavy_bad<<<blocks, 256>>>(G.b, SFU_ITERS, 0.5f, 0.6f);
    t.done("special_function_heavy_bad", cfg(blocks, 256).c_str());
}
static void run_sfu_good() {
    int blocks = full_blocks();
    Timer t;
    special_function_heavy_good<<<blocks, 256>>>(G.b, SFU_ITERS, 0.5f, 0.6f);
    t.done("special_function_heavy_good", cfg(blocks, 256).c_str());
}

// --- barrier-stall
static const int BAR_ITERS = 16384;   // multiple of 32
static void run_bar_bad() {
    int blocks = G.nsm * 2;
    Timer t;
    barrier_stall_bad<<<blocks, 1024>>>(G.b, BAR_ITERS, FM, FC);
    t.done("barrier_stall_bad", cfg(blocks, 1024).c_str());
}
static void run_bar_good() {
    int blocks = G.nsm * 2;
    Timer t;
    barrier_stall_good<<<blocks, 1024>>>(G.b, BAR_ITERS, FM, FC);
    t.done("barrier_stall_good", cfg(blocks, 1024).c_str());
}

// --- atomic-contention
static void run_atom_bad() {
    CK(cudaMemset(G.sums, 0, 2 * sizeof(float)));
    long long blocks = (long long)(ATOMIC_N / 256);
    Timer t;
    atomic_contention_bad<<<(unsigned)blocks, 256>>>(G.a, G.sums, ATOMIC_N);
    t.done("atomic_contention_bad", cfg(blocks, 256).c_str());
}
static void run_atom_good() {
    long long blocks = (long long)(ATOMIC_N / 256);
    Timer t;
    atomic_contention_good<<<(unsigned)blocks, 256>>>(G.a, G.sums, ATOMIC_N);
    t.done("atomic_contention_good", cfg(blocks, 256).c_str());
    float h[2];
    CK(cudaMemcpy(h, G.sums, sizeof h, cudaMemcpyDeviceToHost));
    printf("    sums: per-thread atomics %.1f, per-block atomics %.1f (should be close)\n", h[0], h[1]);
}

// --- low-occupancy
static int lowocc_smem() {
    int s = LOWOCC_SMEM;
    if ((size_t)s > G.prop.sharedMemPerBlockOptin) s = (int)G.prop.sharedMemPerBlockOptin;
    return s;
}
static void run_lowocc_bad() {
    int smem = lowocc_smem();
    CK(cudaFuncSetAttribute(low_occupancy_bad, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    int blocks = G.nsm * 64;
    int occ = 0;
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, low_occupancy_bad, LOWOCC_THREADS, smem));
    printf("    low_occupancy_bad: %d block(s) of %d threads per SM -> %d/%d warps\n", occ,
           LOWOCC_THREADS, occ * LOWOCC_THREADS / 32, G.prop.maxThreadsPerMultiProcessor / 32);
    Timer t;
    low_occupancy_bad<<<blocks, LOWOCC_THREADS, smem>>>(G.chase, (unsigned*)G.b, LOWOCC_STEPS,
                                                         unsigned(N_CHASE - 1));
    t.done("low_occupancy_bad", cfg(blocks, LOWOCC_THREADS, smem).c_str());
}
static void run_lowocc_good() {
    int blocks = G.nsm * 64;
    int occ = 0;
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, low_occupancy_good, LOWOCC_THREADS, 0));
    printf("    low_occupancy_good: %d block(s) of %d threads per SM -> %d/%d warps\n", occ,
           LOWOCC_THREADS, occ * LOWOCC_THREADS / 32, G.prop.maxThreadsPerMultiProcessor / 32);
    Timer t;
    low_occupancy_good<<<blocks, LOWOCC_THREADS>>>(G.chase, (unsigned*)G.b, LOWOCC_STEPS,
                                                   unsigned(N_CHASE - 1));
    t.done("low_occupancy_good", cfg(blocks, LOWOCC_THREADS).c_str());
}

// --- tail-effect
static const int TAIL_ITERS = 1536;   // ~100 us per block at 2 blocks/SM on H200
static int tail_wave() {
    int occ = 0;
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, tail_effect_bad, 1024, 0));
    if (occ < 1) { fprintf(stderr, "calib: tail_effect_bad cannot launch (occupancy 0)\n"); exit(1); }
    return occ * G.nsm;
}
static void run_tail_bad() {
    int wave = tail_wave();
    int blocks = wave + (wave + 8) / 9;   // ~1.11 waves (264 + 30 on an H200)
    printf("    tail_effect: %d blocks per wave; bad grid = %d (%.2f waves)\n", wave, blocks,
           double(blocks) / wave);
    Timer t;
    tail_effect_bad<<<blocks, 1024>>>(G.b, TAIL_ITERS, FM, FC);
    t.done("tail_effect_bad", cfg(blocks, 1024).c_str());
}
static void run_tail_good() {
    int wave = tail_wave();
    int blocks = 2 * wave;                // exactly 2 full waves
    printf("    tail_effect: %d blocks per wave; good grid = %d (2.00 waves)\n", wave, blocks);
    Timer t;
    tail_effect_good<<<blocks, 1024>>>(G.b, TAIL_ITERS, FM, FC);
    t.done("tail_effect_good", cfg(blocks, 1024).c_str());
}

// --- small-grid
static const int SMALL_GOOD_ITERS = 1024;
static void run_small_bad() {
    // Same total thread-iterations as the good launch, on 16 x 256 threads.
    long long total = (long long)full_blocks() * 256 * SMALL_GOOD_ITERS;
    int iters = int(total / (16 * 256));
    Timer t;
    small_grid_bad<<<16, 256>>>(G.b, iters, FM, FC);
    char how[96];
    snprintf(how, sizeof how, "grid=16 block=256 iters=%d", iters);
    t.done("small_grid_bad", how);
}
static void run_small_good() {
    int blocks = full_blocks();
    Timer t;
    small_grid_good<<<blocks, 256>>>(G.b, SMALL_GOOD_ITERS, FM, FC);
    char how[96];
    snprintf(how, sizeof how, "grid=%d block=256 iters=%d", blocks, SMALL_GOOD_ITERS);
    t.done("small_grid_good", how);
}

// --- launch-overhead
static void run_launch_bad() {
    Timer t;
    for (int i = 0; i < LAUNCHES; ++i) launch_overhead_bad<<<1, 32>>>(G.b);
    t.done("launch_overhead_bad", "20 launches of grid=1 block=32");
    g_kernels_run += LAUNCHES - 1;
}
static void run_launch_good() {
    long long blocks = (long long)((LAUNCH_GOOD_N + 255) / 256);
    Timer t;
    launch_overhead_good<<<(unsigned)blocks, 256>>>(G.b, LAUNCH_GOOD_N);
    t.done("launch_overhead_good", cfg(blocks, 256).c_str());
}

// --- tensor-core-unused
static void run_tc_bad() {
    dim3 grid(GEMM_N / GBN, GEMM_N / GBM), block(16, 16);
    Timer t;
    tensor_core_unused_bad<<<grid, block>>>(G.ga, G.gb, G.gc_bad, GEMM_N, GEMM_N, GEMM_N);
    t.done("tensor_core_unused_bad", "grid=32x32 block=16x16");
    G.gemm_bad_ran = true;
}
static void check_gemm() {
    const size_t nn = size_t(GEMM_N) * GEMM_N;
    std::vector<float> cb(nn), cg(nn);
    std::vector<__half> ha(nn), hb(nn);
    CK(cudaMemcpy(cb.data(), G.gc_bad, nn * sizeof(float), cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(cg.data(), G.gc_good, nn * sizeof(float), cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(ha.data(), G.ga, nn * sizeof(__half), cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(hb.data(), G.gb, nn * sizeof(__half), cudaMemcpyDeviceToHost));
    double max_bg = 0.0;
    for (size_t i = 0; i < nn; ++i) max_bg = fmax(max_bg, fabs(double(cb[i]) - double(cg[i])));
    // A few entries against a double-precision host reference.
    const int pts[8][2] = {{0, 0}, {1, 2047}, {2047, 0}, {2047, 2047},
                           {123, 456}, {1000, 77}, {1536, 1999}, {640, 1280}};
    double max_ref = 0.0;
    for (auto& p : pts) {
        double ref = 0.0;
        for (int k = 0; k < GEMM_N; ++k)
            ref += double(__half2float(ha[size_t(p[0]) * GEMM_N + k])) *
                   double(__half2float(hb[size_t(k) * GEMM_N + p[1]]));
        size_t idx = size_t(p[0]) * GEMM_N + p[1];
        max_ref = fmax(max_ref, fmax(fabs(ref - cb[idx]), fabs(ref - cg[idx])));
    }
    printf("    gemm check: max|C_bad - C_good| = %g over all %zu entries; "
           "max|C - host ref| = %g on 8 entries -> %s\n",
           max_bg, nn, max_ref, (max_bg < 1e-2 && max_ref < 1e-2) ? "OK" : "MISMATCH");
}
static void run_tc_good() {
    dim3 grid(GEMM_N / 32, GEMM_N / 32), block(128);
    Timer t;
    tensor_core_unused_good<<<grid, block>>>(G.ga, G.gb, G.gc_good, GEMM_N, GEMM_N, GEMM_N);
    t.done("tensor_core_unused_good", "grid=64x64 block=128");
    if (G.gemm_bad_ran) check_gemm();
    else printf("    gemm check skipped (tensor_core_unused_bad did not run)\n");
}

// --- uncoalesced-global-store
static void run_uncoal_st_bad() {
    long long blocks = (long long)(N_BIG / 256);
    Timer t;
    uncoalesced_global_store_bad<<<(unsigned)blocks, 256>>>(G.a, G.b, N_BIG, LG2_N_BIG);
    t.done("uncoalesced_global_store_bad", cfg(blocks, 256).c_str());
}
static void run_uncoal_st_good() {
    long long blocks = (long long)(N_BIG / 256);
    Timer t;
    uncoalesced_global_store_good<<<(unsigned)blocks, 256>>>(G.a, G.b, N_BIG);
    t.done("uncoalesced_global_store_good", cfg(blocks, 256).c_str());
}

// --- tail-effect-gemm
static const int GEMM_TAIL_SMEM = 96 * 1024;   // reserved per block: 2 blocks per SM
static const int GEMM_TAIL_REPS = 4;           // K swept 4 times per tile
static int gemm_tail_wave(void (*kernel)(const __half*, const __half*, float*, int, int, int)) {
    CK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, GEMM_TAIL_SMEM));
    int occ = 0;
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, kernel, 128, GEMM_TAIL_SMEM));
    if (occ < 1) { fprintf(stderr, "calib: tail_effect_gemm cannot launch (occupancy 0)\n"); exit(1); }
    return occ * G.nsm;
}
static void run_tail_gemm(bool bad) {
    auto kernel = bad ? tail_effect_gemm_bad : tail_effect_gemm_good;
    int wave = gemm_tail_wave(kernel);
    int tiles = bad ? wave + 1 : wave;
    if (tiles > (GEMM_N / 32) * (GEMM_N / 32)) { fprintf(stderr, "calib: too many tiles\n"); exit(1); }
    printf("    tail_effect_gemm: %d tiles per wave; grid = %d tiles (%.4f waves)\n", wave, tiles,
           double(tiles) / wave);
    Timer t;
    kernel<<<tiles, 128, GEMM_TAIL_SMEM>>>(G.ga, G.gb, G.gc_good, GEMM_N, GEMM_N, GEMM_TAIL_REPS);
    t.done(bad ? "tail_effect_gemm_bad" : "tail_effect_gemm_good",
           cfg(tiles, 128, GEMM_TAIL_SMEM).c_str());
}
static void run_tail_gemm_bad() { run_tail_gemm(true); }
static void run_tail_gemm_good() { run_tail_gemm(false); }

// ---------------------------------------------------------------------------
// Case table (fixed order)
// ---------------------------------------------------------------------------
struct Case {
    const char* slug;
    void (*bad)();
    void (*good)();
};
static const Case CASES[] = {
    {"dram-bandwidth-saturated", run_dram_bad, run_dram_good},
    {"uncoalesced-global-access", run_uncoal_bad, run_uncoal_good},
    {"shared-bank-conflicts", run_bank_bad, run_bank_good},
    {"local-memory-spill", run_local_bad, run_local_good},
    {"memory-latency", run_lat_bad, run_lat_good},
    {"l2-bound", run_l2_bad, run_l2_good},
    {"warp-divergence", run_div_bad, run_div_good},
    {"compute-pipe-saturated", run_pipe_bad, run_pipe_good},
    {"fp64-heavy", run_fp64_bad, run_fp64_good},
    {"special-function-heavy", run_sfu_bad, run_sfu_good},
    {"barrier-stall", run_bar_bad, run_bar_good},
    {"atomic-contention", run_atom_bad, run_atom_good},
    {"low-occupancy", run_lowocc_bad, run_lowocc_good},
    {"tail-effect", run_tail_bad, run_tail_good},
    {"small-grid", run_small_bad, run_small_good},
    {"launch-overhead", run_launch_bad, run_launch_good},
    {"tensor-core-unused", run_tc_bad, run_tc_good},
    // Added after the calib/ recording (recorded into calib_extra/, see tests/data/README.md).
    {"uncoalesced-global-store", run_uncoal_st_bad, run_uncoal_st_good},
    {"tail-effect-gemm", run_tail_gemm_bad, run_tail_gemm_good},
};
static const int NCASES = int(sizeof(CASES) / sizeof(CASES[0]));

static std::string underscored(const char* s) {
    std::string r(s);
    for (auto& ch : r) if (ch == '-') ch = '_';
    return r;
}

static void grid_init_launch(size_t n, int* blocks) {
    size_t b = (n + 255) / 256;
    if (b > size_t(G.nsm) * 32) b = size_t(G.nsm) * 32;
    *blocks = int(b);
}

static void setup() {
    int dev = 0;
    CK(cudaSetDevice(dev));
    CK(cudaGetDeviceProperties(&G.prop, dev));
    G.nsm = G.prop.multiProcessorCount;
    printf("calib: %s, sm_%d%d, %d SMs, L2 %.1f MB, smem/SM %zu KB, opt-in smem/block %zu KB\n",
           G.prop.name, G.prop.major, G.prop.minor, G.nsm, G.prop.l2CacheSize / 1048576.0,
           G.prop.sharedMemPerMultiprocessor / 1024, G.prop.sharedMemPerBlockOptin / 1024);
    if (G.prop.major < 7) { fprintf(stderr, "calib: needs sm_70+ (built for sm_90)\n"); exit(1); }

    const size_t nn = size_t(GEMM_N) * GEMM_N;
    CK(cudaMalloc(&G.a, N_BIG * sizeof(float)));
    CK(cudaMalloc(&G.b, N_BIG * sizeof(float)));
    CK(cudaMalloc(&G.chase, N_CHASE * sizeof(unsigned)));
    CK(cudaMalloc(&G.smallbuf, SMALL_N * sizeof(float)));
    CK(cudaMalloc(&G.sums, 2 * sizeof(float)));
    CK(cudaMalloc(&G.ga, nn * sizeof(__half)));
    CK(cudaMalloc(&G.gb, nn * sizeof(__half)));
    CK(cudaMalloc(&G.gc_bad, nn * sizeof(float)));
    CK(cudaMalloc(&G.gc_good, nn * sizeof(float)));
    CK(cudaMemset(G.b, 0, N_BIG * sizeof(float)));
    CK(cudaMemset(G.sums, 0, 2 * sizeof(float)));
    CK(cudaMemset(G.gc_bad, 0, nn * sizeof(float)));
    CK(cudaMemset(G.gc_good, 0, nn * sizeof(float)));

    int blocks;
    grid_init_launch(N_BIG, &blocks);
    init_float<<<blocks, 256>>>(G.a, N_BIG);
    CK(cudaGetLastError());
    grid_init_launch(SMALL_N, &blocks);
    init_float<<<blocks, 256>>>(G.smallbuf, SMALL_N);
    CK(cudaGetLastError());
    grid_init_launch(N_CHASE, &blocks);
    init_chase<<<blocks, 256>>>(G.chase, N_CHASE);
    CK(cudaGetLastError());
    grid_init_launch(nn, &blocks);
    init_half<<<blocks, 256>>>(G.ga, nn, 7, 3, 17, 8);   // values in [-0.5, 0.5], step 1/16
    CK(cudaGetLastError());
    init_half<<<blocks, 256>>>(G.gb, nn, 5, 1, 13, 6);   // values in [-0.375, 0.375]
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    G.gemm_bad_ran = false;
}

static void teardown() {
    CK(cudaFree(G.a)); CK(cudaFree(G.b)); CK(cudaFree(G.chase)); CK(cudaFree(G.smallbuf));
    CK(cudaFree(G.sums)); CK(cudaFree(G.ga)); CK(cudaFree(G.gb));
    CK(cudaFree(G.gc_bad)); CK(cudaFree(G.gc_good));
}

int main(int argc, char** argv) {
    // Selection: sel[i][0] = run bad of case i, sel[i][1] = run good.
    std::vector<std::pair<bool, bool>> sel(NCASES, {false, false});
    bool any = false;
    for (int a = 1; a < argc; ++a) {
        std::string arg = argv[a];
        if (arg == "--list") {
            for (int i = 0; i < NCASES; ++i) printf("%s\n", CASES[i].slug);
            return 0;
        }
        if (arg == "-h" || arg == "--help") {
            printf("usage: %s [--list] [CASE-SLUG | KERNEL_NAME]...\n", argv[0]);
            return 0;
        }
        std::string u = underscored(arg.c_str());
        bool found = false;
        for (int i = 0; i < NCASES; ++i) {
            std::string base = underscored(CASES[i].slug);
            if (u == base) { sel[i] = {true, true}; found = true; }
            else if (u == base + "_bad") { sel[i].first = true; found = true; }
            else if (u == base + "_good") { sel[i].second = true; found = true; }
        }
        if (!found) {
            fprintf(stderr, "calib: unknown case or kernel '%s' (see --list)\n", arg.c_str());
            return 2;
        }
        any = true;
    }
    if (!any)
        for (auto& s : sel) s = {true, true};

    setup();
    for (int i = 0; i < NCASES; ++i) {
        if (!sel[i].first && !sel[i].second) continue;
        printf("[%s]\n", CASES[i].slug);
        fflush(stdout);
        if (sel[i].first) CASES[i].bad();
        if (sel[i].second) CASES[i].good();
    }
    teardown();
    printf("calib: done, %d kernel launches OK\n", g_kernels_run);
    return 0;
}
