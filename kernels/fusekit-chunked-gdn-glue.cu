// fusekit fusion-4 (chunked-gdn): ggml glue for the chunked kernels of fusekit-chunked-gdn-tc.cuh. Only the checks of
// what the kernels cover, ggml's tensors as their parameters, the workspace from ggml's pool, and the launches.
#include "fusekit-chunked-gdn-glue.cuh"

#include "fusekit-chunked-gdn-tc.cuh"

#include <cstdlib>

namespace {

// Set to 1 only by tests/patches/sabotage-chunked-gdn.patch (the chunked path must then fail its tests).
constexpr int kSabotage = 0;

// Below this many tokens the serial kernel runs. Measured on the H200 with test-backend-ops perf (session 18, steps
// 3d/3e, results/h200-2026-12-02-session18-step3d/tbo-perf-gdn-*.txt, then an experiment patch with these passes):
// 32 heads, chunked 81.7 / 126.0 / 241.6 us against serial 139.9 / 311.4 / 638.3 us at T = 256 / 512 / 1024; 4 heads,
// 77.7 / 97.0 / 131.3 against 97.7 / 185.8 / 369.0 (one process per side; its cases below the threshold, the same
// kernel on both sides, differ by up to 4%). So the chunked kernels run from 256 tokens per call (512 before session
// 17); 128 tokens per call was not timed. fusekit's checks set FUSEKIT_CHUNKED_GDN_MIN_TOKENS=128 so that their
// shorter cases reach the chunked kernels.
constexpr int kDefaultMinTokens = 256;

constexpr int kChainColumns = 32;  // value columns per chain CTA (177 KB of shared memory, padded)
// Shared-memory rows padded against bank conflicts (after session 14; the standalone program times both layouts)
constexpr int kPad = fusekit_gdn_tc::kPadBanks;
// The passes: step 3d's prep pass (chunked_gdn_tc_prep_mma: mma.sync from shared memory; session 19's step 3g solves
// its inverse's diagonal blocks in registers), step 3e's chain (its products the same way), and step 3f's output pass
// (chunked_gdn_tc_output<..., Mma = true>: A loaded up front from the record, S0 and U staged in TF32). The output pass
// takes all 128 value columns per CTA when that grid has at least one CTA per SM, else 64 (twice the CTAs): through
// ggml in session 19 (test-backend-ops perf, results/h200-2026-12-02-session19-step3f/ and session19b-step3g/), 128
// columns always was faster than step 3c's 64-column wmma pass with 32 heads (118.6 against 125.6 us at T = 512) and
// slower with 4 heads (101.0 against 96.0, 32 CTAs); with the choice, 117.5 against 124.1 (32 heads) and 94.2 against
// 97.7 (4 heads; one process per side); pp4096 of the 35B preset +0.5% (1.0645 against 1.0590 of stock, 5 rounds).
constexpr int  kOutputColumns     = 64;  // a grid of fewer CTAs than SMs with kWideOutputColumns
constexpr int  kWideOutputColumns = fusekit_gdn_tc::kS;
constexpr bool kChainMma          = true;
// kTf32Operands: operands of TF32 products rounded once where they are written instead of in every fragment load
// (sm_90 has no TF32 conversion instruction; each rounding is three): step 3h, the chain's B operands S0 and U from
// TF32 copies written beside them (27 KB more shared memory), and step 3i, the prep pass's P and scaled keys and
// values, and the record's Qe and QKm (for the output pass), stored in TF32. The same values. Off until measured:
// patches/experiments/fusion-4-tf32-operands.patch turns it on.
constexpr bool kTf32Operands      = false;

bool fusion_disabled() {
    static const bool disabled = getenv("GGML_CUDA_DISABLE_FUSION") != nullptr && atoi(getenv("GGML_CUDA_DISABLE_FUSION"));
    return disabled;
}

// The kernels' shared memory above the default 48 KB, set once per device.
void allow_shared_memory(int device) {
    static bool done[GGML_CUDA_MAX_DEVICES] = {};
    if (done[device]) {
        return;
    }
    using namespace fusekit_gdn_tc;
    CUDA_CHECK(cudaFuncSetAttribute(chunked_gdn_tc_prep_mma<kPad, kTf32Operands>,
                                    cudaFuncAttributeMaxDynamicSharedMemorySize, int(prep_shared_bytes<kPad>())));
    CUDA_CHECK(cudaFuncSetAttribute(chunked_gdn_tc_chain<kChainColumns, kPad, 2, kStateThreads, kChainMma, kTf32Operands>,
                                    cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    int(chain_shared_bytes<kChainColumns, kPad, 2, kTf32Operands>())));
    CUDA_CHECK(cudaFuncSetAttribute(chunked_gdn_tc_output<kPad, kOutputColumns, 1, true, kTf32Operands>,
                                    cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    int(output_shared_bytes<kPad, kOutputColumns>())));
    CUDA_CHECK(cudaFuncSetAttribute(chunked_gdn_tc_output<kPad, kWideOutputColumns, 1, true, kTf32Operands>,
                                    cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    int(output_shared_bytes<kPad, kWideOutputColumns>())));
    done[device] = true;
}

// The output pass on mma.sync with Columns value columns per CTA, over every chunk, head and sequence.
template <int Columns>
void launch_output(const fusekit_gdn_tc::GdnParams & p, const float * records, const float * states, cudaStream_t stream) {
    using namespace fusekit_gdn_tc;
    const dim3 grid(unsigned(chunk_count(p.T) * (kS / Columns)), unsigned(p.H_v), unsigned(p.B));
    chunked_gdn_tc_output<kPad, Columns, 1, true, kTf32Operands>
        <<<grid, kStateThreads, output_shared_bytes<kPad, Columns>(), stream>>>(p, records, states);
}

// The output pass: all columns per CTA when that grid has at least one CTA per SM, else kOutputColumns.
void launch_output_pass(const fusekit_gdn_tc::GdnParams & p, const float * records, const float * states, int sm_count,
                        cudaStream_t stream) {
    const int64_t wide_ctas = int64_t(fusekit_gdn_tc::chunk_count(p.T)) * p.H_v * p.B;
    if (wide_ctas >= sm_count) {
        launch_output<kWideOutputColumns>(p, records, states, stream);
    } else {
        launch_output<kOutputColumns>(p, records, states, stream);
    }
}

}  // namespace

int fusekit_chunked_gdn_min_tokens() {
    static const int value = [] {
        const char * env = getenv("FUSEKIT_CHUNKED_GDN_MIN_TOKENS");
        return env != nullptr ? atoi(env) : kDefaultMinTokens;
    }();
    return value;
}

bool fusekit_chunked_gdn_try(ggml_backend_cuda_context & ctx, const ggml_tensor * dst, float * state_out,
                             int64_t state_slot_stride) {
    using namespace fusekit_gdn_tc;
    const ggml_tensor * q = dst->src[0];
    const ggml_tensor * k = dst->src[1];
    const ggml_tensor * v = dst->src[2];
    const ggml_tensor * g = dst->src[3];
    const ggml_tensor * beta = dst->src[4];
    const ggml_tensor * state = dst->src[5];
    // the op's shapes first: every decode step asks
    if (fusion_disabled() || v->ne[0] != kS || g->ne[0] != 1 || v->ne[2] < fusekit_chunked_gdn_min_tokens() ||
        v->ne[2] <= 0 || v->ne[3] % q->ne[3] != 0 || v->ne[1] % q->ne[1] != 0) {
        return false;
    }
    const auto & device = ggml_cuda_info().devices[ctx.device];
    if (!GGML_CUDA_CC_IS_NVIDIA(device.cc) || ggml_cuda_highest_compiled_arch(device.cc) < GGML_CUDA_CC_AMPERE ||
        device.smpbo < chain_shared_bytes<kChainColumns, kPad, 2, kTf32Operands>()) {
        return false;
    }
    GdnParams p{};
    p.q                 = static_cast<const float *>(q->data);
    p.k                 = static_cast<const float *>(k->data);
    p.v                 = static_cast<const float *>(v->data);
    p.g                 = static_cast<const float *>(g->data);
    p.beta              = static_cast<const float *>(beta->data);
    p.state             = static_cast<const float *>(state->data);
    p.dst               = static_cast<float *>(dst->data);
    p.state_out         = state_out;
    p.state_slot_stride = state_slot_stride;
    p.S                 = int(v->ne[0]);
    p.H_v               = int(v->ne[1]);
    p.H_k               = int(q->ne[1]);
    p.T                 = int(v->ne[2]);
    p.B                 = int(v->ne[3]);
    p.rq3               = int(v->ne[3] / q->ne[3]);
    p.q_s1 = int64_t(q->nb[1] / sizeof(float)), p.q_s2 = int64_t(q->nb[2] / sizeof(float)), p.q_s3 = int64_t(q->nb[3] / sizeof(float));
    p.k_s1 = int64_t(k->nb[1] / sizeof(float)), p.k_s2 = int64_t(k->nb[2] / sizeof(float)), p.k_s3 = int64_t(k->nb[3] / sizeof(float));
    p.v_s1 = int64_t(v->nb[1] / sizeof(float)), p.v_s2 = int64_t(v->nb[2] / sizeof(float)), p.v_s3 = int64_t(v->nb[3] / sizeof(float));
    p.K                 = ggml_get_op_params_i32(dst, 0);
    p.scale             = 1.0f / sqrtf(float(p.S));

    allow_shared_memory(ctx.device);
    ggml_cuda_pool_alloc<float> records(ctx.pool(), size_t(workspace_floats(p)));
    ggml_cuda_pool_alloc<float> states(ctx.pool(), size_t(states_floats(p)));
    cudaStream_t                stream = ctx.stream();
    const dim3                  chunk_grid(unsigned(chunk_count(p.T)), unsigned(p.H_v), unsigned(p.B));
    const dim3                  chain_grid(unsigned(kS / kChainColumns), unsigned(p.H_v), unsigned(p.B));
    const int  sabotage = kSabotage ? fusekit_gdn::kSabotageMaskDiagonal : fusekit_gdn::kSabotageNone;
    chunked_gdn_tc_prep_mma<kPad, kTf32Operands>
        <<<chunk_grid, kPrepThreads, prep_shared_bytes<kPad>(), stream>>>(p, records.get(), sabotage);
    chunked_gdn_tc_chain<kChainColumns, kPad, 2, kStateThreads, kChainMma, kTf32Operands>
        <<<chain_grid, kStateThreads, chain_shared_bytes<kChainColumns, kPad, 2, kTf32Operands>(), stream>>>(
            p, records.get(), states.get());
    launch_output_pass(p, records.get(), states.get(), device.nsm, stream);
    CUDA_CHECK(cudaGetLastError());
    return true;
}
