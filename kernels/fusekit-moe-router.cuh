// fusekit fusion-3 (moe-router): the MoE router and the MoE reduction tail at one token.
//
// Device code only, free of ggml headers, so the same kernels run in ggml (through
// fusekit-moe-router.cu) and in the standalone check/timing program (moe_router_check.cu).
//
// Router: one launch replaces ggml's F32 router GEMV (mmvf) and topk_moe_cuda. Block b computes
// logit b exactly as mmvf does (same threads per row, same float2 stride, same two-stage warp
// sum), stores it, and takes a ticket from a counter; the last block to arrive runs stock
// topk_moe_cuda's warp code on all logits (softmax, iterative argmax with ties going to the
// lower expert id, optional normalisation and scale) and resets the counter. Same arithmetic in
// the same order as stock, so ids and weights are bit-identical under the same compile flags.
//
// Tail: one launch replaces the shared-expert gate GEMV (mmvf, one row), its SIGMOID, the MUL
// gating the shared expert and the ADD+ADD with the residual, and optionally the weighted expert
// sum (moe_weighted_reduction). Every block recomputes the gate dot (a few KB from L2) so that no
// second launch or grid-wide sync is needed; each thread then owns one output element.
#pragma once

#include <cuda_runtime.h>
#include <float.h>
#include <math.h>
#include <stdint.h>

namespace fusekit_moe {

constexpr int kWarp       = 32;
constexpr int kCta        = 256;  // threads per block; also mmvf's largest block size
constexpr int kMaxEpt     = 18;   // experts per lane: 576 experts (the largest count stock supports)
constexpr int kMaxTickets = 64;   // counters: one per (device, stream) that runs the router

struct RouterParams {
    const float * w;        // [n_expert][n_embd] router weights, rows contiguous
    const float * x;        // [n_embd] normalised activation of the token
    float       * logits;   // [n_expert] scratch (the MUL_MAT node's own buffer in ggml)
    int32_t     * ids;      // [n_used] selected experts, best first
    float       * weights;  // [n_used] routing weights
    unsigned    * ticket;   // zero before the launch; the last block sets it back to zero
    int   n_embd;           // even
    int   n_expert;
    int   n_used;
    int   gemv_threads;     // the block size mmvf would use for this n_embd (see mmvf_block_size)
    int   norm;             // 1: divide by max(sum of selected, clamp)
    float clamp;
    float scale;            // 1.0f when the graph has no SCALE
    int   sabotage;         // 1: never select the best expert (must fail every check)
};

struct TailParams {
    const float * w_gate;       // [n_embd] shared-expert gate weights (ffn_gate_inp_shexp)
    const float * x;            // [n_embd] normalised activation (the router's x)
    const float * experts;      // [n_used][n_embd] expert outputs, or nullptr: read moe_out instead
    const float * expert_scale; // [n_used] or nullptr
    const float * weights;      // [n_used] routing weights (with experts)
    const float * moe_out;      // [n_embd] weighted expert sum computed by ggml (without experts)
    const float * shexp;        // [n_embd] shared-expert output
    const float * residual;     // [n_embd]
    float       * dst;          // [n_embd]
    int n_embd;                 // even
    int n_used;
    int gemv_threads;           // mmvf's block size for the gate row
    int sabotage;               // 1: drop the last expert (or the residual) (must fail every check)
};

// mmvf's block size choice for an F32 row of n_embd values (launch_mul_mat_vec_f_cuda, NVIDIA):
// the fewest float2 iterations per thread, ties to the smaller block.
inline int mmvf_block_size(int n_embd) {
    int best = kWarp;
    int niter_best = (n_embd + 2 * kWarp - 1) / (2 * kWarp);
    for (int bs = 2 * kWarp; bs <= kCta; bs += kWarp) {
        const int niter = (n_embd + 2 * bs - 1) / (2 * bs);
        if (niter < niter_best) {
            niter_best = niter;
            best = bs;
        }
    }
    return best;
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int off = kWarp / 2; off > 0; off >>= 1) {
        v += __shfl_xor_sync(0xffffffffu, v, off, kWarp);
    }
    return v;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
    for (int off = kWarp / 2; off > 0; off >>= 1) {
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off, kWarp));
    }
    return v;
}

// One F32 row dot x, in mmvf's order: thread t < threads sums float2 columns t, t+threads, ...
// (two multiply-adds each), then a warp sum, then warp 0 sums the 32 per-warp slots (unused
// slots are zero, as in mmvf). Threads beyond `threads` contribute exact zeros, which leave the
// sums unchanged. The result is valid in warp 0. `slots` is 32 floats of shared memory.
//
// AHEAD > 0: the first AHEAD float2 of this thread's columns were loaded into `ahead` already (load_row_ahead,
// before the wait for the previous kernel: the weights are no earlier kernel's output); the sum takes them in
// the same order, so the result is the same bit for bit.
template <int AHEAD = 0>
__device__ __forceinline__ float row_dot_like_mmvf(const float * row, const float * x, int n_embd, int threads,
                                                   float * slots, const float2 (&ahead)[AHEAD > 0 ? AHEAD : 1]) {
    const int tid = threadIdx.x;
    if (tid < kWarp) {
        slots[tid] = 0.0f;
    }
    __syncthreads();
    const float2 * r2 = reinterpret_cast<const float2 *>(row);
    const float2 * x2 = reinterpret_cast<const float2 *>(x);
    float sum = 0.0f;
    if (tid < threads) {
        int c = tid;
#pragma unroll
        for (int i = 0; i < AHEAD; ++i, c += threads) {
            if (c < n_embd / 2) {
                const float2 a = ahead[i];
                const float2 b = x2[c];
                sum += a.x * b.x;
                sum += a.y * b.y;
            }
        }
        for (; c < n_embd / 2; c += threads) {
            const float2 a = r2[c];
            const float2 b = x2[c];
            sum += a.x * b.x;  // mmvf: ggml_cuda_mad(sum, a.x, b.x), the same expression
            sum += a.y * b.y;
        }
    }
    sum = warp_sum(sum);
    slots[tid / kWarp] = sum;
    __syncthreads();
    float total = 0.0f;
    if (tid < kWarp) {
        total = warp_sum(slots[tid]);
    }
    return total;
}

// The first AHEAD float2 of this thread's columns of `row` (zeros past the row), for row_dot_like_mmvf.
template <int AHEAD>
__device__ __forceinline__ void load_row_ahead(const float * row, int n_embd, int threads, float2 (&ahead)[AHEAD]) {
    const float2 * r2 = reinterpret_cast<const float2 *>(row);
    int c = threadIdx.x;
#pragma unroll
    for (int i = 0; i < AHEAD; ++i, c += threads) {
        ahead[i] = (int) threadIdx.x < threads && c < n_embd / 2 ? r2[c] : make_float2(0.0f, 0.0f);
    }
}

// Warp 0's softmax of the logits as stock topk_moe_cuda's softmax_warp_inplace (lane l holds experts l, l + 32, ...;
// experts past n_expert enter as -inf and leave as 0), then NaN -> -FLT_MAX. Both selections start from it.
template <int EPT>
__device__ __forceinline__ void softmax_like_topk_moe(const RouterParams & p, float (&wt)[EPT]) {
    const int lane = threadIdx.x;
#pragma unroll
    for (int i = 0; i < EPT; i++) {
        const int expert = i * kWarp + lane;
        wt[i] = expert < p.n_expert ? __ldcg(p.logits + expert) : -INFINITY;  // L2: written by other blocks
    }

    // softmax_warp_inplace<EPT, false>
    float max_val = -INFINITY;
#pragma unroll
    for (int i = 0; i < EPT; i++) {
        max_val = max(max_val, wt[i]);
    }
    max_val = warp_max(max_val);
    float sum = 0.f;
#pragma unroll
    for (int i = 0; i < EPT; i++) {
        const float val = expf(wt[i] - max_val);
        wt[i] = val;
        sum += val;
    }
    sum = warp_sum(sum);
    const float inv_sum = 1.0f / sum;
#pragma unroll
    for (int i = 0; i < EPT; i++) {
        wt[i] *= inv_sum;
    }

    // NaN would make the argmax pick one expert repeatedly (stock does the same).
#pragma unroll
    for (int i = 0; i < EPT; i++) {
        if (isnan(wt[i])) {
            wt[i] = -FLT_MAX;
        }
    }
}

// Stock topk_moe_cuda (softmax gating, no bias, no delayed softmax) for one row of logits, by
// warp 0: lane l owns experts l, l + 32, ... Mirrors its order of operations exactly.
template <int EPT>
__device__ void select_experts(const RouterParams & p) {
    const int lane = threadIdx.x;
    float wt[EPT];
    softmax_like_topk_moe<EPT>(p, wt);

    float wt_sum = 0.f;
    float out_w[EPT];
#pragma unroll
    for (int i = 0; i < EPT; i++) {
        out_w[i] = 0.f;
    }

    // Iterative argmax: the larger value wins, equal values go to the lower expert id.
    const int rounds = p.n_used + (p.sabotage ? 1 : 0);
    for (int r = 0; r < rounds; r++) {
        float max_v = wt[0];
        int   max_e = lane;
#pragma unroll
        for (int i = 1; i < EPT; i++) {
            const int expert = lane + i * kWarp;
            if (expert < p.n_expert && wt[i] > max_v) {
                max_v = wt[i];
                max_e = expert;
            }
        }
#pragma unroll
        for (int mask = kWarp / 2; mask > 0; mask /= 2) {
            const float v = __shfl_xor_sync(0xffffffffu, max_v, mask, kWarp);
            const int   e = __shfl_xor_sync(0xffffffffu, max_e, mask, kWarp);
            if (v > max_v || (v == max_v && e < max_e)) {
                max_v = v;
                max_e = e;
            }
        }
        if ((max_e & (kWarp - 1)) == lane) {
            wt[max_e / kWarp] = -INFINITY;
        }
        const int k = r - (p.sabotage ? 1 : 0);  // sabotage: the best expert is dropped
        if (k < 0) {
            continue;
        }
        if ((k & (kWarp - 1)) == lane) {
            out_w[k / kWarp] = max_v;
        }
        if ((max_e & (kWarp - 1)) == lane) {
            p.ids[k] = max_e;
            if (p.norm) {
                wt_sum += max_v;
            }
        }
    }

    if (p.norm) {
        wt_sum = warp_sum(wt_sum);
        wt_sum = max(wt_sum, p.clamp);
        const float inv = 1.0f / wt_sum;
        for (int i = 0; i < EPT; i++) {
            out_w[i] *= inv;
        }
    }
#pragma unroll
    for (int i = 0; i < EPT; i++) {
        const int idx = i * kWarp + lane;
        if (idx < p.n_used) {
            p.weights[idx] = out_w[i] * p.scale;
        }
    }
}

// Selection by rank (fusion-3's default since session 13; first the experiment fusion-3-rank-select): the same experts and weights as select_experts, bit for
// bit, without its n_used dependent rounds of warp argmax (each a chain of shuffles; the 35B router's 8 rounds cost
// about 3 us standalone, its k = 1 case 5.3 us against 8.5). The argmax rounds pick the candidates in one total order,
// the larger probability first and equal ones by the lower expert id, so candidate c is picked in round
// "how many candidates come before c". The candidates are the EPT * 32 lane slots of the softmax, the slots past
// n_expert included (they hold 0; select_experts' lane-local start takes slot 0 of every lane unchecked).
// The host-callable pieces below are what kernels/moe_router_host_check.cu runs against an emulation of the rounds.

__host__ __device__ __forceinline__ bool picked_before(float a, int ia, float b, int ib) {
    return a > b || (a == b && ia < ib);
}

// Only candidates that can be picked are ranked, and only against each other (after session 10, where ranking all
// EPT * 32 candidates against all of them cost about 2.8 us, 256 dependent shared-memory reads per thread). Lane l
// owns candidates l, l + 32, ...; its largest value is lane_max[l]. The n_pick lanes whose maxima come first in the
// picking order hold n_pick distinct candidates not below the bound (the n_pick-th of those maxima), so a candidate
// below the bound has at least n_pick candidates before it and is never picked; every candidate before a live one
// is live too, so a live candidate's rank among the live ones is its rank among all.

// The place of lane l's maximum among the 32 lanes' maxima in the picking order.
__host__ __device__ inline int lane_max_rank(const float * lane_max, int l) {
    int rank = 0;
    for (int o = 0; o < kWarp; ++o) {
        rank += picked_before(lane_max[o], o, lane_max[l], l) ? 1 : 0;
    }
    return rank;
}

// A candidate's value against the bound (-INFINITY, no bound, when more than 32 are picked).
__host__ __device__ __forceinline__ bool can_be_picked(float value, float bound) {
    return !(value < bound);
}

// The rank of candidate c among the m live candidates live[0, m) (its rank among all: see above).
__host__ __device__ inline int live_rank(const int * live, int m, const float * probs, int c) {
    const float v    = probs[c];
    int         rank = 0;
    for (int q = 0; q < m; ++q) {
        rank += picked_before(probs[live[q]], live[q], v, c) ? 1 : 0;
    }
    return rank;
}

// Lane `lane`'s part of the normalisation sum as select_experts adds it: the probabilities of the picked experts
// the lane owns (expert % 32 == lane), in the order they were picked.
__host__ __device__ inline float lane_picked_sum(const int * picked_id, const float * probs, int n_used, int lane) {
    float sum = 0.f;
    for (int k = 0; k < n_used; ++k) {
        if ((picked_id[k] & (kWarp - 1)) == lane) {
            sum += probs[picked_id[k]];
        }
    }
    return sum;
}

// The weight select_experts writes for a picked probability (two roundings, as stock: *= inv, then * scale).
__host__ __device__ __forceinline__ float routing_weight(float picked, bool norm, float inv, float scale) {
    float w = picked;
    if (norm) {
        w *= inv;
    }
    return w * scale;
}

// select_experts by rank, by the whole (last) block: warp 0's softmax into shared memory, the bound from the lanes'
// maxima and the live candidates compacted by ballot, every thread ranks live candidates, warp 0 normalises.
template <int EPT>
__device__ void select_experts_by_rank(const RouterParams & p) {
    constexpr int n_cand = EPT * kWarp;
    __shared__ float probs[n_cand];
    __shared__ int   picked_id[n_cand];  // by round
    __shared__ int   live[n_cand];       // the candidates that can be picked, in ballot order
    __shared__ float lane_max[kWarp];
    __shared__ int   n_live;
    const int tid     = threadIdx.x;
    const int dropped = p.sabotage ? 1 : 0;  // sabotage: the best expert is dropped, as in select_experts
    if (tid < kWarp) {
        float wt[EPT];
        softmax_like_topk_moe<EPT>(p, wt);
        float m = wt[0];
#pragma unroll
        for (int i = 0; i < EPT; i++) {
            probs[i * kWarp + tid] = wt[i];
            m                      = wt[i] > m ? wt[i] : m;
        }
        lane_max[tid] = m;
        __syncwarp();
        const int n_pick = p.n_used + dropped;
        float     bound  = -INFINITY;
        if (n_pick <= kWarp) {
            const unsigned at = __ballot_sync(0xffffffffu, lane_max_rank(lane_max, tid) == n_pick - 1);
            bound             = lane_max[__ffs(at) - 1];
        }
        int base = 0;
#pragma unroll
        for (int i = 0; i < EPT; i++) {
            const bool     keep = can_be_picked(wt[i], bound);
            const unsigned mask = __ballot_sync(0xffffffffu, keep);
            if (keep) {
                live[base + __popc(mask & ((1u << tid) - 1u))] = i * kWarp + tid;
            }
            base += __popc(mask);
        }
        if (tid == 0) {
            n_live = base;
        }
    }
    __syncthreads();
    const int m = n_live;
    for (int q = tid; q < m; q += blockDim.x) {
        const int c = live[q];
        const int k = live_rank(live, m, probs, c) - dropped;
        if (k >= 0 && k < p.n_used) {
            picked_id[k] = c;
            p.ids[k]     = c;
        }
    }
    __syncthreads();
    if (tid >= kWarp) {
        return;
    }
    float inv = 1.0f;
    if (p.norm) {
        float wt_sum = warp_sum(lane_picked_sum(picked_id, probs, p.n_used, tid));
        wt_sum       = max(wt_sum, p.clamp);
        inv          = 1.0f / wt_sum;
    }
    for (int k = tid; k < p.n_used; k += kWarp) {
        p.weights[k] = routing_weight(probs[picked_id[k]], p.norm != 0, inv, p.scale);
    }
}

// Hooks: wait_for_inputs() before reading anything an earlier kernel wrote (ggml: the
// programmatic-dependent-launch wait); allow_dependents() once this block's reads are issued.
// AHEAD > 0 (an experiment): the block's first AHEAD float2 of router weights per thread are loaded before the wait.
// RANK (an experiment): the last block selects by rank (select_experts_by_rank), not by warp-argmax rounds.
template <class Hooks, int EPT, int AHEAD = 0, bool RANK = false>
__global__ void __launch_bounds__(kCta) router_kernel(const RouterParams p) {
    __shared__ float slots[kWarp];
    __shared__ int   is_last;
    if constexpr (AHEAD == 0) {
        Hooks::wait_for_inputs();
    }
    const int row = blockIdx.x;
    const float * wrow = p.w + (size_t) row * p.n_embd;
    float2 ahead[AHEAD > 0 ? AHEAD : 1];
    if constexpr (AHEAD > 0) {
        load_row_ahead<AHEAD>(wrow, p.n_embd, p.gemv_threads, ahead);
        Hooks::wait_for_inputs();
    }
    const float logit = row_dot_like_mmvf<AHEAD>(wrow, p.x, p.n_embd, p.gemv_threads, slots, ahead);
    Hooks::allow_dependents();
    if (threadIdx.x == 0) {
        p.logits[row] = logit;
        __threadfence();  // the logit is visible device-wide before the ticket says so
        is_last = atomicAdd(p.ticket, 1u) == gridDim.x - 1;
    }
    __syncthreads();
    if constexpr (RANK) {
        if (!is_last) {
            return;
        }
        __threadfence();
        select_experts_by_rank<EPT>(p);
    } else {
        if (!is_last || threadIdx.x >= kWarp) {
            return;
        }
        __threadfence();
        select_experts<EPT>(p);
    }
    if (threadIdx.x == 0) {
        *p.ticket = 0;  // ready for the next launch on this stream
    }
}

template <class Hooks>
__global__ void __launch_bounds__(kCta) tail_kernel(const TailParams p) {
    __shared__ float slots[kWarp];
    __shared__ float gate;
    Hooks::wait_for_inputs();
    const float2 no_ahead[1] = {make_float2(0.0f, 0.0f)};
    const float g = row_dot_like_mmvf<0>(p.w_gate, p.x, p.n_embd, p.gemv_threads, slots, no_ahead);
    if (threadIdx.x == 0) {
        gate = 1.0f / (1.0f + expf(-g));  // ggml's op_sigmoid
    }
    __syncthreads();
    Hooks::allow_dependents();

    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= p.n_embd) {
        return;
    }
    float moe;
    if (p.experts != nullptr) {
        // moe_weighted_reduction_f32, the same expressions in the same order.
        const int   used  = p.n_used - (p.sabotage ? 1 : 0);
        const float s0    = p.expert_scale != nullptr ? p.expert_scale[0] : 1.0f;
        moe = (p.experts[i] * s0) * p.weights[0];
        for (int e = 1; e < used; ++e) {
            const float s = p.expert_scale != nullptr ? p.expert_scale[e] : 1.0f;
            moe += (p.experts[(size_t) e * p.n_embd + i] * s) * p.weights[e];
        }
    } else {
        moe = p.moe_out[i];
    }
    // Separate kernels in stock: MUL rounds the product, then two rounded ADDs. _rn intrinsics
    // keep the compiler from contracting them into one fma.
    const float gated = __fmul_rn(p.shexp[i], gate);
    const float res   = (p.sabotage && p.experts == nullptr) ? 0.0f : p.residual[i];
    p.dst[i] = __fadd_rn(__fadd_rn(moe, gated), res);
}

// Experts per lane for n_expert, as topk_moe_cuda: 1 up to 32 experts, else n_expert / 32.
// Returns 0 when the count has no instantiation here.
inline int experts_per_lane(int n_expert) {
    if (n_expert <= kWarp) {
        return 1;
    }
    if (n_expert % kWarp != 0 || n_expert / kWarp > kMaxEpt) {
        return 0;
    }
    const int ept = n_expert / kWarp;
    switch (ept) {
        case 2: case 4: case 8: case 9: case 16: case 18: return ept;
        default: return 0;
    }
}

// True when the router kernel covers this shape: the counts stock topk_moe instantiates (powers of
// two up to 512, 288, 576), at most 32 per lane of selected experts, an even row.
inline bool router_supported(int n_embd, int n_expert, int n_used) {
    const bool stock_count = ((n_expert & (n_expert - 1)) == 0 && n_expert <= 512) || n_expert == 288 || n_expert == 576;
    return stock_count && experts_per_lane(n_expert) > 0 && n_used >= 1 && n_used <= n_expert && n_embd >= 2 &&
           n_embd % 2 == 0;
}

// The selection router_kernel_for picks when not told: by rank (the same ids and weights as the argmax rounds, bit
// for bit; 1.039x decode on the H200 in session 13 against 1.0 with the rounds, results/h200-2026-12-01-session13-*).
// The rounds stay available as RANK = false: the standalone check compares the two bit for bit.
#ifndef FUSEKIT_MOE_RANK_SELECT
#define FUSEKIT_MOE_RANK_SELECT true
#endif

template <class Hooks, int AHEAD = 0, bool RANK = FUSEKIT_MOE_RANK_SELECT>
void router_kernel_for(int n_expert, void (**kernel)(RouterParams)) {
    switch (experts_per_lane(n_expert)) {
        case 1:  *kernel = router_kernel<Hooks, 1, AHEAD, RANK>;  break;
        case 2:  *kernel = router_kernel<Hooks, 2, AHEAD, RANK>;  break;
        case 4:  *kernel = router_kernel<Hooks, 4, AHEAD, RANK>;  break;
        case 8:  *kernel = router_kernel<Hooks, 8, AHEAD, RANK>;  break;
        case 9:  *kernel = router_kernel<Hooks, 9, AHEAD, RANK>;  break;
        case 16: *kernel = router_kernel<Hooks, 16, AHEAD, RANK>; break;
        case 18: *kernel = router_kernel<Hooks, 18, AHEAD, RANK>; break;
        default: *kernel = nullptr;                  break;
    }
}

inline dim3 router_grid(const RouterParams & p) { return dim3(p.n_expert); }
inline dim3 tail_grid(const TailParams & p) { return dim3((p.n_embd + kCta - 1) / kCta); }

// No-op hooks for the standalone program (no programmatic dependent launch there).
struct PlainHooks {
    __device__ static void wait_for_inputs() {}
    __device__ static void allow_dependents() {}
};

}  // namespace fusekit_moe
