// Standalone experiment for issue #7 (after session 15's fusion-1-glu-q8 loss): what it costs a one-token GLU GEMV to
// hand its output to a q8_1 copy, the input of the down product, four ways on the same data:
//   separate  the GEMV writes y and a second launch quantizes it, one warp per 32-value block (ggml's way)
//   global    the CTA that completes a 32-row group (fence, atomic counter) reads the group back from L2 and
//             quantizes it: glu-q8's hand-off, 2.7 µs per launch slower in ggml (session 15)
//   cluster   the 32 / RPC CTAs of a group form a thread-block cluster (sm_90): each keeps its rows in shared memory;
//             after cluster.sync() rank 0 reads them through distributed shared memory and quantizes the group
//   wide      one CTA computes all 32 rows of a group and quantizes them itself (no hand-off, 32× fewer CTAs)
// and the GEMV alone, the floor of them all.
//
//   nvcc -O3 -std=c++17 -arch=sm_90 -Ikernels -o glu_handoff_check kernels/glu_handoff_check.cu
//   ./glu_handoff_check [--sabotage] [--json FILE] [--once]
//
// The GEMV: y_r = silu(g_r . x) (u_r . x) over R = 4096 rows (the 35B preset's 8 experts of 512 at one token) of
// K = 2048, half weights, fp32 sums; 4 warps per CTA split K, RPC rows per CTA. Checks per variant: y against float64
// of the same half weights (relative 1e-5), and every q8_1 block byte for byte against the host's quantize of the
// device's own y (fusekit_nq::store_q8_1's expressions, its butterfly order of the sum). Timing: CUDA graphs of kReps
// evaluations, replayed (what a captured ggml graph pays), weights rotating over copies larger than L2.
// --sabotage: every GEMV drops its last k term and every block is zeroed: every check must fail.
#include "fusekit-gdn-chains.cuh"  // butterfly32: the xor butterfly's sum as lane 0 sees it
#include "fusekit-norm-quantize.cuh"
#include "q8-1-host.cuh"  // quantize_block: the host's quantize_q8_1
#include "standalone.cuh"

#include <cooperative_groups.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace cg = cooperative_groups;
using fusekit_nq::block_q8_1_t;

namespace {

constexpr int kRows = 4096, kK = 2048, kWarps = 4, kThreads = 32 * kWarps, kGroup = 32;
constexpr int kChunks       = kK / 8;                // 16-byte chunks of 8 halves per weight row
constexpr int kChunksPerThr = kChunks / kThreads;    // 2
constexpr int kCopies = 4, kReps = 20, kBatches = 15;  // 4 copies of 33.5 MB of weights: past the 60 MB L2
static_assert(kChunks % kThreads == 0 && kRows % kGroup == 0, "whole chunks per thread, whole groups");

struct Weights {
    const half * gate;
    const half * up;
};

// The RPC rows from row0 on: every thread sums its chunks, the warps reduce, the CTA adds its 4 warps in order; rows
// (shared) and y get y_r. FenceY: each writer fences its y store before the closing barrier, so that one thread's
// atomic after it publishes the CTA's rows (the global hand-off). sabotage drops the last k term of every row.
template <int RPC, bool FenceY = false>
__device__ void glu_rows(Weights w, const float * x, int row0, int sabotage, float * rows, float * y) {
    __shared__ float part[kWarps][RPC][2];
    const int        tid = int(threadIdx.x), lane = tid % 32, warp = tid / 32;
    float            acc[RPC][2];
#pragma unroll
    for (int j = 0; j < RPC; ++j) {
        acc[j][0] = acc[j][1] = 0.0f;
    }
#pragma unroll
    for (int c = 0; c < kChunksPerThr; ++c) {
        const int    chunk = tid + c * kThreads;
        const float4 xa = reinterpret_cast<const float4 *>(x)[2 * chunk];
        const float4 xb = reinterpret_cast<const float4 *>(x)[2 * chunk + 1];
        const float  last = sabotage && chunk == kChunks - 1 ? 0.0f : xb.w;  // the sabotage's dropped term
        const float  xs[8] = { xa.x, xa.y, xa.z, xa.w, xb.x, xb.y, xb.z, last };
#pragma unroll
        for (int j = 0; j < RPC; ++j) {
            const int64_t at = int64_t(row0 + j) * kK / 8 + chunk;
            const uint4   gb = reinterpret_cast<const uint4 *>(w.gate)[at];
            const uint4   ub = reinterpret_cast<const uint4 *>(w.up)[at];
            const half *  gh = reinterpret_cast<const half *>(&gb);
            const half *  uh = reinterpret_cast<const half *>(&ub);
#pragma unroll
            for (int e = 0; e < 8; ++e) {
                acc[j][0] += __half2float(gh[e]) * xs[e];
                acc[j][1] += __half2float(uh[e]) * xs[e];
            }
        }
    }
#pragma unroll
    for (int j = 0; j < RPC; ++j) {
        for (int m = 0; m < 2; ++m) {
            float v = acc[j][m];
#pragma unroll
            for (int offset = 16; offset > 0; offset >>= 1) {
                v += __shfl_xor_sync(0xffffffffu, v, offset);
            }
            if (lane == 0) {
                part[warp][j][m] = v;
            }
        }
    }
    __syncthreads();
    for (int j = tid; j < RPC; j += kThreads) {
        float g = 0.0f, u = 0.0f;
        for (int v = 0; v < kWarps; ++v) {
            g += part[v][j][0];
            u += part[v][j][1];
        }
        const float out = g / (1.0f + expf(-g)) * u;
        rows[j]         = out;
        y[row0 + j]     = out;
        if constexpr (FenceY) {
            __threadfence();
        }
    }
    __syncthreads();
}

template <int RPC>
__global__ void __launch_bounds__(kThreads) glu_only(Weights w, const float * x, float * y, int sabotage) {
    __shared__ float rows[RPC];
    glu_rows<RPC>(w, x, int(blockIdx.x) * RPC, sabotage, rows, y);
}

// ggml's quantize_q8_1 at one token: one warp per block, lane = value.
__global__ void __launch_bounds__(kThreads) quantize_groups(const float * y, block_q8_1_t * q, int sabotage) {
    const int block = int(blockIdx.x) * kWarps + int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32;
    fusekit_nq::store_q8_1(q, block * kGroup + lane, y[block * kGroup + lane], sabotage != 0);
}

template <int RPC>
__global__ void __launch_bounds__(kThreads)
    glu_global(Weights w, const float * x, float * y, block_q8_1_t * q, unsigned * counters, int sabotage) {
    __shared__ float rows[RPC];
    __shared__ bool  last;
    const int        row0 = int(blockIdx.x) * RPC, group = row0 / kGroup, tid = int(threadIdx.x);
    glu_rows<RPC, true>(w, x, row0, sabotage, rows, y);  // each y store fenced before the closing barrier
    if (tid == 0) {
        last = atomicAdd(&counters[group], unsigned(RPC)) + RPC == kGroup;
    }
    __syncthreads();
    if (last && tid < kGroup) {
        __threadfence();
        const float xi = __ldcg(&y[group * kGroup + tid]);
        fusekit_nq::store_q8_1(q, group * kGroup + tid, xi, sabotage != 0);
        if (tid == 0) {
            counters[group] = 0;  // ready for the next evaluation
        }
    }
}

template <int RPC>
__global__ void __launch_bounds__(kThreads) glu_cluster(Weights w, const float * x, float * y, block_q8_1_t * q, int sabotage) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    __shared__ float  rows[RPC];
    cg::cluster_group cluster = cg::this_cluster();
    const int         row0 = int(blockIdx.x) * RPC, group = row0 / kGroup, tid = int(threadIdx.x);
    glu_rows<RPC>(w, x, row0, sabotage, rows, y);
    cluster.sync();  // every CTA's rows are in its shared memory
    if (cluster.block_rank() == 0 && tid < kGroup) {
        const float * remote = cluster.map_shared_rank(rows, tid / RPC);
        fusekit_nq::store_q8_1(q, group * kGroup + tid, remote[tid % RPC], sabotage != 0);
    }
    cluster.sync();  // rank 0 has read them: the others' shared memory may go
#endif
}

template <int RPC>
__global__ void __launch_bounds__(kThreads) glu_wide(Weights w, const float * x, float * y, block_q8_1_t * q, int sabotage) {
    static_assert(RPC == kGroup, "one CTA per group");
    __shared__ float rows[RPC];
    const int        row0 = int(blockIdx.x) * RPC;
    glu_rows<RPC>(w, x, row0, sabotage, rows, y);
    if (threadIdx.x < kGroup) {
        fusekit_nq::store_q8_1(q, row0 + int(threadIdx.x), rows[threadIdx.x], sabotage != 0);
    }
}

// ---- host ---------------------------------------------------------------------------------------------------------

struct Buffers {
    std::vector<Weights> copies;  // device weight copies
    float *              x;
    float *              y;
    block_q8_1_t *       q;
    unsigned *           counters;
    int                  sabotage;
};

// One evaluation of a variant on stream s with weight copy c; false where the device cannot launch it.
using Eval = bool (*)(const Buffers &, cudaStream_t, int);

template <int RPC> bool eval_only(const Buffers & b, cudaStream_t s, int c) {
    glu_only<RPC><<<kRows / RPC, kThreads, 0, s>>>(b.copies[c], b.x, b.y, b.sabotage);
    return cudaGetLastError() == cudaSuccess;
}
template <int RPC> bool eval_separate(const Buffers & b, cudaStream_t s, int c) {
    glu_only<RPC><<<kRows / RPC, kThreads, 0, s>>>(b.copies[c], b.x, b.y, b.sabotage);
    quantize_groups<<<kRows / kGroup / kWarps, kThreads, 0, s>>>(b.y, b.q, b.sabotage);
    return cudaGetLastError() == cudaSuccess;
}
template <int RPC> bool eval_global(const Buffers & b, cudaStream_t s, int c) {
    glu_global<RPC><<<kRows / RPC, kThreads, 0, s>>>(b.copies[c], b.x, b.y, b.q, b.counters, b.sabotage);
    return cudaGetLastError() == cudaSuccess;
}
// The launch of glu_cluster<RPC>: one cluster of kGroup / RPC CTAs per 32-row group. attr must outlive cfg's use.
template <int RPC> cudaLaunchConfig_t cluster_config(cudaLaunchAttribute & attr, cudaStream_t s) {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim            = dim3(kRows / RPC);
    cfg.blockDim           = dim3(kThreads);
    cfg.stream             = s;
    attr.id                = cudaLaunchAttributeClusterDimension;
    attr.val.clusterDim.x  = kGroup / RPC;
    attr.val.clusterDim.y  = 1;
    attr.val.clusterDim.z  = 1;
    cfg.attrs              = &attr;
    cfg.numAttrs           = 1;
    return cfg;
}
template <int RPC> bool eval_cluster(const Buffers & b, cudaStream_t s, int c) {
    cudaLaunchAttribute      attr;
    const cudaLaunchConfig_t cfg = cluster_config<RPC>(attr, s);
    return cudaLaunchKernelEx(&cfg, glu_cluster<RPC>, b.copies[c], (const float *) b.x, b.y, b.q, b.sabotage) ==
           cudaSuccess;
}
template <int RPC> bool eval_wide(const Buffers & b, cudaStream_t s, int c) {
    glu_wide<RPC><<<kRows / RPC, kThreads, 0, s>>>(b.copies[c], b.x, b.y, b.q, b.sabotage);
    return cudaGetLastError() == cudaSuccess;
}

// Whether a cluster of C CTAs of this kernel can be resident at all (16 needs the non-portable size).
template <int RPC> bool cluster_launchable() {
    if (kGroup / RPC > 8 &&
        cudaFuncSetAttribute(glu_cluster<RPC>, cudaFuncAttributeNonPortableClusterSizeAllowed, 1) != cudaSuccess) {
        cudaGetLastError();
        return false;
    }
    cudaLaunchAttribute      attr;
    const cudaLaunchConfig_t cfg      = cluster_config<RPC>(attr, nullptr);
    int                      clusters = 0;
    const bool ok = cudaOccupancyMaxActiveClusters(&clusters, glu_cluster<RPC>, &cfg) == cudaSuccess && clusters > 0;
    cudaGetLastError();
    return ok;
}

struct Variant {
    const char * name;
    int          rows_per_cta, cluster;
    bool         quantizes;
    Eval         eval;
    bool (*launchable)();
};

bool always() {
    return true;
}

const Variant kVariants[] = {
    { "GEMV alone (no q8_1 copy)", 2, 1, false, eval_only<2>, always },
    { "separate: GEMV, then quantize", 2, 1, true, eval_separate<2>, always },
    { "separate, 4 rows per CTA", 4, 1, true, eval_separate<4>, always },
    { "global hand-off (glu-q8's)", 2, 1, true, eval_global<2>, always },
    { "global hand-off, 4 rows per CTA", 4, 1, true, eval_global<4>, always },
    { "cluster of 16 CTAs of 2 rows", 2, 16, true, eval_cluster<2>, cluster_launchable<2> },
    { "cluster of 8 CTAs of 4 rows", 4, 8, true, eval_cluster<4>, cluster_launchable<4> },
    { "wide: one CTA per 32 rows", 32, 1, true, eval_wide<32>, always },
};

// A JSON number: %.6g, or null where it is not finite (a NaN output must not break the file).
std::string json_number(double v) {
    if (!std::isfinite(v)) {
        return "null";
    }
    char text[32];
    std::snprintf(text, sizeof(text), "%.6g", v);
    return text;
}

// Microseconds per evaluation: a graph of kReps evaluations (weight copies in turn), replayed kBatches times.
std::vector<double> graph_us(const Variant & v, const Buffers & b) {
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    if (fusekit_standalone::g_launch_once) {  // under a profiler: one evaluation, no timing
        v.eval(b, s, 0);
        CHECK(cudaStreamSynchronize(s));
        CHECK(cudaStreamDestroy(s));
        return { 0.0 };
    }
    cudaGraph_t     graph;
    cudaGraphExec_t exec;
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    for (int i = 0; i < kReps; ++i) {
        v.eval(b, s, i % kCopies);
    }
    CHECK(cudaStreamEndCapture(s, &graph));
    CHECK(cudaGraphInstantiate(&exec, graph, 0));
    cudaEvent_t e0, e1;
    CHECK(cudaEventCreate(&e0));
    CHECK(cudaEventCreate(&e1));
    for (int i = 0; i < 3; ++i) {
        CHECK(cudaGraphLaunch(exec, s));
    }
    std::vector<double> us;
    for (int r = 0; r < kBatches; ++r) {
        CHECK(cudaEventRecord(e0, s));
        CHECK(cudaGraphLaunch(exec, s));
        CHECK(cudaEventRecord(e1, s));
        CHECK(cudaEventSynchronize(e1));
        float ms = 0;
        CHECK(cudaEventElapsedTime(&ms, e0, e1));
        us.push_back(1000.0 * ms / kReps);
    }
    CHECK(cudaEventDestroy(e0));
    CHECK(cudaEventDestroy(e1));
    CHECK(cudaGraphExecDestroy(exec));
    CHECK(cudaGraphDestroy(graph));
    CHECK(cudaStreamDestroy(s));
    return us;
}

}  // namespace

int main(int argc, char ** argv) {
    const fusekit_standalone::Options options = fusekit_standalone::parse_options(argc, argv);
    cudaDeviceProp                    prop;
    CHECK(cudaGetDeviceProperties(&prop, 0));
    std::printf("device: %s (sm_%d%d, %d SMs)%s\n", prop.name, prop.major, prop.minor, prop.multiProcessorCount,
                options.sabotage ? "  [sabotage]" : "");

    // inputs: x away from 0 (the sabotage's dropped term matters), weights in [-1, 1] as half
    std::mt19937                          rng(20261202u);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::vector<float>                    x(kK);
    for (float & v : x) {
        v = u(rng) + (u(rng) >= 0.0f ? 0.5f : -0.5f);
    }
    const size_t      elems = size_t(kRows) * kK;
    std::vector<half> gate(elems), up(elems);
    for (size_t i = 0; i < elems; ++i) {
        gate[i] = __float2half(u(rng) * 0.05f);
        up[i]   = __float2half(u(rng) * 0.05f);
    }
    // float64 reference of the same half weights
    std::vector<double> ref(kRows);
    double              ref_max = 0.0;
    for (int r = 0; r < kRows; ++r) {
        double g = 0.0, v = 0.0;
        for (int k = 0; k < kK; ++k) {
            g += double(__half2float(gate[size_t(r) * kK + k])) * x[k];
            v += double(__half2float(up[size_t(r) * kK + k])) * x[k];
        }
        ref[r]  = g / (1.0 + std::exp(-g)) * v;
        ref_max = std::fmax(ref_max, std::fabs(ref[r]));
    }

    Buffers b{};
    b.sabotage = options.sabotage ? 1 : 0;
    for (int c = 0; c < kCopies; ++c) {
        half * g = nullptr;
        half * v = nullptr;
        CHECK(cudaMalloc(&g, elems * sizeof(half)));
        CHECK(cudaMalloc(&v, elems * sizeof(half)));
        CHECK(cudaMemcpy(g, gate.data(), elems * sizeof(half), cudaMemcpyHostToDevice));
        CHECK(cudaMemcpy(v, up.data(), elems * sizeof(half), cudaMemcpyHostToDevice));
        b.copies.push_back({ g, v });
    }
    CHECK(cudaMalloc(&b.x, kK * sizeof(float)));
    CHECK(cudaMemcpy(b.x, x.data(), kK * sizeof(float), cudaMemcpyHostToDevice));
    CHECK(cudaMalloc(&b.y, kRows * sizeof(float)));
    CHECK(cudaMalloc(&b.q, kRows / kGroup * sizeof(block_q8_1_t)));
    CHECK(cudaMalloc(&b.counters, kRows / kGroup * sizeof(unsigned)));
    CHECK(cudaMemset(b.counters, 0, kRows / kGroup * sizeof(unsigned)));

    constexpr double kTol = 1e-5;
    int              checks = 0, failures = 0;
    std::string json = "{\"device\": \"" + std::string(prop.name) + "\", \"sabotage\": " +
                       (options.sabotage ? "true" : "false") + ", \"rows\": " + std::to_string(kRows) +
                       ", \"k\": " + std::to_string(kK) + ", \"reps_per_graph\": " + std::to_string(kReps) +
                       ", \"variants\": [";
    std::printf("%-34s %5s %7s %10s %8s %9s\n", "variant", "rows", "cluster", "y rel_err", "q8_1", "us");
    for (const Variant & v : kVariants) {
        const bool launchable = v.launchable();
        std::string entry = std::string(&v == kVariants ? "" : ", ") + "{\"name\": \"" + v.name +
                            "\", \"rows_per_cta\": " + std::to_string(v.rows_per_cta) +
                            ", \"cluster\": " + std::to_string(v.cluster) +
                            ", \"launchable\": " + (launchable ? "true" : "false");
        if (!launchable) {
            std::printf("%-34s %5d %7d   not launchable on this device: skipped\n", v.name, v.rows_per_cta, v.cluster);
            json += entry + "}";
            continue;
        }
        // one evaluation on sentinels: y NaN, every q8_1 byte 0xAB
        CHECK(cudaMemset(b.y, 0xFF, kRows * sizeof(float)));
        CHECK(cudaMemset(b.q, 0xAB, kRows / kGroup * sizeof(block_q8_1_t)));
        if (!v.eval(b, 0, 0)) {
            std::fprintf(stderr, "%s: launch failed: %s\n", v.name, cudaGetErrorString(cudaGetLastError()));
            return 2;
        }
        CHECK(cudaDeviceSynchronize());
        std::vector<float>        y(kRows);
        std::vector<block_q8_1_t> q(kRows / kGroup);
        CHECK(cudaMemcpy(y.data(), b.y, kRows * sizeof(float), cudaMemcpyDeviceToHost));
        CHECK(cudaMemcpy(q.data(), b.q, q.size() * sizeof(block_q8_1_t), cudaMemcpyDeviceToHost));
        double err = 0.0;
        for (int r = 0; r < kRows; ++r) {
            err = std::isfinite(y[r]) ? std::fmax(err, std::fabs(y[r] - ref[r]) / ref_max) : INFINITY;
        }
        const bool ok_y = err <= kTol;
        int        bad_blocks = 0;
        for (int g = 0; v.quantizes && g < kRows / kGroup; ++g) {
            const block_q8_1_t want = fusekit_q8_host::quantize_block(&y[size_t(g) * kGroup]);
            bad_blocks += std::memcmp(&want, &q[g], sizeof(block_q8_1_t)) != 0;
        }
        const bool ok_q = bad_blocks == 0;
        checks += 1 + int(v.quantizes);
        failures += int(!ok_y) + int(v.quantizes && !ok_q);

        const std::vector<double> us  = graph_us(v, b);
        const double              med = fusekit_standalone::median(us);
        std::printf("%-34s %5d %7d %10.2e %8s %9.2f\n", v.name, v.rows_per_cta, v.cluster, err,
                    v.quantizes ? (ok_q ? "ok" : "WRONG") : "-", med);
        entry += ", \"err_y\": " + json_number(err) + ", \"ok_y\": " + (ok_y ? "true" : "false");
        if (v.quantizes) {
            entry += ", \"bad_blocks\": " + std::to_string(bad_blocks) + ", \"ok_q\": " + (ok_q ? "true" : "false");
        }
        entry += ", \"median_us\": " + json_number(med) + ", \"batches_us\": [";
        for (size_t i = 0; i < us.size(); ++i) {
            entry += (i ? ", " : "") + json_number(us[i]);
        }
        json += entry + "]}";
    }
    json += "], \"tolerance_y\": " + json_number(kTol) + ", \"checks\": " + std::to_string(checks) +
            ", \"failures\": " + std::to_string(failures) + "}\n";
    for (const Weights & w : b.copies) {
        CHECK(cudaFree(const_cast<half *>(w.gate)));
        CHECK(cudaFree(const_cast<half *>(w.up)));
    }
    CHECK(cudaFree(b.x));
    CHECK(cudaFree(b.y));
    CHECK(cudaFree(b.q));
    CHECK(cudaFree(b.counters));
    return fusekit_standalone::finish(options, json, checks, failures);
}
