// Random quantized rows and activations, and their float64 value, for the fusion-5-stock-order test programs
// (q8_stock_order_test.cu on the CPU, q8_stock_order_gpu_check.cu on a GPU). Host code only.
#pragma once

#include "fusekit-q8-gemv.cuh"

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

namespace q8_stock_order {

using fusekit_q8::block_bytes_of;
using fusekit_q8::kYBlockBytes;
using fusekit_q8::Weights;

// nblocks Q8_0 or Q4_0 blocks: fp16 scales of either sign over a few octaves, quants over their whole range; 64
// bytes of slack after them (a staged read may pass the end by a word).
inline std::vector<uint8_t> random_blocks(std::mt19937 & rng, Weights w, int64_t nblocks) {
    const int bb = block_bytes_of(w);
    std::vector<uint8_t> out(nblocks * bb + 64);
    std::uniform_real_distribution<float> scale(0.5f, 8.0f);
    for (int64_t b = 0; b < nblocks; ++b) {
        const __half d = __float2half((rng() & 1 ? -1.0f : 1.0f) * scale(rng) * 1e-3f);
        std::memcpy(&out[b * bb], &d, 2);
        for (int i = 2; i < bb; ++i) {
            out[b * bb + i] = uint8_t(rng());
        }
    }
    return out;
}

// q8_1 blocks: d, s = d * (sum of the quants), 32 quants.
inline std::vector<uint8_t> random_y(std::mt19937 & rng, int nblocks) {
    std::vector<uint8_t> y(nblocks * kYBlockBytes);
    std::uniform_int_distribution<int> q(-127, 127);
    std::uniform_real_distribution<float> scale(0.5f, 4.0f);
    for (int b = 0; b < nblocks; ++b) {
        const float d = scale(rng) * 1e-2f;
        int sum = 0;
        for (int i = 0; i < 32; ++i) {
            const int v = q(rng);
            sum += v;
            y[b * kYBlockBytes + 4 + i] = uint8_t(int8_t(v));
        }
        const __half2 ds = __floats2half2_rn(d, d * float(sum));
        std::memcpy(&y[b * kYBlockBytes], &ds, 4);
    }
    return y;
}

// The float64 value of one row against its activations, and the scale of fp32 rounding in any order (the sum of
// the terms' magnitudes). Q4_0 values are nibble - 8, the 8 taken through the q8_1 sum field as ggml does.
inline double reference64(Weights w, const uint8_t * x, const uint8_t * y, int nblocks, double & scale) {
    const int bb = block_bytes_of(w);
    double ref = 0.0;
    scale = 0.0;
    for (int b = 0; b < nblocks; ++b) {
        __half dx, dy, sy;
        std::memcpy(&dx, x + b * bb, 2);
        std::memcpy(&dy, y + b * kYBlockBytes, 2);
        std::memcpy(&sy, y + b * kYBlockBytes + 2, 2);
        long sumi = 0;
        for (int i = 0; i < 32; ++i) {
            const int8_t    c  = int8_t(y[b * kYBlockBytes + 4 + i]);
            const uint8_t * qs = x + b * bb + 2;
            const int a = w == Weights::q4_0 ? (i < 16 ? qs[i] & 0x0F : qs[i - 16] >> 4) : int(int8_t(qs[i]));
            sumi += long(a) * c;
        }
        const double offset = w == Weights::q4_0 ? 8.0 * double(__half2float(sy)) : 0.0;
        const double term   = double(__half2float(dx)) * (double(__half2float(dy)) * double(sumi) - offset);
        ref += term;
        scale += std::fabs(term) + std::fabs(double(__half2float(dx)) * offset);
    }
    return ref;
}

// A table of nrows rows of nblocks blocks at one token (one channel, one sample, rows back to back, GLU mul when a
// gate is set); the caller sets x and gate.
inline fusekit_q8::Problem one_token_problem(Weights w, int nrows, int nblocks, const uint8_t * y, float * dst,
                                             int sabotage) {
    fusekit_q8::Problem p{};
    p.weights       = w;
    p.y             = y;
    p.dst           = dst;
    p.glu           = fusekit_q8::Glu::mul;
    p.nblocks       = nblocks;
    p.nrows         = nrows;
    p.row_x         = nblocks;
    p.nchannels_y   = 1;
    p.channel_ratio = 1;
    p.sample_ratio  = 1;
    p.x_is_weight   = 1;
    p.sabotage      = sabotage;
    return p;
}

}  // namespace q8_stock_order
