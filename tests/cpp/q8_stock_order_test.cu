// The summation order of the experiment fusion-5-stock-order, on the CPU. Compiled against fusekit-q8-gemv.cuh as the
// experiment leaves it (its host-callable pieces: MmvqOrder's segments and block_of, staged_part, blocks_used,
// PlainHooks' part dot products, which both sides use; on the GPU ggml's glue passes ggml's own), it runs the kernel's
// data flow (a warp per slice standing in for 4 / SPLIT of MMVQ's warps, segments
// staged in 16-byte pieces into a buffer filled with garbage first, one sum per stood-in warp, the sums of the four
// warps added in order, the lanes by xor butterfly) and, written separately from ggml's description of
// mul_mat_vec_q at one token (128 threads; thread t takes part t % P of block t / P, then every pass_blocks-th block;
// lane l adds warps 1, 2, 3 to warp 0 in order; xor butterfly), MMVQ's. On the CPU both do the same fp32 operations
// (no fused multiply-add on either side), so they agree bit for bit exactly when each term meets the same sum in the
// same order. Both are also held to a float64 reference of the same quantized data.
//
//   q8_stock_order_test              every check must pass ("order checks passed", exit 0)
//   q8_stock_order_test --sabotage   the experiment's sabotage switch (the last block of every segment dropped):
//                                   every bitwise check must fail ("all must be different", exit 0)

#include "fusekit-q8-gemv.cuh"
#include "q8_stock_order_data.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

namespace {

using namespace fusekit_q8;
using q8_stock_order::random_blocks;
using q8_stock_order::random_y;
using q8_stock_order::reference64;

struct Case {
    Weights w;
    int     nblocks;
};

int word_at(const uint8_t * p) {
    int v;
    std::memcpy(&v, p, 4);
    return v;
}

// MMVQ's dot product of part `part` of block b, reading the row and y directly (two words of quants each).
float mmvq_part(Weights w, const uint8_t * x, const uint8_t * y, int b, int part) {
    const int       bb = block_bytes_of(w);
    const uint8_t * xb = x + b * bb;
    const uint8_t * yb = y + b * kYBlockBytes;
    __half dx;
    std::memcpy(&dx, xb, 2);
    const __half2 ds = *reinterpret_cast<const __half2 *>(yb);  // q8_1 blocks are 4-byte aligned
    const int v[2] = {word_at(xb + 2 + 8 * part), word_at(xb + 2 + 8 * part + 4)};
    if (w == Weights::q4_0) {
        const int u[4] = {word_at(yb + 4 + 4 * (2 * part)), word_at(yb + 4 + 4 * (2 * part + 4)),
                          word_at(yb + 4 + 4 * (2 * part + 1)), word_at(yb + 4 + 4 * (2 * part + 5))};
        return PlainHooks::dot_q4_0(v, u, __half2float(dx), ds);
    }
    const int u[2] = {word_at(yb + 4 + 4 * (2 * part)), word_at(yb + 4 + 4 * (2 * part + 1))};
    return PlainHooks::dot_q8_0(v, u, __half2float(dx), __low2float(ds));
}

// One part's product on the CPU: part `part` of block b of a staged buffer, with its q8_1 block yb, through
// PlainHooks (the kernel's part_dot reads the same words).
template <Weights W>
float staged_part_dot(const uint8_t * staged, int b, int part, const uint8_t * yb) {
    float dx;
    int   v[2];
    staged_part(staged, b, part, block_bytes_of(W), dx, v);
    const __half2 ds = *reinterpret_cast<const __half2 *>(yb);  // q8_1 blocks are 4-byte aligned
    if constexpr (W == Weights::q4_0) {
        const int u[4] = {word_at(yb + 4 + 4 * (2 * part)), word_at(yb + 4 + 4 * (2 * part + 4)),
                          word_at(yb + 4 + 4 * (2 * part + 1)), word_at(yb + 4 + 4 * (2 * part + 5))};
        return PlainHooks::dot_q4_0(v, u, dx, ds);
    } else {
        const int u[2] = {word_at(yb + 4 + 4 * (2 * part)), word_at(yb + 4 + 4 * (2 * part + 1))};
        return PlainHooks::dot_q8_0(v, u, dx, __low2float(ds));
    }
}

// The xor butterfly of a warp: after it every lane holds the same sum.
float butterfly(float (&lanes)[kWarp]) {
    for (int offset = kWarp / 2; offset > 0; offset >>= 1) {
        float next[kWarp];
        for (int l = 0; l < kWarp; ++l) {
            next[l] = lanes[l] + lanes[l ^ offset];
        }
        std::memcpy(lanes, next, sizeof(next));
    }
    return lanes[0];
}

// mul_mat_vec_q at one token, as its source reads: 4 warps, vdr 2.
float mmvq_row(Weights w, const uint8_t * x, const uint8_t * y, int nblocks) {
    const int parts       = w == Weights::q4_0 ? 2 : 4;  // qi / vdr
    const int pass_blocks = 4 * kWarp / parts;           // blocks_per_iter
    float tmp[4 * kWarp];
    for (int t = 0; t < 4 * kWarp; ++t) {
        tmp[t] = 0.0f;
        for (int kbx = t / parts; kbx < nblocks; kbx += pass_blocks) {
            tmp[t] += mmvq_part(w, x, y, kbx, t % parts);
        }
    }
    float lanes[kWarp];
    for (int l = 0; l < kWarp; ++l) {
        lanes[l] = tmp[l];
        for (int warp = 1; warp < 4; ++warp) {
            lanes[l] += tmp[warp * kWarp + l];
        }
    }
    return butterfly(lanes);
}

// The experiment's data flow for one row with SPLIT warps, using the header's own pieces. WHOLE (the experiment
// fusion-5-stock-whole-blocks, splits 2 and 4): lane b of a segment adds all the parts of block b into its slots (one
// per part), and MMVQ warp slice * owned + j's lane l is read from lane j * warp_blocks + l / parts, slot l % parts.
template <int SPLIT, Weights W, bool WHOLE = false>
float kernel_row(const uint8_t * x, const uint8_t * y, int nblocks, int sabotage, std::mt19937 & rng) {
    using Order = MmvqOrder<W>;
    constexpr int owned          = kMmvqWarps / SPLIT;
    constexpr int segment_blocks = owned * Order::warp_blocks;
    constexpr int bb             = block_bytes_of(W);
    const int     npasses        = (nblocks + Order::pass_blocks - 1) / Order::pass_blocks;
    alignas(16) uint8_t stage[segment_blocks * bb + 16];
    float sums[kMmvqWarps][kWarp];
    for (int slice = 0; slice < SPLIT; ++slice) {
        float acc[owned][kWarp] = {};
        float slots[kWarp][Order::parts] = {};
        for (int pass = 0; pass < npasses; ++pass) {
            const int first  = Order::segment_first(pass, slice, segment_blocks);
            const int nvalid = Order::segment_valid(first, segment_blocks, nblocks);
            for (auto & byte : stage) {
                byte = uint8_t(rng());  // a byte nobody staged changes the sum
            }
            std::memcpy(stage, x + first * bb, (nvalid * bb / 16) * 16);  // 16-byte pieces
            const int nused = blocks_used(nvalid, sabotage);
            for (int lane = 0; WHOLE && lane < nused; ++lane) {
                for (int q = 0; q < Order::parts; ++q) {
                    slots[lane][q] += staged_part_dot<W>(stage, lane, q, y + (first + lane) * kYBlockBytes);
                }
            }
            for (int lane = 0; !WHOLE && lane < kWarp; ++lane) {
                const int part = lane % Order::parts;
                for (int j = 0; j < owned; ++j) {
                    const int b = Order::block_of(j, lane);
                    if (b >= nused) {
                        continue;
                    }
                    acc[j][lane] += staged_part_dot<W>(stage, b, part, y + (first + b) * kYBlockBytes);
                }
            }
        }
        for (int j = 0; j < owned; ++j) {
            for (int l = 0; l < kWarp; ++l) {
                sums[slice * owned + j][l] = WHOLE ? slots[j * Order::warp_blocks + l / Order::parts][l % Order::parts]
                                                   : acc[j][l];
            }
        }
    }
    float lanes[kWarp];
    for (int l = 0; l < kWarp; ++l) {
        lanes[l] = sums[0][l];
        for (int w = 1; w < kMmvqWarps; ++w) {
            lanes[l] += sums[w][l];
        }
    }
    return butterfly(lanes);
}

#ifdef FUSEKIT_STOCK_ORDERED_TILES
// The experiment fusion-5-stock-ordered-tiles: one warp per row taking whole tiles (lane i: block i), the parts of
// block i added into lane i's slots (MmvqOrder::slot_of), and at the end MMVQ warp w's lane l read from lane
// holder_lane(w, l), slot holder_slot(w, l), the four warps added in order.
template <Weights W>
float by_tile_row(const uint8_t * x, const uint8_t * y, int nblocks, int sabotage, std::mt19937 & rng) {
    using Order = MmvqOrder<W>;
    constexpr int bb = block_bytes_of(W);
    alignas(16) uint8_t stage[tile_smem_bytes_of(W)];
    float slots[kWarp][Order::slots] = {};
    for (int tile = 0; tile < tile_count(nblocks); ++tile) {
        for (auto & byte : stage) {
            byte = uint8_t(rng());
        }
        std::memcpy(stage, x + tile * kTileBlocks * bb, vecs_in_tile(nblocks, tile, bb) * 16);
        const int nused = blocks_used(blocks_in_tile(nblocks, tile), sabotage);
        for (int lane = 0; lane < nused; ++lane) {
            const uint8_t * yb = y + (tile * kTileBlocks + lane) * kYBlockBytes;
            for (int part = 0; part < Order::parts; ++part) {
                slots[lane][Order::slot_of(tile, part)] += staged_part_dot<W>(stage, lane, part, yb);
            }
        }
    }
    float lanes[kWarp];
    for (int l = 0; l < kWarp; ++l) {
        lanes[l] = slots[Order::holder_lane(0, l)][Order::holder_slot(0, l)];
        for (int w = 1; w < kMmvqWarps; ++w) {
            lanes[l] += slots[Order::holder_lane(w, l)][Order::holder_slot(w, l)];
        }
    }
    return butterfly(lanes);
}

// The experiment's packed form for rows MMVQ's first warp covers alone (warp_blocks blocks): lane j of a row takes
// block j, keeps the sums of MMVQ lanes parts * j + part (one term each, then warps 1-3's zeros), and the butterfly
// over MMVQ's lanes runs as shuffles between lanes (offsets of at least `parts`) and additions within a lane.
template <Weights W>
float packed_row(const uint8_t * x, const uint8_t * y, int sabotage) {
    using Order = MmvqOrder<W>;
    constexpr int P = Order::parts, group = Order::warp_blocks, bb = block_bytes_of(W);
    alignas(16) uint8_t stage[tile_smem_bytes_of(W)] = {};
    std::memcpy(stage, x, group * bb);
    float acc[group][P] = {};
    for (int j = 0; j < blocks_used(group, sabotage); ++j) {
        const uint8_t * yb = y + j * kYBlockBytes;
        for (int part = 0; part < P; ++part) {
            acc[j][part] += staged_part_dot<W>(stage, j, part, yb);
        }
    }
    for (auto & lane : acc) {
        for (float & a : lane) {
            for (int w = 1; w < kMmvqWarps; ++w) {
                a += 0.0f;
            }
        }
    }
    for (int offset = kWarp / 2; offset > 0; offset >>= 1) {
        float next[group][P];
        for (int j = 0; j < group; ++j) {
            for (int part = 0; part < P; ++part) {
                next[j][part] = offset >= P ? acc[j][part] + acc[j ^ (offset / P)][part]
                                            : acc[j][part] + acc[j][part ^ offset];
            }
        }
        std::memcpy(acc, next, sizeof(acc));
    }
    return acc[0][0];
}
#endif

#ifdef FUSEKIT_STOCK_ORDERED_STREAM
// The experiment fusion-5-stock-streamed: one warp's run of rows through its ring of DEPTH slots, with the
// kernel's cursors (issue: row, tile, slot; consume: tile, row, slot). A copy lands only when a wait retires its group
// (a queue of committed groups, the oldest retired first, as cp.async.wait_group does), and every slot starts and is
// refilled over garbage, so a wrong wait count, a slot overwritten while read or a cursor that slips reads bytes no
// copy put there. Per row: the slots of fusion-5-stock-ordered-tiles (by select, as the kernel adds them), then the
// lane sums of mmvq_row_sum.
struct PendingCopy {
    int slot;
    int row;
    int tile;
};

template <int DEPTH, Weights W>
std::vector<float> stream_run(const uint8_t * x, const uint8_t * y, int nblocks, int nrows_w, int sabotage,
                              std::mt19937 & rng) {
    using Order = MmvqOrder<W>;
    constexpr int bb     = block_bytes_of(W);
    const int     ntiles = tile_count(nblocks);
    alignas(16) uint8_t ring[DEPTH][tile_smem_bytes_of(W)];
    for (auto & slot : ring) {
        for (auto & byte : slot) {
            byte = uint8_t(rng());
        }
    }
    std::vector<std::vector<PendingCopy>> groups;  // committed, not yet landed; oldest first
    int issue_row = 0, issue_tile = 0, issue_slot = 0;
    const auto issue = [&]() {
        std::vector<PendingCopy> group;
        if (issue_row < nrows_w) {
            group.push_back({issue_slot, issue_row, issue_tile});
            if (++issue_tile == ntiles) {
                issue_tile = 0;
                ++issue_row;
            }
        }
        groups.push_back(group);
        issue_slot = issue_slot + 1 == DEPTH ? 0 : issue_slot + 1;
    };
    const auto wait = [&](int pending) {
        while (int(groups.size()) > pending) {
            for (const PendingCopy & c : groups.front()) {
                for (auto & byte : ring[c.slot]) {
                    byte = uint8_t(rng());  // bytes past the tile are whatever the slot held
                }
                const uint8_t * src = x + (int64_t(c.row) * nblocks + c.tile * kTileBlocks) * bb;
                std::memcpy(ring[c.slot], src, vecs_in_tile(nblocks, c.tile, bb) * 16);
            }
            groups.erase(groups.begin());
        }
    };
    for (int s = 0; s < DEPTH - 1; ++s) {
        issue();
    }
#ifdef FUSEKIT_STREAM_Y_SHARED
    // fusion-5-stock-y-shared: the CTA's copy of the activations, made word by word as the kernel makes it, into a
    // buffer of the kernel's size that held garbage; the parts below read it through the header's part_dot_shared_y
    // (fusion-5-stream-y-pairs: each word placed by y_pair_word, read through part_dot_pair_y)
#ifdef FUSEKIT_STREAM_Y_PAIRS
    constexpr int y_block_bytes = kYPairBlockBytes;
    const auto    y_word        = [](int w) { return y_pair_word(w); };
#else
    constexpr int y_block_bytes = kYBlockBytes;
    const auto    y_word        = [](int w) { return w; };
#endif
    alignas(16) static uint8_t y_shared[kStreamYBlocks * y_block_bytes];
    for (auto & byte : y_shared) {
        byte = uint8_t(rng());
    }
    for (int w = 0; w < nblocks * kYBlockBytes / 4; ++w) {
        std::memcpy(y_shared + 4 * y_word(w), y + 4 * w, 4);
    }
    const uint8_t * ysrc = y_shared;
#else
    constexpr int   y_block_bytes = kYBlockBytes;
    const uint8_t * ysrc          = y;
#endif
#if defined(FUSEKIT_STREAM_Y_REGISTERS)
    // fusion-5-stream-zy-y-registers: where plan keeps a lane's blocks of y in registers, each lane's read once from the
    // copy through the header's load_y_registers, the parts below through part_dot_y_registers
    const bool y_regs = stream_y_in_registers(W, nblocks);
#if defined(FUSEKIT_STREAM_Y_REGISTERS_FIRST)
    // fusion-5-stream-zz-y-registers-first: Q8_0 rows of more tiles hold their first kYRegTiles tiles' y in registers
    const bool y_first = W == Weights::q8_0 && kStreamYRegistersFirst && !y_regs;
#else
    const bool y_first = false;
#endif
    int        y_words[kWarp][kYRegTiles][8];
    float      y_scale[kWarp][kYRegTiles];
    for (int lane = 0; (y_regs || y_first) && lane < kWarp; ++lane) {
        load_y_registers(ysrc, lane, y_words[lane], y_scale[lane]);
    }
#endif
    std::vector<float> out;
    float slots[kWarp][Order::slots] = {};
    int   tile = 0, slot = 0;
    for (int item = 0; item < nrows_w * ntiles; ++item) {
        wait(DEPTH - 2);
        issue();
        const int nused = blocks_used(blocks_in_tile(nblocks, tile), sabotage);
        for (int lane = 0; lane < nused; ++lane) {
            const uint8_t * yb = ysrc + (tile * kTileBlocks + lane) * y_block_bytes;
            for (int part = 0; part < Order::parts; ++part) {
#if defined(FUSEKIT_STREAM_Y_REGISTERS)
                const bool  regs = y_regs || (y_first && tile < kYRegTiles);
                const float d = regs ? part_dot_y_registers<W, PlainHooks>(ring[slot], lane, part, y_words[lane],
                                                                           y_scale[lane], tile)
                                     : part_dot_pair_y<W, PlainHooks>(ring[slot], lane, part, yb);
#elif defined(FUSEKIT_STREAM_Y_PAIRS)
                const float d = part_dot_pair_y<W, PlainHooks>(ring[slot], lane, part, yb);
#elif defined(FUSEKIT_STREAM_Y_SHARED)
                const float d = part_dot_shared_y<W, PlainHooks>(ring[slot], lane, part, yb);
#else
                const float d = staged_part_dot<W>(ring[slot], lane, part, yb);
#endif
                for (int h = 0; h < Order::pass_tiles; ++h) {
                    float & a = slots[lane][h * Order::parts + part];
                    a         = tile % Order::pass_tiles == h ? a + d : a;
                }
            }
        }
        slot = slot + 1 == DEPTH ? 0 : slot + 1;
        if (++tile == ntiles) {
            float lanes[kWarp];
            for (int l = 0; l < kWarp; ++l) {
                lanes[l] = slots[Order::holder_lane(0, l)][Order::holder_slot(0, l)];
                for (int w = 1; w < kMmvqWarps; ++w) {
                    lanes[l] += slots[Order::holder_lane(w, l)][Order::holder_slot(w, l)];
                }
            }
            out.push_back(butterfly(lanes));
            std::memset(slots, 0, sizeof(slots));
            tile = 0;
        }
    }
    wait(0);
    return out;
}
#endif

template <Weights W>
float kernel_row_split(int split, const uint8_t * x, const uint8_t * y, int nblocks, int sabotage, std::mt19937 & rng) {
    switch (split) {
        case 1:  return kernel_row<1, W>(x, y, nblocks, sabotage, rng);
        case 2:  return kernel_row<2, W>(x, y, nblocks, sabotage, rng);
#ifdef FUSEKIT_STOCK_WHOLE_BLOCKS  // fusion-5-stock-whole-blocks: splits "-2" and "-4", lanes taking whole blocks
        case -2: return kernel_row<2, W, true>(x, y, nblocks, sabotage, rng);
        case -4: return kernel_row<4, W, true>(x, y, nblocks, sabotage, rng);
#endif
        default: return kernel_row<4, W>(x, y, nblocks, sabotage, rng);
    }
}

}  // namespace

int main(int argc, char ** argv) {
    const bool sabotage = argc > 1 && std::strcmp(argv[1], "--sabotage") == 0;
    std::mt19937 rng(20261203);
    // K = 256 ... 8192: rows shorter than one pass (MMVQ's small_k), one pass, several, and a partial last pass
    const Case cases[] = {
        {Weights::q8_0, 8},  {Weights::q8_0, 16}, {Weights::q8_0, 24}, {Weights::q8_0, 32},  {Weights::q8_0, 48},
        {Weights::q8_0, 64}, {Weights::q8_0, 128}, {Weights::q8_0, 256}, {Weights::q4_0, 8},  {Weights::q4_0, 16},
        {Weights::q4_0, 40}, {Weights::q4_0, 64}, {Weights::q4_0, 96},  {Weights::q4_0, 128},
    };
    int checks = 0, equal = 0, near = 0;
    for (const Case & c : cases) {
        for (int row = 0; row < 8; ++row) {
            const std::vector<uint8_t> x = random_blocks(rng, c.w, c.nblocks);
            const std::vector<uint8_t> y = random_y(rng, c.nblocks);
            const float mmvq = mmvq_row(c.w, x.data(), y.data(), c.nblocks);
            double      scale;
            const double ref = reference64(c.w, x.data(), y.data(), c.nblocks, scale);
#if defined(FUSEKIT_STOCK_WHOLE_BLOCKS)
            for (int split : {0, 1, 2, 4, -2, -4}) {  // -2, -4: lanes taking whole blocks (fusion-5-stock-whole-blocks)
#elif defined(FUSEKIT_STOCK_ORDERED_TILES)
            for (int split : {0, 1, 2, 4}) {  // 0: one warp per row by tile (fusion-5-stock-ordered-tiles)
#else
            for (int split : {1, 2, 4}) {
#endif
                float ours = 0.0f;
#ifdef FUSEKIT_STOCK_ORDERED_TILES
                if (split == 0) {
                    ours = c.w == Weights::q4_0 ? by_tile_row<Weights::q4_0>(x.data(), y.data(), c.nblocks, sabotage, rng)
                                                : by_tile_row<Weights::q8_0>(x.data(), y.data(), c.nblocks, sabotage, rng);
                }
#endif
                if (split != 0) {
                    ours = c.w == Weights::q4_0
                        ? kernel_row_split<Weights::q4_0>(split, x.data(), y.data(), c.nblocks, sabotage, rng)
                        : kernel_row_split<Weights::q8_0>(split, x.data(), y.data(), c.nblocks, sabotage, rng);
                }
                uint32_t a, b;
                std::memcpy(&a, &ours, 4);
                std::memcpy(&b, &mmvq, 4);
                const bool same  = a == b;
                const bool close = std::fabs(double(ours) - ref) <= 1e-5 * scale;
                ++checks;
                equal += same;
                near += close;
                if (row == 0) {
                    std::printf("%s K=%5d split %d (0: by tile, -N: whole blocks): ours %.9g mmvq %.9g ref %.9g %s\n",
                                c.w == Weights::q4_0 ? "q4_0" : "q8_0", c.nblocks * 32, split, ours, mmvq, ref,
                                same ? "same bits" : "DIFFERENT");
                }
            }
        }
    }
#ifdef FUSEKIT_STOCK_ORDERED_TILES
    // the packed form: rows of one MMVQ warp's blocks (Q8_0 K = 256, Q4_0 K = 512)
    for (int row = 0; row < 32; ++row) {
        for (Weights w : {Weights::q8_0, Weights::q4_0}) {
            const int nblocks = w == Weights::q4_0 ? MmvqOrder<Weights::q4_0>::warp_blocks : MmvqOrder<Weights::q8_0>::warp_blocks;
            const std::vector<uint8_t> x = random_blocks(rng, w, nblocks);
            const std::vector<uint8_t> y = random_y(rng, nblocks);
            const float mmvq = mmvq_row(w, x.data(), y.data(), nblocks);
            double      scale;
            const double ref = reference64(w, x.data(), y.data(), nblocks, scale);
            const float ours = w == Weights::q4_0 ? packed_row<Weights::q4_0>(x.data(), y.data(), sabotage)
                                                  : packed_row<Weights::q8_0>(x.data(), y.data(), sabotage);
            ++checks;
            equal += std::memcmp(&ours, &mmvq, 4) == 0;
            near += std::fabs(double(ours) - ref) <= 1e-5 * scale;
            if (row == 0) {
                std::printf("%s K=%5d packed: ours %.9g mmvq %.9g ref %.9g %s\n", w == Weights::q4_0 ? "q4_0" : "q8_0",
                            nblocks * 32, ours, mmvq, ref, std::memcmp(&ours, &mmvq, 4) == 0 ? "same bits" : "DIFFERENT");
            }
        }
    }
#endif
#ifdef FUSEKIT_STOCK_ORDERED_STREAM
    // the stream kernel: a warp's run of 7 rows through rings of 2, 3 and 4 slots (K from a partial tile to 5 tiles)
    for (const Case & c : cases) {
        const int nrows_w = 7;
        const std::vector<uint8_t> x = random_blocks(rng, c.w, int64_t(nrows_w) * c.nblocks);
        const std::vector<uint8_t> y = random_y(rng, c.nblocks);
        for (int depth : {2, 3, 4}) {
            const auto run = [&](auto tag) {
                constexpr int D = decltype(tag)::value;
                return c.w == Weights::q4_0 ? stream_run<D, Weights::q4_0>(x.data(), y.data(), c.nblocks, nrows_w, sabotage, rng)
                                            : stream_run<D, Weights::q8_0>(x.data(), y.data(), c.nblocks, nrows_w, sabotage, rng);
            };
            const std::vector<float> ours = depth == 2 ? run(std::integral_constant<int, 2>{})
                                          : depth == 3 ? run(std::integral_constant<int, 3>{})
                                                       : run(std::integral_constant<int, 4>{});
            int same_rows = 0;
            for (int r = 0; r < nrows_w; ++r) {
                const uint8_t * xr   = x.data() + int64_t(r) * c.nblocks * block_bytes_of(c.w);
                const float     mmvq = mmvq_row(c.w, xr, y.data(), c.nblocks);
                double          scale;
                const double    ref  = reference64(c.w, xr, y.data(), c.nblocks, scale);
                const float     o    = r < int(ours.size()) ? ours[r] : NAN;
                const bool      same = std::memcmp(&o, &mmvq, 4) == 0;
                ++checks;
                equal += same;
                same_rows += same;
                near += std::fabs(double(o) - ref) <= 1e-5 * scale;
            }
            std::printf("%s K=%5d stream depth %d, %d rows: %d bit for bit MMVQ's\n", c.w == Weights::q4_0 ? "q4_0" : "q8_0",
                        c.nblocks * 32, depth, nrows_w, same_rows);
        }
    }
#endif
    std::printf("%d checks: %d bit for bit MMVQ's, %d within 1e-5 of the float64 reference\n", checks, equal, near);
    if (sabotage) {
        std::printf("sabotage: %d of %d equal (all must be different)\n", equal, checks);
        return equal == 0 ? 0 : 1;
    }
    if (equal == checks && near == checks) {
        std::printf("order checks passed\n");
        return 0;
    }
    return 1;
}
