// fusekit fusion-3 (moe-router): the entry points ggml-cuda.cu's graph evaluation calls once it has
// matched the router or tail pattern (see fusekit-moe-router.cu). Plain pointers, ggml types only.
#pragma once

#include "common.cuh"

// True when the one-launch router covers this shape (expert count, selected count, even row).
bool fusekit_moe_router_supported(int64_t n_embd, int64_t n_expert, int64_t n_used);

// Router GEMV + softmax + top-k + optional normalisation/scale, as mmvf + topk_moe_cuda compute them.
// logits is scratch for the n_expert logits (it also ends up holding them, as the MUL_MAT would).
// clamp_val: the CLAMP's minimum when normalising (ignored otherwise); scale_val 1.0f without SCALE.
void fusekit_moe_router_launch(ggml_backend_cuda_context & ctx, const float * w, const float * x, float * logits,
                               int32_t * ids, float * weights, int64_t n_embd, int64_t n_expert, int64_t n_used,
                               bool norm, float clamp_val, float scale_val);

// dst = (sum_e (experts_e * scale_e) * weights_e  [or moe_out]) + shexp * sigmoid(w_gate . x) + residual,
// in stock's rounding order. experts == nullptr: moe_out (already computed by ggml) is read instead.
void fusekit_moe_tail_launch(ggml_backend_cuda_context & ctx, const float * w_gate, const float * x,
                             const float * experts, const float * expert_scale, const float * weights,
                             const float * moe_out, const float * shexp, const float * residual, float * dst,
                             int64_t n_embd, int64_t n_used);
