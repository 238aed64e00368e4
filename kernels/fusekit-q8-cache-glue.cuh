// fusekit fusion-1 (norm-quantize): ggml glue. One graph evaluation makes the q8_1 copy of an MMVQ
// activation once: the RMS_NORM+MUL kernel writes it next to its f32 output when MMVQ products will read
// it, and otherwise the first MMVQ product quantizes into a per-context arena that later products reuse.
// Bookkeeping rules: kernels/fusekit-q8-cache.h. Device code: kernels/fusekit-norm-quantize.cuh.
// With GGML_CUDA_DISABLE_FUSION=1, or outside a graph evaluation, every call takes ggml's own path.
#pragma once

#include "common.cuh"

// ggml-cuda.cu: one graph evaluation. Copies are made and reused only between begin and end.
void fusekit_q8_cache_begin(ggml_backend_cuda_context * ctx, const ggml_cgraph * cgraph);
void fusekit_q8_cache_end(ggml_backend_cuda_context * ctx);
// Nodes first..last of the graph ran as one step (a node, or a fused group): forget the copies of
// any f32 data they overwrote.
void fusekit_q8_cache_after_nodes(const ggml_cgraph * cgraph, int first, int last);
// ~ggml_backend_cuda_context: free the context's arenas.
void fusekit_q8_cache_release(ggml_backend_cuda_context * ctx);

// norm.cu: where RMS_NORM+MUL should also write the q8_1 copy of its output (q8 == nullptr: nowhere).
struct fusekit_q8_norm_target {
    void *  q8           = nullptr;
    int     ncols_padded = 0;      // row length of the copy (MATRIX_ROW_PADDING multiple)
    bool    wipe_last    = false;  // sabotage builds: zero the block holding the last column
};
fusekit_q8_norm_target fusekit_q8_cache_norm_target(ggml_backend_cuda_context & ctx, const ggml_tensor * out);

// mmvq.cu: src1 as q8_1 (the layout quantize_row_q8_1_cuda writes), taken from this evaluation's copy
// when there is one, else quantized now: into the arena when other MMVQ products will read it too,
// into a pool buffer (as ggml does) when not. get() is valid until this object is destroyed.
struct fusekit_q8_src1 {
    fusekit_q8_src1(ggml_backend_cuda_context & ctx, const ggml_tensor * src1, ggml_type type_src0,
                    int64_t ne10_padded, cudaStream_t stream);
    char * get() const { return ptr; }

  private:
    ggml_cuda_pool_alloc<char> pool_copy;
    char * ptr = nullptr;
};
