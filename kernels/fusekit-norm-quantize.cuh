// fusekit fusion-1 (norm-quantize): device code that writes the q8_1 copy of a value a kernel has just
// computed, byte for byte what ggml's separate quantize_q8_1 kernel (ggml-cuda/quantize.cu) writes when
// it later reads that value back from memory. ggml-free: included by the ggml glue (norm.cu) and by the
// standalone check program (kernels/norm_quantize_check.cu).
//
// Why the bytes are equal: quantize_q8_1 gives lane (i % 32) of a warp the value i of a row and reduces
// amax and sum over the 32 lanes with an xor butterfly (offsets 16, 8, 4, 2, 1), then d = amax / 127,
// q = roundf(x / d) and ds = (half(d), half(sum)). store_q8_1 is called with the same lane <-> value map
// (col % 32 == lane), the same reduction order and the same expressions, on the very float that the
// caller stores as its f32 output. Values past the row (the MATRIX_ROW_PADDING tail) enter as 0.0f,
// exactly like quantize_q8_1's "i0 < ne00 ? x : 0.0f".
#pragma once

#include <cuda_fp16.h>
#include <cstdint>

namespace fusekit_nq {

// ggml's block_q8_1 (ggml-common.h): ds = (d, sum of the 32 floats), then 32 int8.
struct block_q8_1_t {
    half2 ds;
    int8_t qs[32];
};
static_assert(sizeof(block_q8_1_t) == 36, "q8_1 block must be 36 bytes like ggml's");

// Warp-collective: all 32 lanes of the warp call it together, lane = col % 32, for the 32 values
// col0 .. col0+31 of one q8_1 block (col0 % 32 == 0). row_q8 is the first block of the row.
// wipe (sabotage builds only) zeroes the block instead, so that tests must catch it.
static __device__ __forceinline__ void store_q8_1(void * row_q8, const int col, const float xi, const bool wipe) {
    float amax = fabsf(xi);
    float sum  = xi;

#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) {
        amax = fmaxf(amax, __shfl_xor_sync(0xffffffff, amax, offset, 32));
    }
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) {
        sum += __shfl_xor_sync(0xffffffff, sum, offset, 32);
    }

    const float  d = amax / 127.0f;
    const int8_t q = amax == 0.0f ? 0 : roundf(xi / d);

    block_q8_1_t * y = (block_q8_1_t *) row_q8 + col / 32;
    const int iqs = col % 32;
    y->qs[iqs] = wipe ? 0 : q;
    if (iqs > 0) {
        return;
    }
    y->ds = wipe ? make_half2(0.0f, 0.0f) : make_half2(d, sum);
}

// Row length of a q8_1 copy: ggml pads rows to MATRIX_ROW_PADDING (512) values.
static __host__ __device__ constexpr int64_t padded_cols(int64_t ncols) {
    return (ncols + 511) / 512 * 512;
}

}  // namespace fusekit_nq
