#pragma once
// fusekit fusion-4 (chunked-gdn): the chunked gated-delta-net kernels (fusekit-chunked-gdn-tc.cuh) for prompts, called
// from ggml-cuda's GATED_DELTA_NET (gated_delta_net.cu).

#include "common.cuh"

// Runs dst's GATED_DELTA_NET with the chunked kernels (the prep pass, the chain of chunk states, the output pass) and
// returns true where they cover it: the scalar gate, 128 x 128 states, at least FUSEKIT_CHUNKED_GDN_MIN_TOKENS tokens
// (fusekit_chunked_gdn_min_tokens), an NVIDIA GPU of compute capability 8.0 or more with the chain's shared memory,
// fusion not disabled (GGML_CUDA_DISABLE_FUSION). Else returns false and the caller runs stock's serial kernel.
// state_out / state_slot_stride: where the snapshot slots go (dst's tail, or the recurrent cache when ggml-cuda fuses
// the cache write), as the serial kernel takes them.
bool fusekit_chunked_gdn_try(ggml_backend_cuda_context & ctx, const ggml_tensor * dst, float * state_out,
                             int64_t state_slot_stride);

// The token count from which the chunked kernels run: FUSEKIT_CHUNKED_GDN_MIN_TOKENS, else the default below.
int fusekit_chunked_gdn_min_tokens();
