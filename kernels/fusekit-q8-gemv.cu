// fusekit fusion-5 (q8-gemv): ggml glue for the one-token Q8_0 kernel in fusekit-q8-gemv.cuh.
//
// ggml_cuda_mul_mat_vec_q calls fusekit_q8_gemv_try with the arguments it would give MMVQ; the call
// returns false, and MMVQ runs as in stock, whenever the case is not ours: another type, more than one
// token, an NVFP4 scale, a layout whose rows are not 16-byte aligned, or GGML_CUDA_DISABLE_FUSION set.
// Q4_0 weights (the MoE experts of the 35B preset) take the same kernel only where kQ4_0Weights is on
// (patches/experiments/fusion-5-q4-0.patch): on the H200 it was slower than MMVQ on those experts
// (results/h200-2026-12-01-session6-ldg/), so fusion-5 leaves it off.
#include "fusekit-q8-gemv-glue.cuh"

#include "fusekit-q8-gemv.cuh"
#include "unary.cuh"

#include <cstdlib>

namespace {

// ggml's programmatic-dependent-launch wait, and ggml's own activation functions, so a fused
// gate/up epilogue matches MMVQ's exactly.
struct GgmlHooks {
    __device__ static void wait_for_inputs() { ggml_cuda_pdl_sync(); }
    __device__ static float apply(fusekit_q8::Glu glu, float x, float g, float limit) {
        switch (glu) {
            case fusekit_q8::Glu::swiglu:       return x * ggml_cuda_op_silu_single(g);
            case fusekit_q8::Glu::geglu:        return x * ggml_cuda_op_gelu_single(g);
            case fusekit_q8::Glu::swiglu_oai:   return ggml_cuda_op_swiglu_oai_single(g, x);
            case fusekit_q8::Glu::swiglu_clamp: return ggml_cuda_op_swiglu_clamp_single(g, x, limit);
            case fusekit_q8::Glu::mul:          return x * g;
            default:                            return x;
        }
    }
};

fusekit_q8::Glu glu_of(ggml_glu_op op) {
    switch (op) {
        case GGML_GLU_OP_SWIGLU:       return fusekit_q8::Glu::swiglu;
        case GGML_GLU_OP_GEGLU:        return fusekit_q8::Glu::geglu;
        case GGML_GLU_OP_SWIGLU_OAI:   return fusekit_q8::Glu::swiglu_oai;
        case GGML_GLU_OP_SWIGLU_CLAMP: return fusekit_q8::Glu::swiglu_clamp;
        default:                       return fusekit_q8::Glu::mul;  // MMVQ's default: result * gate
    }
}

// Off in fusion-5 itself; the experiment patch sets it to true.
constexpr bool kQ4_0Weights = false;

bool fusion_disabled() {
    // The same reading as ggml-cuda.cu's graph evaluation: set and non-zero.
    static const bool disabled = [] {
        const char * value = std::getenv("GGML_CUDA_DISABLE_FUSION");
        return value != nullptr && std::atoi(value) != 0;
    }();
    return disabled;
}

}  // namespace

bool fusekit_q8_gemv_try(
        ggml_type type, const void * vx, const void * vy, const int32_t * ids, const ggml_cuda_mm_fusion_args_device & fusion,
        bool x_is_weight, float * dst, int64_t ncols_x, int64_t nrows_x, int64_t ncols_dst,
        int64_t stride_row_x, int64_t stride_col_y, int64_t stride_col_dst,
        int64_t nchannels_x, int64_t nchannels_y, int64_t nchannels_dst,
        int64_t stride_channel_x, int64_t stride_channel_y, int64_t stride_channel_dst,
        int64_t nsamples_x, int64_t nsamples_dst, int64_t stride_sample_x, int64_t stride_sample_y, int64_t stride_sample_dst,
        cudaStream_t stream) {
    GGML_UNUSED_VARS(stride_col_y, stride_col_dst);
    const bool q4_0 = kQ4_0Weights && type == GGML_TYPE_Q4_0;
    if ((type != GGML_TYPE_Q8_0 && !q4_0) || ncols_dst != 1 || fusion_disabled()) {
        return false;
    }
    if (fusion.x_scale != nullptr || fusion.gate_scale != nullptr) {
        return false;
    }
    const fusekit_q8::Weights weights = q4_0 ? fusekit_q8::Weights::q4_0 : fusekit_q8::Weights::q8_0;
    if (!fusekit_q8::layout_fits(vx, fusion.gate, ncols_x, stride_row_x, stride_channel_x, stride_sample_x, weights)) {
        return false;
    }
    if (nrows_x > INT32_MAX || nchannels_dst > 65535 || nsamples_dst > 65535) {
        return false;
    }

    fusekit_q8::Problem p{};
    p.weights     = weights;
    p.x           = static_cast<const uint8_t *>(vx);
    p.gate        = static_cast<const uint8_t *>(fusion.gate);
    p.y           = static_cast<const uint8_t *>(vy);
    p.ids         = ids;
    p.x_bias      = static_cast<const float *>(fusion.x_bias);
    p.gate_bias   = fusion.gate ? static_cast<const float *>(fusion.gate_bias) : nullptr;
    p.dst         = dst;
    p.glu         = fusion.gate ? glu_of(fusion.glu_op) : fusekit_q8::Glu::none;
    p.glu_limit   = fusion.glu_limit;
    p.nblocks     = int(ncols_x / fusekit_q8::kBlockValues);
    p.nrows       = int(nrows_x);
    p.row_x       = stride_row_x;
    p.channel_x   = stride_channel_x;
    p.sample_x    = stride_sample_x;
    p.channel_y   = stride_channel_y;
    p.sample_y    = stride_sample_y;
    p.channel_dst = stride_channel_dst;
    p.sample_dst  = stride_sample_dst;
    p.nchannels_y   = int(nchannels_y);
    p.channel_ratio = ids ? 1 : int(nchannels_dst / nchannels_x);
    p.sample_ratio  = int(nsamples_dst / nsamples_x);
    p.x_is_weight   = x_is_weight ? 1 : 0;
    p.sabotage      = 0;

    const int sm_count = ggml_cuda_info().devices[ggml_cuda_get_device()].nsm;
    // Two tiles in flight with their activations loaded per tile (the standalone experiments' winner,
    // kernels/NOTES-q8-gemv.md), registers for 4 CTAs per SM without a gate and for 2 with one (108 registers).
    // In ggml on the H200 a split-1 call took 7.95 us this way against 15.08 us with UNROLL=4 at one CTA per SM
    // (results/h200-2026-12-01-session6-ldg/). Q4_0 rows (35B experts: K = 2048 is two tiles) take the same
    // shape without a register cap.
    const int  nchannels = int(nchannels_dst);
    const int  nsamples  = int(nsamples_dst);
    using fusekit_q8::Weights;
    const fusekit_q8::Launch l = q4_0
        ? fusekit_q8::plan<GgmlHooks, 2, true, 0, Weights::q4_0>(p, nchannels, nsamples, sm_count)
        : fusekit_q8::plan<GgmlHooks, 2, true, 4, Weights::q8_0, 2>(p, nchannels, nsamples, sm_count);
    ggml_cuda_kernel_launch(l.kernel, ggml_cuda_kernel_launch_params(l.grid, l.block, 0, stream), p);
    return true;
}
