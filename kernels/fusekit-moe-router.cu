// fusekit fusion-3 (moe-router): ggml glue for the router and tail kernels in fusekit-moe-router.cuh.
//
// ggml-cuda.cu matches the patterns (one token, F32, contiguous, no outside consumers of the
// intermediates) and calls these launchers; they only pick the launch shape, the per-stream
// ticket counter the router needs, and ggml's programmatic-dependent-launch hooks.
#include "fusekit-moe-router-glue.cuh"

#include "fusekit-moe-router.cuh"

#include <map>
#include <mutex>
#include <utility>

namespace {

// Set to 1 only by tests/patches/sabotage-moe-router.patch (the fused path must then fail its tests).
constexpr int kSabotage = 0;

struct GgmlHooks {
    __device__ static void wait_for_inputs() { ggml_cuda_pdl_sync(); }
    __device__ static void allow_dependents() { ggml_cuda_pdl_lc(); }
};

// Zero at module load; each router launch leaves its counter at zero again. One counter per
// (device, stream): launches on one stream never overlap, launches on two streams never share.
__device__ unsigned g_router_tickets[fusekit_moe::kMaxTickets];

unsigned * ticket_for(cudaStream_t stream) {
    static std::mutex                                   mutex;
    static std::map<std::pair<int, cudaStream_t>, int> slot_of;
    static std::map<int, unsigned *>                     base_of;
    const int device = ggml_cuda_get_device();
    std::lock_guard<std::mutex> lock(mutex);
    auto base = base_of.find(device);
    if (base == base_of.end()) {
        void * address = nullptr;
        CUDA_CHECK(cudaGetSymbolAddress(&address, g_router_tickets));
        base = base_of.emplace(device, static_cast<unsigned *>(address)).first;
    }
    const auto key  = std::make_pair(device, stream);
    auto       slot = slot_of.find(key);
    if (slot == slot_of.end()) {
        int used = 0;
        for (const auto & entry : slot_of) {
            used += entry.first.first == device ? 1 : 0;
        }
        GGML_ASSERT(used < fusekit_moe::kMaxTickets && "fusekit moe-router: more streams than ticket counters");
        slot = slot_of.emplace(key, used).first;
    }
    return base->second + slot->second;
}

}  // namespace

bool fusekit_moe_router_supported(int64_t n_embd, int64_t n_expert, int64_t n_used) {
    if (n_embd > INT32_MAX || n_expert > INT32_MAX) {
        return false;
    }
    return fusekit_moe::router_supported(int(n_embd), int(n_expert), int(n_used));
}

void fusekit_moe_router_launch(ggml_backend_cuda_context & ctx, const float * w, const float * x, float * logits,
                               int32_t * ids, float * weights, int64_t n_embd, int64_t n_expert, int64_t n_used,
                               bool norm, float clamp_val, float scale_val) {
    GGML_ASSERT(fusekit_moe_router_supported(n_embd, n_expert, n_used));
    cudaStream_t stream = ctx.stream();

    fusekit_moe::RouterParams p{};
    p.w            = w;
    p.x            = x;
    p.logits       = logits;
    p.ids          = ids;
    p.weights      = weights;
    p.ticket       = ticket_for(stream);
    p.n_embd       = int(n_embd);
    p.n_expert     = int(n_expert);
    p.n_used       = int(n_used);
    p.gemv_threads = fusekit_moe::mmvf_block_size(int(n_embd));
    p.norm         = norm ? 1 : 0;
    p.clamp        = norm ? clamp_val : -INFINITY;
    p.scale        = scale_val;
    p.sabotage     = kSabotage;

    void (*kernel)(fusekit_moe::RouterParams) = nullptr;
    fusekit_moe::router_kernel_for<GgmlHooks>(int(n_expert), &kernel);
    GGML_ASSERT(kernel != nullptr);
    ggml_cuda_kernel_launch(kernel, ggml_cuda_kernel_launch_params(fusekit_moe::router_grid(p), dim3(fusekit_moe::kCta), 0, stream), p);
}

void fusekit_moe_tail_launch(ggml_backend_cuda_context & ctx, const float * w_gate, const float * x,
                             const float * experts, const float * expert_scale, const float * weights,
                             const float * moe_out, const float * shexp, const float * residual, float * dst,
                             int64_t n_embd, int64_t n_used) {
    GGML_ASSERT(n_embd % 2 == 0 && n_embd <= INT32_MAX);
    GGML_ASSERT((experts != nullptr) != (moe_out != nullptr));
    cudaStream_t stream = ctx.stream();

    fusekit_moe::TailParams p{};
    p.w_gate       = w_gate;
    p.x            = x;
    p.experts      = experts;
    p.expert_scale = expert_scale;
    p.weights      = weights;
    p.moe_out      = moe_out;
    p.shexp        = shexp;
    p.residual     = residual;
    p.dst          = dst;
    p.n_embd       = int(n_embd);
    p.n_used       = int(n_used);
    p.gemv_threads = fusekit_moe::mmvf_block_size(int(n_embd));
    p.sabotage     = kSabotage;

    ggml_cuda_kernel_launch(fusekit_moe::tail_kernel<GgmlHooks>,
                            ggml_cuda_kernel_launch_params(fusekit_moe::tail_grid(p), dim3(fusekit_moe::kCta), 0, stream), p);
}
