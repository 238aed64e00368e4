// The host's quantize_q8_1 of 32 floats, for the standalone programs' byte-for-byte checks of a device q8_1 copy
// (kernels/glu_handoff_check.cu, kernels/reader_quantize_check.cu). Host code only; not placed into any tree.
#pragma once

#include "fusekit-gdn-chains.cuh"     // butterfly32: the xor butterfly's sum as lane 0 sees it
#include "fusekit-norm-quantize.cuh"  // block_q8_1_t, store_q8_1 (the device's expressions)

#include <cmath>
#include <cstdint>

namespace fusekit_q8_host {

// As store_q8_1 computes it: amax (order-free), the sum lane 0 ends with after the xor butterfly (16, 8, 4, 2, 1),
// d = amax / 127, q = roundf(x / d), ds = (half(d), half(sum)).
inline fusekit_nq::block_q8_1_t quantize_block(const float * v) {
    float amax = 0.0f;
    for (int l = 0; l < 32; ++l) {
        amax = std::fmax(amax, std::fabs(v[l]));
    }
    const float              d = amax / 127.0f;
    fusekit_nq::block_q8_1_t b;
    for (int l = 0; l < 32; ++l) {
        b.qs[l] = amax == 0.0f ? 0 : int8_t(std::roundf(v[l] / d));
    }
    b.ds = make_half2(__float2half(d), __float2half(fusekit_gdn::butterfly32(v)));
    return b;
}

}  // namespace fusekit_q8_host
