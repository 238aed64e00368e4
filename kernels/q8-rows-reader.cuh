// fusekit experiment (issue #11, session 55): one thread quantizes one 32-value block to q8_1 with the bytes of ggml's
// quantize_q8_1 (warp-collective there: lane i holds value i). Host-callable, so kernels/q8_rows_reader_host_check.cu
// checks it on the CPU against the host's quantize_q8_1 (q8-1-host.cuh); kernels/q8_rows_reader_check.cu runs it in
// its rows reader. The ggml experiment patches/experiments/fusion-5-stream-zzzzzzzz-rows-reader.patch carries the same
// arithmetic in the tree's fusekit-q8-gemv.cuh (reader_quantize_block).
#pragma once

#include "fusekit-norm-quantize.cuh"  // block_q8_1_t

#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>

namespace fusekit_rr {

constexpr int kValues = 32;

// One step of the xor butterfly as lane 0 sees it: element i becomes v[i] + v[i ^ OFFSET] for i < OFFSET. One call a
// step with constant bounds, so v stays in registers.
template <int OFFSET>
__host__ __device__ __forceinline__ void butterfly_step(float (&v)[kValues]) {
#pragma unroll
    for (int i = 0; i < OFFSET; ++i) {
        v[i] = v[i] + v[i + OFFSET];
    }
}

// quantize_q8_1 of the 32 floats at x (16-byte aligned) into out: amax (order-free), d = amax / 127,
// q = roundf(x / d), ds = (d, the sum in the order lane 0 of the butterfly (offsets 16, 8, 4, 2, 1) adds it).
// wipe (sabotage): a zero block instead.
__host__ __device__ __forceinline__ void quantize_block_serial(const float * x, fusekit_nq::block_q8_1_t & out,
                                                               bool wipe) {
    float v[kValues];
#pragma unroll
    for (int i = 0; i < kValues / 4; ++i) {
        const float4 f = reinterpret_cast<const float4 *>(x)[i];
        v[4 * i] = f.x, v[4 * i + 1] = f.y, v[4 * i + 2] = f.z, v[4 * i + 3] = f.w;
    }
    float amax = 0.0f;
#pragma unroll
    for (int i = 0; i < kValues; ++i) {
        amax = fmaxf(amax, fabsf(v[i]));
    }
    const float d = amax / 127.0f;
    int         packed[kValues / 4];
#pragma unroll
    for (int i = 0; i < kValues / 4; ++i) {
        uint32_t word = 0;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const int8_t q = amax == 0.0f ? 0 : int8_t(roundf(v[4 * i + j] / d));
            word |= uint32_t(uint8_t(q)) << (8 * j);
        }
        packed[i] = wipe ? 0 : int(word);
    }
    butterfly_step<16>(v);
    butterfly_step<8>(v);
    butterfly_step<4>(v);
    butterfly_step<2>(v);
    butterfly_step<1>(v);
    int * qs = reinterpret_cast<int *>(out.qs);
#pragma unroll
    for (int i = 0; i < kValues / 4; ++i) {
        qs[i] = packed[i];
    }
    out.ds = wipe ? __floats2half2_rn(0.0f, 0.0f) : __floats2half2_rn(d, v[0]);
}

}  // namespace fusekit_rr
