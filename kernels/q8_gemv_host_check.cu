// Host-side check of fusekit's one-token Q8_0 / Q4_0 kernel arithmetic, for machines without a GPU.
//
//   nvcc -O2 -std=c++17 -o q8_gemv_host_check kernels/q8_gemv_host_check.cu && ./q8_gemv_host_check [--sabotage]
//
// Runs, on the CPU, the kernel's own host-callable pieces (fusekit-q8-gemv.cuh: the tile schedule,
// blocks_used, block_dot / block_dot_q4_0 with their funnel-shifted reads, choose_split, layout_fits) in the kernel's
// data flow (and the short-row kernel's: rows packed several to a tile, one sum per row's lanes): each slice of a
// row walks its tiles UNROLL at a time, a tile is copied into a staging
// buffer in 16-byte pieces (the buffer refilled with garbage first, so reading a byte nobody wrote
// changes the result), then lane i takes block i. Rows are compared with a float64 reference of
// the same quantized data (|out - ref| < 1e-5 x the sum of |block terms|). What it cannot see: warp synchronisation,
// shared-memory races, launch shapes on a real GPU, the programmatic-dependent-launch wait.
// --sabotage turns on the kernel's sabotage switch: it exits 0 only if every check fails.
#include "fusekit-q8-gemv.cuh"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

namespace {

using namespace fusekit_q8;

struct Row {
    Weights              w;
    std::vector<uint8_t> x;  // one Q8_0 or Q4_0 row, 16-byte aligned storage
    std::vector<uint8_t> y;  // q8_1 activations
    double ref = 0.0;
    double ref_abs = 0.0;  // sum of |block terms|: the scale of fp32 rounding in any summation order
};

// The float64 value of a row against its activations, and the scale of fp32 rounding in any summation order.
// Q8_0: int8 quants; Q4_0: bytes of two nibbles (value i is the low nibble of byte i for i < 16, else the high
// nibble of byte i - 16), taken as nibble - 8 through the q8_1 sum field.
void set_reference(Row & r, int nblocks) {
    const int bb = block_bytes_of(r.w);
    r.ref = 0.0;
    r.ref_abs = 0.0;
    for (int b = 0; b < nblocks; ++b) {
        __half dx, dy, sy;
        std::memcpy(&dx, &r.x[b * bb], 2);
        std::memcpy(&dy, &r.y[b * kYBlockBytes], 2);
        std::memcpy(&sy, &r.y[b * kYBlockBytes + 2], 2);
        long sumi = 0;
        for (int i = 0; i < 32; ++i) {
            const int8_t  c  = int8_t(r.y[b * kYBlockBytes + 4 + i]);
            const uint8_t * qs = &r.x[b * bb + 2];
            const int a = r.w == Weights::q4_0 ? (i < 16 ? qs[i] & 0x0F : qs[i - 16] >> 4) : int(int8_t(qs[i]));
            sumi += long(a) * c;
        }
        const double offset = r.w == Weights::q4_0 ? 8.0 * double(__half2float(sy)) : 0.0;
        const double term = double(__half2float(dx)) * (double(__half2float(dy)) * double(sumi) - offset);
        r.ref += term;
        r.ref_abs += std::fabs(double(__half2float(dx)) * double(__half2float(dy)) * double(sumi)) +
                     std::fabs(double(__half2float(dx)) * offset);
    }
}

// A random row and its activations. The q8_1 sum field is d * sum of its quants, rounded to half.
Row make_row(int nblocks, Weights w, std::mt19937 & rng) {
    std::uniform_int_distribution<int> q(-128, 127);
    std::uniform_real_distribution<float> scale(1e-4f, 4e-3f);
    const int bb = block_bytes_of(w);
    Row r;
    r.w = w;
    r.x.resize(size_t(nblocks) * bb);
    r.y.resize(size_t(nblocks) * kYBlockBytes);
    for (int b = 0; b < nblocks; ++b) {
        const __half dx = __float2half(scale(rng));
        const __half dy = __float2half(scale(rng) * 30.0f);
        std::memcpy(&r.x[b * bb], &dx, 2);
        std::memcpy(&r.y[b * kYBlockBytes], &dy, 2);
        for (int i = 2; i < bb; ++i) {
            r.x[b * bb + i] = uint8_t(q(rng));
        }
        long ysum = 0;
        for (int i = 0; i < 32; ++i) {
            const int8_t c = int8_t(q(rng));
            r.y[b * kYBlockBytes + 4 + i] = uint8_t(c);
            ysum += c;
        }
        const __half sy = __float2half(__half2float(dy) * float(ysum));
        std::memcpy(&r.y[b * kYBlockBytes + 2], &sy, 2);
    }
    set_reference(r, nblocks);
    return r;
}

// The kernel's per-row data flow (q8_gemv_kernel), one row, SPLIT slices, UNROLL tiles at a time.
template <int UNROLL>
float emulate_row(const Row & r, int nblocks, int split, int sabotage, std::mt19937 & rng) {
    alignas(16) uint8_t stage[tile_smem_bytes_of(Weights::q8_0)];  // the larger of the two formats' tiles
    const int bb = block_bytes_of(r.w), tile_bytes = kTileBlocks * bb, vecs_per_lane = vecs_per_lane_of(r.w);
    const int ntiles = tile_count(nblocks);
    float slice_sum[kWarpsPerCta] = {};
    for (int slice = 0; slice < split; ++slice) {
        float lane_acc[kWarp] = {};
        for (int tile0 = slice; tile0 < ntiles; tile0 += split * UNROLL) {
            for (int u = 0; u < UNROLL; ++u) {
                const int tile = tile0 + u * split;
                if (tile >= ntiles) {
                    break;
                }
                for (auto & byte : stage) {
                    byte = uint8_t(rng());
                }
                const int nvecs = vecs_in_tile(nblocks, tile, bb);
                for (int lane = 0; lane < kWarp; ++lane) {
                    for (int v = 0; v < vecs_per_lane; ++v) {
                        const int idx = lane + v * kWarp;
                        if (idx < nvecs) {
                            std::memcpy(stage + 16 * idx, r.x.data() + size_t(tile) * tile_bytes + 16 * idx, 16);
                        }
                    }
                }
                const int nused = blocks_used(blocks_in_tile(nblocks, tile), sabotage);
                for (int lane = 0; lane < nused; ++lane) {
                    const uint8_t * yb = r.y.data() + size_t(tile * kTileBlocks + lane) * kYBlockBytes;
                    int yq[8];
                    std::memcpy(yq, yb + 4, 32);
                    __half dy, sy;
                    std::memcpy(&dy, yb, 2);
                    std::memcpy(&sy, yb + 2, 2);
                    lane_acc[lane] += r.w == Weights::q4_0
                        ? block_dot_of<Weights::q4_0>(stage, lane, yq, __half2float(dy), __half2float(sy))
                        : block_dot_of<Weights::q8_0>(stage, lane, yq, __half2float(dy), __half2float(sy));
                }
            }
        }
        for (int lane = 0; lane < kWarp; ++lane) {
            slice_sum[slice] += lane_acc[lane];
        }
    }
    float total = 0.0f;
    for (int s = 0; s < split; ++s) {
        total += slice_sum[s];
    }
    return total;
}

float emulate(const Row & r, int nblocks, int split, int unroll, int sabotage, std::mt19937 & rng) {
    switch (unroll) {
        case 2:  return emulate_row<2>(r, nblocks, split, sabotage, rng);
        case 4:  return emulate_row<4>(r, nblocks, split, sabotage, rng);
        default: return emulate_row<8>(r, nblocks, split, sabotage, rng);
    }
}

// The short-row kernel's data flow (q8_gemv_packed_kernel): rows stored back to back, one y for all of them;
// each warp stages one packed tile of up to `pack` rows (garbage first), lane i sums block packed_block(i) of
// row packed_row(i), and each row's lanes are summed. Returns one float per row.
std::vector<float> emulate_packed(const std::vector<Row> & rows, int nblocks, int sabotage, std::mt19937 & rng) {
    const Weights w = rows[0].w;
    const int bb = block_bytes_of(w), pack = rows_per_tile(nblocks, nblocks), nrows = int(rows.size());
    std::vector<uint8_t> x;  // the rows back to back, as ggml stores them
    for (const Row & r : rows) {
        x.insert(x.end(), r.x.begin(), r.x.end());
    }
    const std::vector<uint8_t> & y = rows[0].y;
    std::vector<float> out(rows.size(), NAN);
    alignas(16) uint8_t stage[tile_smem_bytes_of(Weights::q8_0)];
    for (int row0 = 0; row0 < nrows; row0 += pack) {
        const int nrows_here = std::min(pack, nrows - row0);
        for (auto & byte : stage) {
            byte = uint8_t(rng());
        }
        const int nvecs = packed_vecs(nrows_here, pack, bb);
        for (int idx = 0; idx < nvecs; ++idx) {
            std::memcpy(stage + 16 * idx, x.data() + size_t(row0) * nblocks * bb + 16 * idx, 16);
        }
        float lane_acc[kWarp] = {};
        for (int lane = 0; lane < kWarp; ++lane) {
            const int my_row = packed_row(lane, pack), my_block = packed_block(lane, pack);
            if (my_row >= nrows_here || my_block >= blocks_used(kTileBlocks / pack, sabotage)) {
                continue;
            }
            const uint8_t * yb = y.data() + size_t(my_block) * kYBlockBytes;
            int yq[8];
            std::memcpy(yq, yb + 4, 32);
            __half dy, sy;
            std::memcpy(&dy, yb, 2);
            std::memcpy(&sy, yb + 2, 2);
            lane_acc[lane] = w == Weights::q4_0
                ? block_dot_of<Weights::q4_0>(stage, lane, yq, __half2float(dy), __half2float(sy))
                : block_dot_of<Weights::q8_0>(stage, lane, yq, __half2float(dy), __half2float(sy));
        }
        for (int lane = 0; lane < kWarp; ++lane) {
            const int my_row = packed_row(lane, pack);
            if (my_row < nrows_here) {
                out[row0 + my_row] = (packed_block(lane, pack) == 0 ? 0.0f : out[row0 + my_row]) + lane_acc[lane];
            }
        }
    }
    return out;
}

}  // namespace

int main(int argc, char ** argv) {
    const bool sabotage = argc > 1 && std::strcmp(argv[1], "--sabotage") == 0;
    std::mt19937 rng(20261130u);
    int checks = 0, failures = 0, sum_checks = 0, sum_failures = 0;
    // One row sum against its float64 value, counted as a sum check. Relative to the sum of |terms|: a row whose
    // terms cancel has a tiny |ref|, and no fp32 summation order can promise a small error relative to that.
    auto sum_ok = [&](float out, const Row & r, double & rel) {
        rel = std::fabs(out - r.ref) / r.ref_abs;
        const bool ok = std::isfinite(out) && rel < 1e-5;
        ++checks;
        ++sum_checks;
        failures += ok ? 0 : 1;
        sum_failures += ok ? 0 : 1;
        return ok;
    };
    // K values: one partial tile, one full tile plus a partial one, the 35B and Llama shapes.
    for (Weights w : {Weights::q8_0, Weights::q4_0})
    for (int k : {256, 768, 1024, 1280, 1536, 2048, 4096, 14336}) {
        const int nblocks = k / kBlockValues;
        for (int trial = 0; trial < 3; ++trial) {
            const Row r = make_row(nblocks, w, rng);
            for (int split : {1, 2, 4, 8}) {
                if (split > 1 && split > tile_count(nblocks)) {
                    continue;  // choose_split never gives a slice no tile
                }
                for (int unroll : {2, 4, 8}) {
                    const float out = emulate(r, nblocks, split, unroll, sabotage ? 1 : 0, rng);
                    double rel = 0.0;
                    if (!sum_ok(out, r, rel) && !sabotage) {
                        std::printf("WRONG %s k=%d split=%d unroll=%d: %.9g vs %.9g (rel %.2e)\n",
                                    w == Weights::q4_0 ? "q4_0" : "q8_0", k, split, unroll, out, r.ref, rel);
                    }
                }
            }
        }
    }
    // Short rows packed several to a tile: every row of every count, against its float64 value.
    for (Weights w : {Weights::q8_0, Weights::q4_0})
    for (int k : {256, 512}) {
        const int nblocks = k / kBlockValues;
        for (int nrows : {1, 2, 3, 4, 5, 7, 9, 64}) {
            std::vector<Row> rows;
            for (int i = 0; i < nrows; ++i) {
                rows.push_back(make_row(nblocks, w, rng));
                rows.back().y = rows.front().y;  // one token: every row meets the same activations
                set_reference(rows.back(), nblocks);
            }
            const std::vector<float> out = emulate_packed(rows, nblocks, sabotage ? 1 : 0, rng);
            for (int i = 0; i < nrows; ++i) {
                double rel = 0.0;
                if (!sum_ok(out[i], rows[i], rel) && !sabotage) {
                    std::printf("WRONG packed %s k=%d rows=%d row %d: %.9g vs %.9g (rel %.2e)\n",
                                w == Weights::q4_0 ? "q4_0" : "q8_0", k, nrows, i, out[i], rows[i].ref, rel);
                }
            }
        }
    }
    // Packing rules: only rows of 8 or 16 blocks stored back to back.
    const bool packing_ok = rows_per_tile(8, 8) == 4 && rows_per_tile(16, 16) == 2 && rows_per_tile(16, 32) == 1 &&
                            rows_per_tile(24, 24) == 1 && rows_per_tile(32, 32) == 1 && rows_per_tile(64, 64) == 1;
    ++checks;
    failures += packing_ok ? 0 : 1;
    // Launch-shape rules: every slice gets a tile, and small outputs are split until the GPU is covered.
    const int sms = 132;
    for (int rows : {1, 32, 512, 2048, 4096, 248320}) {
        for (int k : {256, 2048, 14336}) {
            const int nblocks = k / kBlockValues, split = choose_split(rows, 1, 1, nblocks, sms);
            const long ctas = long((rows + kWarpsPerCta / split - 1) / (kWarpsPerCta / split));
            const bool ok = split >= 1 && split <= kWarpsPerCta && (split == 1 || split <= tile_count(nblocks)) &&
                            (ctas >= 2L * sms || split == kWarpsPerCta || 2 * split > tile_count(nblocks));
            ++checks;
            failures += ok ? 0 : 1;
            if (!ok) {
                std::printf("WRONG split %d for rows=%d k=%d\n", split, rows, k);
            }
        }
    }
    // Layout rules: rows of K % 256 == 0 on 16-byte boundaries are ours, anything else is MMVQ's.
    alignas(16) static uint8_t buffer[64];
    const bool layouts_ok = layout_fits(buffer, nullptr, 2048, 64, 64 * 4096, 0) &&
                            !layout_fits(buffer + 2, nullptr, 2048, 64, 0, 0) &&
                            !layout_fits(buffer, nullptr, 2016, 63, 0, 0) && !layout_fits(buffer, nullptr, 2048, 65, 0, 0) &&
                            !layout_fits(buffer, buffer + 8, 2048, 64, 0, 0) &&
                            layout_fits(buffer, nullptr, 2048, 64, 64 * 512, 0, Weights::q4_0) &&
                            !layout_fits(buffer, nullptr, 2048, 65, 0, 0, Weights::q4_0) &&
                            !layout_fits(buffer, nullptr, 2016, 63, 0, 0, Weights::q4_0);
    ++checks;
    failures += layouts_ok ? 0 : 1;
    if (sabotage) {
        // The shape and layout rules do not depend on the sabotage switch: count only the sums.
        std::printf("sabotage: %d of %d row sums wrong (all must be)\n", sum_failures, sum_checks);
        return sum_failures == sum_checks ? 0 : 1;
    }
    std::printf("%d of %d host checks passed\n", checks - failures, checks);
    return failures == 0 ? 0 : 1;
}
