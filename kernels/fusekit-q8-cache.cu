// fusekit fusion-1 (norm-quantize): the per-context q8_1 arena and cache behind fusekit-q8-cache-glue.cuh.
#include "fusekit-q8-cache-glue.cuh"
#include "fusekit-q8-cache.h"
#include "mmvq.cuh"
#include "quantize.cuh"

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

// Sabotage builds (tests/patches/sabotage-norm-quantize.patch) set this: every q8_1 copy that is fused or
// kept for reuse gets the block holding the row's last column zeroed, so the test cases must fail.
static constexpr bool kSabotage = false;

// First arena size; one 35B-A3B decode graph asks for well under 1 MiB (NOTES-norm-quantize.md).
static constexpr size_t kInitialArenaBytes = size_t(2) << 20;

namespace {

struct State {
    ggml_backend_cuda_context * ctx = nullptr;
    fusekit_nq::Cache cache;
    char * arena = nullptr;
    size_t capacity = 0;
    // Earlier arenas are kept until the context dies: a captured CUDA graph replays the addresses
    // it was captured with, so memory it points at must never be freed or reused for something else.
    std::vector<void *> retired;
    // data pointer -> number of MUL_MAT(_ID) nodes in this graph that may read it through MMVQ.
    std::unordered_map<uintptr_t, int> mmvq_readers;

    int readers(const void * data) const {
        const auto it = mmvq_readers.find(uintptr_t(data));
        return it == mmvq_readers.end() ? 0 : it->second;
    }
};

std::mutex states_mutex;
std::unordered_map<const ggml_backend_cuda_context *, std::unique_ptr<State>> states;

// The state of the evaluation running on this thread; null outside fusekit_q8_cache_begin/end.
thread_local State * active = nullptr;

// Exactly ggml-cuda.cu's test (set and non-zero): fusion off means stock behaviour.
bool fusion_disabled() {
    static const bool disabled = getenv("GGML_CUDA_DISABLE_FUSION") != nullptr && std::atoi(getenv("GGML_CUDA_DISABLE_FUSION"));
    return disabled;
}

// The active state if ctx runs on its main stream. Concurrent-stream branches are left alone: a copy
// made on one stream would not be ordered before a read on another.
State * usable_state(const ggml_backend_cuda_context & ctx) {
    State * s = active;
    return s != nullptr && s->ctx == &ctx && ctx.curr_stream_no == 0 && s->arena != nullptr ? s : nullptr;
}

// Could this node's product run on MMVQ (and so quantize src1)? A superset is fine: it only decides
// where a copy is kept.
bool may_read_through_mmvq(const ggml_tensor * node) {
    if (node->op != GGML_OP_MUL_MAT && node->op != GGML_OP_MUL_MAT_ID) {
        return false;
    }
    const ggml_tensor * a = node->src[0];
    const ggml_tensor * b = node->src[1];
    if (a == nullptr || b == nullptr || !ggml_is_quantized(a->type) || b->type != GGML_TYPE_F32 || b->data == nullptr) {
        return false;
    }
    const int64_t tokens = node->op == GGML_OP_MUL_MAT ? b->ne[1] : b->ne[2];
    return tokens <= MMVQ_MAX_BATCH_SIZE;
}

fusekit_nq::Key key_of(const ggml_tensor * t, int64_t ne0_padded) {
    return fusekit_nq::make_key(t->data, t->ne, t->nb, ne0_padded);
}

// Sabotage only: zero the q8_1 block holding each row's last column.
void wipe_last_blocks(char * q8, const fusekit_nq::Key & key, cudaStream_t stream) {
    const size_t row_bytes = size_t(key.ne0_padded / QK8_1) * sizeof(block_q8_1);
    const size_t last = size_t((key.ne[0] - 1) / QK8_1) * sizeof(block_q8_1);
    CUDA_CHECK(cudaMemset2DAsync(q8 + last, row_bytes, 0, sizeof(block_q8_1), size_t(key.nrows()), stream));
}

}  // namespace

static_assert(sizeof(block_q8_1) == fusekit_nq::kBlockBytes && QK8_1 == fusekit_nq::kQK, "q8_1 layout changed");

void fusekit_q8_cache_begin(ggml_backend_cuda_context * ctx, const ggml_cgraph * cgraph) {
    active = nullptr;
    if (fusion_disabled()) {
        return;
    }
    State * s = nullptr;
    {
        std::lock_guard<std::mutex> lock(states_mutex);
        std::unique_ptr<State> & slot = states[ctx];
        if (!slot) {
            slot = std::make_unique<State>();
            slot->ctx = ctx;
        }
        s = slot.get();
    }

    // Grow the arena when the last evaluation asked for more than it had (its extra copies fell back
    // to the pool, so nothing was wrong, only slower). Allocating is allowed while a graph is captured
    // (ggml captures in relaxed mode; its legacy pool allocates there too).
    const size_t wanted = s->cache.wanted_bytes();
    if (s->arena == nullptr || wanted > s->capacity) {
        const size_t bytes = std::max(kInitialArenaBytes, 2 * wanted);
        ggml_cuda_set_device(ctx->device);
        void * p = nullptr;
        if (cudaMalloc(&p, bytes) == cudaSuccess) {
            if (s->arena != nullptr) {
                s->retired.push_back(s->arena);
            }
            s->arena = (char *) p;
            s->capacity = bytes;
        } else {
            (void) cudaGetLastError();  // out of memory: keep the old arena (or none), still correct
        }
    }
    s->cache.begin(s->capacity);

    s->mmvq_readers.clear();
    for (int i = 0; i < cgraph->n_nodes; ++i) {
        if (may_read_through_mmvq(cgraph->nodes[i])) {
            ++s->mmvq_readers[uintptr_t(cgraph->nodes[i]->src[1]->data)];
        }
    }
    active = s;
}

void fusekit_q8_cache_end(ggml_backend_cuda_context * ctx) {
    GGML_UNUSED(ctx);
    active = nullptr;
}

void fusekit_q8_cache_after_nodes(const ggml_cgraph * cgraph, int first, int last) {
    State * s = active;
    if (s == nullptr) {
        return;
    }
    for (int i = first; i <= last && i < cgraph->n_nodes; ++i) {
        const ggml_tensor * node = cgraph->nodes[i];
        if (node->data == nullptr || ggml_is_empty(node)) {
            continue;
        }
        switch (node->op) {
            case GGML_OP_NONE: case GGML_OP_VIEW: case GGML_OP_RESHAPE: case GGML_OP_PERMUTE: case GGML_OP_TRANSPOSE:
                continue;  // they write nothing
            case GGML_OP_OPT_STEP_ADAMW: case GGML_OP_OPT_STEP_SGD:
                for (const ggml_tensor * src : node->src) {  // these update their sources in place
                    if (src != nullptr && src->data != nullptr) {
                        s->cache.written(uintptr_t(src->data), uintptr_t(src->data) + ggml_nbytes(src));
                    }
                }
                break;
            default:
                break;
        }
        s->cache.written(uintptr_t(node->data), uintptr_t(node->data) + ggml_nbytes(node));
    }
    s->cache.next_step();
}

void fusekit_q8_cache_release(ggml_backend_cuda_context * ctx) {
    std::unique_ptr<State> s;
    {
        std::lock_guard<std::mutex> lock(states_mutex);
        const auto it = states.find(ctx);
        if (it == states.end()) {
            return;
        }
        s = std::move(it->second);
        states.erase(it);
    }
    if (active == s.get()) {
        active = nullptr;
    }
    ggml_cuda_set_device(ctx->device);
    for (void * p : s->retired) {
        CUDA_CHECK(cudaFree(p));
    }
    if (s->arena != nullptr) {
        CUDA_CHECK(cudaFree(s->arena));
    }
}

fusekit_q8_norm_target fusekit_q8_cache_norm_target(ggml_backend_cuda_context & ctx, const ggml_tensor * out) {
    fusekit_q8_norm_target target;
    State * s = usable_state(ctx);
    if (s == nullptr || out->type != GGML_TYPE_F32 || !ggml_is_contiguous(out) || out->data == nullptr ||
            ggml_nrows(out) > MMVQ_MAX_BATCH_SIZE || out->ne[0] > INT32_MAX - MATRIX_ROW_PADDING ||
            s->readers(out->data) == 0) {
        return target;
    }
    const int64_t ncols_padded = GGML_PAD(out->ne[0], MATRIX_ROW_PADDING);
    size_t offset = 0;
    if (!s->cache.insert(key_of(out, ncols_padded), /*after_write=*/true, &offset)) {
        return target;
    }
    target.q8           = s->arena + offset;
    target.ncols_padded = int(ncols_padded);
    target.wipe_last    = kSabotage;
    return target;
}

fusekit_q8_src1::fusekit_q8_src1(ggml_backend_cuda_context & ctx, const ggml_tensor * src1, ggml_type type_src0,
                                 int64_t ne10_padded, cudaStream_t stream) {
    const int64_t ne10 = src1->ne[0];
    const int64_t ne11 = src1->ne[1];
    const int64_t ne12 = src1->ne[2];
    const int64_t ne13 = src1->ne[3];

    bool kept = false;
    fusekit_nq::Key key;
    if (State * s = usable_state(ctx)) {
        key = key_of(src1, ne10_padded);
        if (const fusekit_nq::Entry * e = s->cache.find(key)) {
            ptr = s->arena + e->offset;  // made earlier in this evaluation from the same, unchanged f32 data
            return;
        }
        size_t offset = 0;
        if (s->readers(src1->data) >= 2 && s->cache.insert(key, /*after_write=*/false, &offset)) {
            ptr = s->arena + offset;
            kept = true;
        }
    }
    if (ptr == nullptr) {
        ptr = pool_copy.alloc(ctx.pool(), ne13*ne12 * ne11*ne10_padded * sizeof(block_q8_1)/QK8_1);
    }

    // The same call as ggml's MMVQ path.
    const size_t ts_src1 = ggml_type_size(src1->type);
    const int64_t s11 = src1->nb[1] / ts_src1;
    const int64_t s12 = src1->nb[2] / ts_src1;
    const int64_t s13 = src1->nb[3] / ts_src1;
    quantize_row_q8_1_cuda((const float *) src1->data, nullptr, ptr, type_src0, ne10, s11, s12, s13, ne10_padded,
                           ne11, ne12, ne13, stream);
    if (kSabotage && kept) {
        wipe_last_blocks(ptr, key, stream);
    }
}
