// fusekit fusion-5 (q8-gemv): Q8_0 (and Q4_0) weights x q8_1 activations at one token, with wide loads.
//
// Device code only, free of ggml headers, so the same kernel runs in ggml (through
// fusekit-q8-gemv.cu) and in the standalone check/timing program (q8_gemv_bench.cu).
//
// Why: ggml's MMVQ reads a Q8_0 block (fp16 scale + 32 int8, 34 bytes, 2-byte aligned) with 16-bit
// loads. When a row holds a multiple of 8 blocks (K % 256 == 0) every row starts 16-byte aligned,
// so a warp can stream a tile of 32 blocks (1088 bytes = 68 x 16 bytes) with 16-byte loads into
// registers, several tiles ahead, then put each tile through shared memory so that lane i owns
// block i of the tile: its scale is a 16-bit shared load and its 32 quants are 8 funnel-shifted
// 32-bit words. One warp owns one row (and a slice of its tiles when SPLIT warps share a row).
//
// Arithmetic per block: sumi = sum of 32 int8 x int8 products (exact, dp4a), then
// d_x * d_y * sumi in fp32, as ggml's vec_dot_q8_0_q8_1_impl does per quarter block. Blocks are
// summed in a different order than MMVQ, so results agree to fp32 rounding, not bit for bit.
//
// Q4_0 (fp16 d + 16 bytes of nibbles, 18 bytes) takes the same path: 8 blocks are 144 = 9 x 16 bytes,
// a tile of 32 blocks is 36 loads of 16 bytes. Per block, with the q8_1 half2 (d_y, s_y = d_y * sum of
// its quants): d_x * (d_y * sumi - 8 * s_y), the nibble offset of 8 folded in as ggml's
// vec_dot_q4_0_q8_1_impl does (it subtracts it per half block, so the roundings differ slightly).
#pragma once

#include <cuda_fp16.h>
#include <stdint.h>

namespace fusekit_q8 {

constexpr int kWarp          = 32;
constexpr int kBlockValues   = 32;                      // values per Q8_0 / q8_1 block
constexpr int kXBlockBytes   = 34;                      // Q8_0: fp16 d, int8 qs[32]
constexpr int kYBlockBytes   = 36;                      // q8_1: half2 (d, sum), int8 qs[32]
constexpr int kTileBlocks    = kWarp;                   // one block per lane
constexpr int kWarpsPerCta   = 8;
constexpr int kRowAlignBlocks = 8;                      // 8 blocks = 272 bytes = 17 x 16 (Q4_0: 144 = 9 x 16)
constexpr int kQ4BlockBytes  = 18;                      // Q4_0: fp16 d, uint8 qs[16] (low nibbles: values
                                                        // 0-15, high nibbles: values 16-31)

// The weight formats the kernel reads; the tile geometry follows from the block size (Q8_0: a tile is 1088
// bytes, 68 loads of 16, 3 per lane; Q4_0: 576 bytes, 36 loads, 2 per lane). The staging buffer has 16 bytes
// more: the last lane's funnel shift reads one word past the tile.
enum class Weights : int { q8_0 = 0, q4_0 };

__host__ __device__ constexpr int block_bytes_of(Weights w) { return w == Weights::q4_0 ? kQ4BlockBytes : kXBlockBytes; }
__host__ __device__ constexpr int tile_vecs_of(Weights w) { return kTileBlocks * block_bytes_of(w) / 16; }
__host__ __device__ constexpr int vecs_per_lane_of(Weights w) { return (tile_vecs_of(w) + kWarp - 1) / kWarp; }
__host__ __device__ constexpr int tile_smem_bytes_of(Weights w) { return kTileBlocks * block_bytes_of(w) + 16; }

// What the epilogue needs besides the two sums; mirrors ggml's mm fusion arguments.
enum class Glu : int { none = 0, swiglu, geglu, swiglu_oai, swiglu_clamp, mul };

struct Problem {
    Weights         weights;    // the format of x and gate (Weights::q8_0 when zero-initialised)
    const uint8_t * x;          // Q8_0 or Q4_0 weights
    const uint8_t * gate;       // gate weights of the same format with x's strides, or nullptr
    const uint8_t * y;          // q8_1 activations
    const int32_t * ids;        // MUL_MAT_ID expert ids for this token, or nullptr
    const float   * x_bias;     // or nullptr
    const float   * gate_bias;  // or nullptr
    float         * dst;
    Glu   glu;
    float glu_limit;
    int   nblocks;              // blocks per row (K / 32), a multiple of kRowAlignBlocks
    int   nrows;
    // Strides: x in weight blocks, y in q8_1 blocks, dst (and biases) in floats.
    int64_t row_x, channel_x, sample_x;
    int64_t channel_y, sample_y;
    int64_t channel_dst, sample_dst;
    int   nchannels_y;
    int   channel_ratio;        // nchannels_dst / nchannels_x (no ids)
    int   sample_ratio;         // nsamples_dst / nsamples_x
    int   x_is_weight;          // 1: x is not written by earlier kernels, so it may be read before the wait
    int   sabotage;             // 1: drop the last block of every tile (must fail every check)
};

__device__ __forceinline__ uint4 load_stream(const uint4 * p) {
    return __ldcs(p);  // weights are read once per token: evict first, keep activations in L2
}

// Integer helpers that also compile for the host, so the tile arithmetic below can be checked on a
// machine without a GPU (q8_gemv_host_check.cu) with the very functions the kernel uses.
__host__ __device__ __forceinline__ uint32_t funnel_right(uint32_t lo, uint32_t hi, int shift) {
#ifdef __CUDA_ARCH__
    return __funnelshift_r(lo, hi, shift);
#else
    return shift == 0 ? lo : (lo >> shift) | (hi << (32 - shift));
#endif
}

__host__ __device__ __forceinline__ int dot4_i8(int a, int b, int acc) {
#ifdef __CUDA_ARCH__
    return __dp4a(a, b, acc);
#else
    for (int i = 0; i < 4; ++i) {
        acc += int(int8_t(uint32_t(a) >> (8 * i))) * int(int8_t(uint32_t(b) >> (8 * i)));
    }
    return acc;
#endif
}

// The tile schedule: tiles of 32 blocks; a row of nblocks (a multiple of 8) ends in a partial tile.
__host__ __device__ __forceinline__ int tile_count(int nblocks) {
    return (nblocks + kTileBlocks - 1) / kTileBlocks;
}

__host__ __device__ __forceinline__ int blocks_in_tile(int nblocks, int tile) {
    const int rest = nblocks - tile * kTileBlocks;
    return tile < tile_count(nblocks) ? (rest < kTileBlocks ? rest : kTileBlocks) : 0;
}

__host__ __device__ __forceinline__ int vecs_in_tile(int nblocks, int tile, int block_bytes = kXBlockBytes) {
    return blocks_in_tile(nblocks, tile) * block_bytes / 16;  // exact: blocks come in eights
}

// Blocks of a tile that enter the sum: all of them, or one fewer in a sabotage build.
__host__ __device__ __forceinline__ int blocks_used(int nblk, int sabotage) {
    return sabotage ? nblk - 1 : nblk;
}

// Short rows stored back to back (K = 256 or 512: 8 or 16 blocks, row stride = row length) are packed: 32 / nblocks
// rows make one tile, so every lane loads and sums, where one row per warp would leave half or three quarters of
// the lanes idle. Lane i of a packed tile takes block i % nblocks of row i / nblocks.
__host__ __device__ __forceinline__ int rows_per_tile(int nblocks, int64_t row_x) {
    return row_x == nblocks && (nblocks == 8 || nblocks == 16) ? kTileBlocks / nblocks : 1;
}

__host__ __device__ __forceinline__ int packed_row(int lane, int pack) {
    return lane / (kTileBlocks / pack);
}

__host__ __device__ __forceinline__ int packed_block(int lane, int pack) {
    return lane % (kTileBlocks / pack);
}

// 16-byte loads of a packed tile that holds `rows` rows (exact: a row is 8 or 16 blocks).
__host__ __device__ __forceinline__ int packed_vecs(int rows, int pack, int block_bytes) {
    return rows * (kTileBlocks / pack) * block_bytes / 16;
}

// Lane's block in a staged tile: its fp16 scale, and its quants as the aligned words that hold them with the
// byte shift that funnel_right undoes (blocks are 2-byte aligned).
struct StagedBlock {
    float            d;
    const uint32_t * words;
    int              shift;
};

__host__ __device__ __forceinline__ StagedBlock staged_block(const uint8_t * tile, int lane, int block_bytes) {
    const int first = lane * block_bytes;
    const int qbyte = first + 2;
    return {__half2float(*reinterpret_cast<const __half *>(tile + first)),
            reinterpret_cast<const uint32_t *>(tile + (qbyte & ~3)), (qbyte & 3) * 8};
}

// The dot product of lane's block in a staged tile with its q8_1 activation block.
__host__ __device__ __forceinline__ float block_dot(const uint8_t * tile, int lane, const int * yq, float dy) {
    const StagedBlock b = staged_block(tile, lane, kXBlockBytes);
    int sumi = 0;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
        sumi = dot4_i8((int) funnel_right(b.words[i], b.words[i + 1], b.shift), yq[i], sumi);
    }
    return b.d * dy * (float) sumi;
}

// The same for a staged Q4_0 tile: lane's 16 nibble bytes as 4 funnel-shifted words; low nibbles meet
// activation words 0-3, high nibbles words 4-7; sy is the q8_1 block's d * sum of its quants.
__host__ __device__ __forceinline__ float block_dot_q4_0(const uint8_t * tile, int lane, const int * yq, float dy,
                                                         float sy) {
    const StagedBlock b = staged_block(tile, lane, kQ4BlockBytes);
    int sumi = 0;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const uint32_t w = funnel_right(b.words[i], b.words[i + 1], b.shift);
        sumi = dot4_i8(int(w & 0x0F0F0F0Fu), yq[i], sumi);
        sumi = dot4_i8(int((w >> 4) & 0x0F0F0F0Fu), yq[i + 4], sumi);
    }
    return b.d * (dy * (float) sumi - 8.0f * sy);
}

template <Weights W>
__host__ __device__ __forceinline__ float block_dot_of(const uint8_t * tile, int lane, const int * yq, float dy, float sy) {
    if constexpr (W == Weights::q4_0) {
        return block_dot_q4_0(tile, lane, yq, dy, sy);
    } else {
        (void) sy;
        return block_dot(tile, lane, yq, dy);
    }
}

// Hooks are a policy: ggml's glue passes ones built on ggml's own activation functions (so a fused
// gate/up epilogue matches MMVQ's exactly) and on its programmatic-dependent-launch wait; the
// standalone program passes these.
struct PlainHooks {
    // Called before reading anything an earlier kernel wrote and before writing the output.
    __device__ static void wait_for_inputs() {}
    __device__ static float apply(Glu glu, float x, float g, float /*limit*/) {
        return glu == Glu::mul ? x * g : glu == Glu::swiglu ? x * (g / (1.0f + expf(-g))) : x;
    }
};

// The q8_1 activation block of `tile` that `lane` multiplies: its scale, its scaled sum and its 32 quants
// as 8 words. Coherent loads (ld.global.ca), never the read-only path (__ldg, ld.global.nc): the quantize
// kernel before this one writes y, and under programmatic dependent launch the non-coherent cache is outside
// the memory model that the grid-dependency wait orders, so it can return what y held before (stale
// activations: NaN log-probs in a one-token perplexity run on the H200, 2026-12-01).
__device__ __forceinline__ void load_y_block(const uint8_t * yrow, int tile, int lane, int * yq, float & dy, float & sy) {
    const uint8_t * yb = yrow + (int64_t) (tile * kTileBlocks + lane) * kYBlockBytes;
    const unsigned  ds_bits = __ldca(reinterpret_cast<const unsigned *>(yb));
    const float2    ds      = __half22float2(*reinterpret_cast<const half2 *>(&ds_bits));
    dy = ds.x;
    sy = ds.y;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
        yq[i] = __ldca(reinterpret_cast<const int *>(yb + 4) + i);
    }
}

// The weight matrix (expert with ids), activation channel and weight sample of one output channel and sample.
// With ids, the expert id comes from the router kernel: read after the wait (the weight rows it picks follow).
struct Channels {
    int x;
    int y;
    int sample_x;
};

template <class Hooks>
__device__ __forceinline__ Channels resolve_channels(const Problem & p, int channel_dst, int sample_dst) {
    if (!p.x_is_weight) {
        Hooks::wait_for_inputs();
    }
    int channel_x = channel_dst / p.channel_ratio;
    if (p.ids) {
        Hooks::wait_for_inputs();
        channel_x = p.ids[channel_dst];
    }
    return {channel_x, p.ids ? channel_dst % p.nchannels_y : channel_dst, sample_dst / p.sample_ratio};
}

// Lane's 16-byte loads of one tile (the nvecs loads from x + first on; the gate's the same way).
template <int VECS, bool GATE>
__device__ __forceinline__ void load_tile(const uint4 * x, const uint4 * gate, int first, int nvecs, int lane,
                                          uint4 (&xv)[VECS], uint4 (&gv)[VECS]) {
#pragma unroll
    for (int v = 0; v < VECS; ++v) {
        const int idx = lane + v * kWarp;
        if (idx < nvecs) {
            xv[v] = load_stream(x + first + idx);
            if constexpr (GATE) {
                gv[v] = load_stream(gate + first + idx);
            }
        }
    }
}

// Lane's loads of a tile into the warp's staging buffers (x_stage, and gate_stage with a gate).
template <int VECS, bool GATE>
__device__ __forceinline__ void stage_tile(uint8_t * x_stage, uint8_t * gate_stage, int nvecs, int lane,
                                           const uint4 (&xv)[VECS], const uint4 (&gv)[VECS]) {
#pragma unroll
    for (int v = 0; v < VECS; ++v) {
        const int idx = lane + v * kWarp;
        if (idx < nvecs) {
            reinterpret_cast<uint4 *>(x_stage)[idx] = xv[v];
            if constexpr (GATE) {
                reinterpret_cast<uint4 *>(gate_stage)[idx] = gv[v];
            }
        }
    }
}

// One output row: bias, the gate's bias and GLU (ggml's fused gate/up), then the store, after the wait (the
// output may share memory an earlier kernel still reads).
template <bool GATE, class Hooks>
__device__ __forceinline__ void write_row(const Problem & p, int row, int channel_x, int channel_dst, int sample_dst,
                                          float acc, float acc_gate) {
    Hooks::wait_for_inputs();
    const int     channel_bias = p.ids ? channel_x : channel_dst;
    const int64_t out          = sample_dst * p.sample_dst + channel_dst * p.channel_dst + row;
    const int64_t bias_at      = sample_dst * p.sample_dst + channel_bias * p.channel_dst + row;
    float result = acc;
    if (p.x_bias) {
        result += p.x_bias[bias_at];
    }
    if constexpr (GATE) {
        float g = acc_gate;
        if (p.gate_bias) {
            g += p.gate_bias[bias_at];
        }
        result = Hooks::apply(p.glu, result, g, p.glu_limit);
    }
    p.dst[out] = result;
}

// Grid: (ceil(nrows / (kWarpsPerCta / SPLIT)), nchannels_dst, nsamples_dst); block: (32, kWarpsPerCta).
// SPLIT warps share a row, taking every SPLIT-th tile; UNROLL tiles are in flight per warp.
// Y_LATE and MIN_CTAS are experiments of the standalone program (kernels/NOTES-q8-gemv.md): Y_LATE loads a
// tile's activations only when that tile is summed (fewer registers than holding UNROLL tiles of them), and
// MIN_CTAS asks the compiler for registers that fit that many CTAs per SM (0: no request; a request of 1 is
// not the same and took 136 registers instead of 128, one CTA per SM instead of two). ggml uses the defaults.
// W is the weight format (p.weights must say the same).
template <int SPLIT, int UNROLL, bool GATE, class Hooks, bool Y_LATE = false, int MIN_CTAS = 0, Weights W = Weights::q8_0>
__global__ void __launch_bounds__(kWarp * kWarpsPerCta, MIN_CTAS)
q8_gemv_kernel(const Problem p) {
    constexpr int rows_per_cta  = kWarpsPerCta / SPLIT;
    constexpr int block_bytes   = block_bytes_of(W);
    constexpr int tile_vecs     = tile_vecs_of(W);
    constexpr int vecs_per_lane = vecs_per_lane_of(W);
    __shared__ __align__(16) uint8_t stage[kWarpsPerCta][GATE ? 2 : 1][tile_smem_bytes_of(W)];
    __shared__ float partial[kWarpsPerCta][2];

    const int lane        = threadIdx.x;
    const int warp        = threadIdx.y;
    const int slice       = warp % SPLIT;
    const int row         = blockIdx.x * rows_per_cta + warp / SPLIT;
    const int channel_dst = blockIdx.y;
    const int sample_dst  = blockIdx.z;
    const Channels ch     = resolve_channels<Hooks>(p, channel_dst, sample_dst);

    float acc = 0.0f, acc_gate = 0.0f;
    if (row < p.nrows) {
        const int64_t xoff = (ch.sample_x * p.sample_x + ch.x * p.channel_x + row * p.row_x) * block_bytes;
        const uint4 * xrow = reinterpret_cast<const uint4 *>(p.x + xoff);
        const uint4 * grow = GATE ? reinterpret_cast<const uint4 *>(p.gate + xoff) : nullptr;
        const uint8_t * yrow = p.y + (sample_dst * p.sample_y + ch.y * p.channel_y) * kYBlockBytes;
        const int ntiles = tile_count(p.nblocks);

        for (int tile0 = slice; tile0 < ntiles; tile0 += SPLIT * UNROLL) {
            constexpr int YN = Y_LATE ? 1 : UNROLL;  // activation blocks held at once
            uint4 xv[UNROLL][vecs_per_lane];
            uint4 gv[UNROLL][vecs_per_lane];
            int   yq[YN][8];
            float dy[YN];
            float sy[YN];
            // 1. the weight tiles, 16 bytes per load, UNROLL tiles ahead
#pragma unroll
            for (int u = 0; u < UNROLL; ++u) {
                const int tile  = tile0 + u * SPLIT;
                const int nvecs = vecs_in_tile(p.nblocks, tile, block_bytes);
                load_tile<vecs_per_lane, GATE>(xrow, grow, tile * tile_vecs, nvecs, lane, xv[u], gv[u]);
            }
            // 2. the activations (written by the quantize kernel just before): after the wait
            if (tile0 == slice) {
                Hooks::wait_for_inputs();
            }
            if constexpr (!Y_LATE) {
#pragma unroll
                for (int u = 0; u < UNROLL; ++u) {
                    const int tile = tile0 + u * SPLIT;
                    if (lane < blocks_in_tile(p.nblocks, tile)) {
                        load_y_block(yrow, tile, lane, yq[u], dy[u], sy[u]);
                    }
                }
            }
            // 3. each tile through shared memory: lane i takes block i
#pragma unroll
            for (int u = 0; u < UNROLL; ++u) {
                const int tile = tile0 + u * SPLIT;
                if (tile >= ntiles) {
                    break;
                }
                const int nblk  = blocks_in_tile(p.nblocks, tile);
                const int nvecs = vecs_in_tile(p.nblocks, tile, block_bytes);
                stage_tile<vecs_per_lane, GATE>(stage[warp][0], stage[warp][GATE ? 1 : 0], nvecs, lane, xv[u], gv[u]);
                __syncwarp();
                const int nused = blocks_used(nblk, p.sabotage);
                const int yu    = Y_LATE ? 0 : u;
                if constexpr (Y_LATE) {
                    if (lane < nblk) {
                        load_y_block(yrow, tile, lane, yq[0], dy[0], sy[0]);
                    }
                }
                if (lane < nused) {
                    acc += block_dot_of<W>(stage[warp][0], lane, yq[yu], dy[yu], sy[yu]);
                    if constexpr (GATE) {
                        acc_gate += block_dot_of<W>(stage[warp][1], lane, yq[yu], dy[yu], sy[yu]);
                    }
                }
                __syncwarp();
            }
        }
    }

#pragma unroll
    for (int offset = kWarp / 2; offset > 0; offset >>= 1) {
        acc += __shfl_xor_sync(0xffffffff, acc, offset);
        if constexpr (GATE) {
            acc_gate += __shfl_xor_sync(0xffffffff, acc_gate, offset);
        }
    }
    if constexpr (SPLIT > 1) {
        if (lane == 0) {
            partial[warp][0] = acc;
            partial[warp][1] = acc_gate;
        }
        __syncthreads();
        if (slice != 0) {
            return;
        }
        acc = 0.0f;
        acc_gate = 0.0f;
#pragma unroll
        for (int s = 0; s < SPLIT; ++s) {
            acc += partial[warp + s][0];
            acc_gate += partial[warp + s][1];
        }
    }
    if (lane != 0 || row >= p.nrows) {
        return;
    }
    write_row<GATE, Hooks>(p, row, ch.x, channel_dst, sample_dst, acc, acc_gate);
}

// The short-row kernel: each warp sums one packed tile of PACK rows (rows_per_tile), then reduces within each
// row's group of 32 / PACK lanes. Grid: (ceil(nrows / (kWarpsPerCta * PACK)), nchannels_dst, nsamples_dst).
template <int PACK, bool GATE, class Hooks, Weights W = Weights::q8_0>
__global__ void __launch_bounds__(kWarp * kWarpsPerCta)
q8_gemv_packed_kernel(const Problem p) {
    constexpr int group         = kTileBlocks / PACK;  // lanes (and blocks) per row
    constexpr int block_bytes   = block_bytes_of(W);
    constexpr int vecs_per_lane = vecs_per_lane_of(W);
    __shared__ __align__(16) uint8_t stage[kWarpsPerCta][GATE ? 2 : 1][tile_smem_bytes_of(W)];

    const int lane        = threadIdx.x;
    const int warp        = threadIdx.y;
    const int row0        = (blockIdx.x * kWarpsPerCta + warp) * PACK;
    const int channel_dst = blockIdx.y;
    const int sample_dst  = blockIdx.z;
    const int rows        = min(PACK, p.nrows - row0);  // this warp's rows (none when <= 0)
    const int my_row      = packed_row(lane, PACK);
    const int my_block    = packed_block(lane, PACK);
    const Channels ch     = resolve_channels<Hooks>(p, channel_dst, sample_dst);

    float acc = 0.0f, acc_gate = 0.0f;
    if (rows > 0) {
        const int64_t xoff  = (ch.sample_x * p.sample_x + ch.x * p.channel_x + (int64_t) row0 * p.row_x) * block_bytes;
        const uint4 * xtile = reinterpret_cast<const uint4 *>(p.x + xoff);
        const uint4 * gtile = GATE ? reinterpret_cast<const uint4 *>(p.gate + xoff) : nullptr;
        const int     nvecs = packed_vecs(rows, PACK, block_bytes);
        uint4 xv[vecs_per_lane];
        uint4 gv[vecs_per_lane];
        load_tile<vecs_per_lane, GATE>(xtile, gtile, 0, nvecs, lane, xv, gv);
        Hooks::wait_for_inputs();  // the activations come from the kernel before
        int   yq[8];
        float dy = 0.0f, sy = 0.0f;
        const uint8_t * yrow = p.y + (sample_dst * p.sample_y + ch.y * p.channel_y) * kYBlockBytes;
        if (my_row < rows) {
            load_y_block(yrow, 0, my_block, yq, dy, sy);
        }
        stage_tile<vecs_per_lane, GATE>(stage[warp][0], stage[warp][GATE ? 1 : 0], nvecs, lane, xv, gv);
        __syncwarp();
        if (my_row < rows && my_block < blocks_used(group, p.sabotage)) {
            acc = block_dot_of<W>(stage[warp][0], lane, yq, dy, sy);
            if constexpr (GATE) {
                acc_gate = block_dot_of<W>(stage[warp][1], lane, yq, dy, sy);
            }
        }
    }
    // xor offsets below `group` stay within a row's lanes (group is a power of two)
#pragma unroll
    for (int offset = group / 2; offset > 0; offset >>= 1) {
        acc += __shfl_xor_sync(0xffffffff, acc, offset);
        if constexpr (GATE) {
            acc_gate += __shfl_xor_sync(0xffffffff, acc_gate, offset);
        }
    }
    if (my_block != 0 || my_row >= rows) {
        return;
    }
    write_row<GATE, Hooks>(p, row0 + my_row, ch.x, channel_dst, sample_dst, acc, acc_gate);
}

// Warps per row: enough CTAs to cover the GPU about twice, never more slices than tiles.
inline int choose_split(int nrows, int nchannels, int nsamples, int nblocks, int sm_count) {
    const int ntiles = tile_count(nblocks);
    int split = 1;
    while (split < kWarpsPerCta && split * 2 <= ntiles) {
        const long ctas = (long) ((nrows + kWarpsPerCta / split - 1) / (kWarpsPerCta / split)) * nchannels * nsamples;
        if (ctas >= 2L * sm_count) {
            break;
        }
        split *= 2;
    }
    return split;
}

using KernelFn = void (*)(Problem);

template <int UNROLL, bool GATE, class Hooks, bool Y_LATE = false, int MIN_CTAS = 0, Weights W = Weights::q8_0>
inline KernelFn kernel_with_split(int split) {
    switch (split) {
        case 1:  return q8_gemv_kernel<1, UNROLL, GATE, Hooks, Y_LATE, MIN_CTAS, W>;
        case 2:  return q8_gemv_kernel<2, UNROLL, GATE, Hooks, Y_LATE, MIN_CTAS, W>;
        case 4:  return q8_gemv_kernel<4, UNROLL, GATE, Hooks, Y_LATE, MIN_CTAS, W>;
        default: return q8_gemv_kernel<8, UNROLL, GATE, Hooks, Y_LATE, MIN_CTAS, W>;
    }
}

// The kernel and launch shape for one token: grid.y over output channels (experts for MUL_MAT_ID),
// grid.z over samples. Callers launch it their own way (ggml: with programmatic dependent launch).
struct Launch {
    KernelFn kernel;
    dim3     grid;
    dim3     block;
};

// The short-row kernel for a packed problem (rows_per_tile > 1).
template <class Hooks, Weights W>
inline Launch plan_packed(const Problem & p, int pack, int nchannels_dst, int nsamples_dst) {
    const bool gate = p.gate != nullptr;
    Launch l;
    l.kernel = p.weights != W ? nullptr
             : pack == 4      ? (gate ? q8_gemv_packed_kernel<4, true, Hooks, W> : q8_gemv_packed_kernel<4, false, Hooks, W>)
                              : (gate ? q8_gemv_packed_kernel<2, true, Hooks, W> : q8_gemv_packed_kernel<2, false, Hooks, W>);
    const int rows_per_cta = kWarpsPerCta * pack;
    l.grid  = dim3((p.nrows + rows_per_cta - 1) / rows_per_cta, nchannels_dst, nsamples_dst);
    l.block = dim3(kWarp, kWarpsPerCta);
    return l;
}

// W must be p.weights (plan for one format instantiates only that format's kernels). MIN_CTAS_GATE is the
// register request of the gate/up kernel, which holds twice the weights in flight (default: MIN_CTAS).
// PACKED: short rows stored back to back take the short-row kernel (an experiment; ggml does not ask yet).
template <class Hooks = PlainHooks, int UNROLL = 4, bool Y_LATE = false, int MIN_CTAS = 0, Weights W = Weights::q8_0,
          int MIN_CTAS_GATE = MIN_CTAS, bool PACKED = false>
inline Launch plan(const Problem & p, int nchannels_dst, int nsamples_dst, int sm_count, int split = 0) {
    if constexpr (PACKED) {
        const int pack = rows_per_tile(p.nblocks, p.row_x);
        if (pack > 1) {
            return plan_packed<Hooks, W>(p, pack, nchannels_dst, nsamples_dst);
        }
    }
    if (split <= 0) {
        split = choose_split(p.nrows, nchannels_dst, nsamples_dst, p.nblocks, sm_count);
    }
    const int rows_per_cta = kWarpsPerCta / split;
    Launch l;
    l.kernel = p.weights != W ? nullptr
             : p.gate         ? kernel_with_split<UNROLL, true, Hooks, Y_LATE, MIN_CTAS_GATE, W>(split)
                              : kernel_with_split<UNROLL, false, Hooks, Y_LATE, MIN_CTAS, W>(split);
    l.grid   = dim3((p.nrows + rows_per_cta - 1) / rows_per_cta, nchannels_dst, nsamples_dst);
    l.block  = dim3(kWarp, kWarpsPerCta);
    return l;
}

// A plain launch (standalone program), for the format p.weights names.
template <class Hooks = PlainHooks, int UNROLL = 4, bool Y_LATE = false, int MIN_CTAS = 0, bool PACKED = false>
inline cudaError_t launch(const Problem & p, int nchannels_dst, int nsamples_dst, int sm_count, cudaStream_t stream,
                          int split = 0) {
    const Launch l = p.weights == Weights::q4_0
        ? plan<Hooks, UNROLL, Y_LATE, MIN_CTAS, Weights::q4_0, MIN_CTAS, PACKED>(p, nchannels_dst, nsamples_dst, sm_count, split)
        : plan<Hooks, UNROLL, Y_LATE, MIN_CTAS, Weights::q8_0, MIN_CTAS, PACKED>(p, nchannels_dst, nsamples_dst, sm_count, split);
    l.kernel<<<l.grid, l.block, 0, stream>>>(p);
    return cudaGetLastError();
}

// The layout conditions the kernel needs; anything else stays on ggml's MMVQ. Strides in weight blocks.
inline bool layout_fits(const void * x, const void * gate, int64_t ncols, int64_t row_x, int64_t channel_x,
                        int64_t sample_x, Weights weights = Weights::q8_0) {
    const int  block_bytes = block_bytes_of(weights);
    const auto aligned = [](const void * ptr) { return ptr == nullptr || (reinterpret_cast<uintptr_t>(ptr) % 16) == 0; };
    const auto stride_ok = [block_bytes](int64_t blocks) { return (blocks * block_bytes) % 16 == 0; };
    return ncols % (kRowAlignBlocks * kBlockValues) == 0 && aligned(x) && aligned(gate) && stride_ok(row_x) &&
           stride_ok(channel_x) && stride_ok(sample_x);
}

}  // namespace fusekit_q8
