// fusekit fusion-2 (gdn-chains): the element-wise chains around GATED_DELTA_NET at one token.
// ggml-free: plain pointers, strides in floats; the glue (fusekit-gdn-chains.cu) matches the graph.
//
//   prologue_kernel, launched twice per layer (the alpha chain cannot wait: its source buffer is
//   handed on by the allocator once stock's ADD has run, see fusekit-gdn-chains.cu):
//     at ADD:      g    = softplus(alpha + ssm_dt) * ssm_a   stock: ADD, SOFTPLUS+MUL      2 launches -> 1
//     at SIGMOID:  q    = rms_norm(q_conv, eps_q) * scale_q  stock: RMS_NORM+SCALE (fused) 1 launch
//                  k    = rms_norm(k_conv, eps_k) * scale_k  stock: RMS_NORM+SCALE (fused) 1 launch
//                  beta = sigmoid(beta_raw)                  stock: SIGMOID                1 launch  -> 1
//   gated norm (one launch, in place of the stock pair):
//     out  = silu(z) * (rms_norm(o, eps) * ssm_norm)      stock: RMS_NORM+MUL, SILU+MUL    2 launches
//   conv window (the experiment fusion-2-conv-window; FUSEKIT_GDN_CONV_WINDOW in fusekit-gdn-chains.cu), at SSM_CONV:
//     y    = silu(conv(cache[s_copy] | x, w))         stock: GET_ROWS, CONCAT, CPY, SSM_CONV+SILU  4 launches -> 1
//     cache[kv_head] = the window shifted by x
//
// Bit-identical to stock by construction: every expression below is written in stock's order
// (norm.cu rms_norm_f32, unary.cu op_softplus/op_sigmoid/silu, binbcast op_add), and the sum of
// squares is reduced in the exact tree that rms_norm_f32<256> uses for ncols = 32*m <= 256:
// element 32*w + l sits in warp w lane l, each warp reduces with the xor butterfly, and the second
// stage butterflies the 8 warp sums (zeros past m) over 32 lanes. One warp here holds the m chunks
// in registers, butterflies each, and adds the 8 partial sums in that second-stage order.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define FUSEKIT_GDN_HD __host__ __device__ __forceinline__
#else
#define FUSEKIT_GDN_HD inline
#endif

namespace fusekit_gdn {

constexpr int kWarp      = 32;
constexpr int kMaxChunks = 8;  // rows of up to 256 floats: stock's block of 256 holds one element per thread

// ---- host-callable arithmetic (the host check runs exactly these) ----

// Stock's second stage: lanes 0..7 hold the warp sums, the rest 0; xor butterfly 16, 8, 4, 2, 1.
// Offsets 16 and 8 only add exact zeros, so lane 0 ends with this expression.
FUSEKIT_GDN_HD float combine_warp_sums(const float s[kMaxChunks]) {
    return ((s[0] + s[4]) + (s[2] + s[6])) + ((s[1] + s[5]) + (s[3] + s[7]));
}

// The first stage on the host: the xor butterfly over one warp's 32 values, as lane 0 sees it.
// (Every lane ends with the same bits: each step adds the same two operands, only swapped.)
FUSEKIT_GDN_HD float butterfly32(const float v_in[kWarp]) {
    float v[kWarp];
    for (int l = 0; l < kWarp; ++l) {
        v[l] = v_in[l];
    }
    for (int offset = kWarp / 2; offset > 0; offset >>= 1) {
        float next[kWarp];
        for (int l = 0; l < kWarp; ++l) {
            next[l] = v[l] + v[l ^ offset];
        }
        for (int l = 0; l < kWarp; ++l) {
            v[l] = next[l];
        }
    }
    return v[0];
}

// Chunks that enter the sum of squares: all m, or one fewer in a sabotage build (norms go wrong).
FUSEKIT_GDN_HD int chunks_used(int nchunks, int sabotage) {
    return sabotage ? nchunks - 1 : nchunks;
}

// rms_norm_f32: mean = sum / ncols (int ncols, as stock), scale = rsqrtf(mean + eps).
FUSEKIT_GDN_HD float rms_scale(float sumsq, int ncols, float eps) {
#if defined(__CUDA_ARCH__)
    const float mean = sumsq / ncols;  // the same two statements as rms_norm_f32
    return rsqrtf(mean + eps);
#else
    const float mean = sumsq / ncols;
    return 1.0f / sqrtf(mean + eps);
#endif
}

// binbcast op_add then unary.cu op_softplus then the gated multiply (softplus(x) * a).
FUSEKIT_GDN_HD float gate_value(float alpha, float dt_bias, float a, int sabotage) {
    const float x  = sabotage ? alpha : alpha + dt_bias;  // sabotage: the ssm_dt bias is dropped
    const float sp = (x > 20.0f) ? x : logf(1.0f + expf(x));
    return sp * a;
}

// unary.cu op_sigmoid.
FUSEKIT_GDN_HD float sigmoid_value(float x, int sabotage) {
    return 1.0f / (1.0f + expf(sabotage ? x : -x));  // sabotage: sigmoid(-x)
}

// unary.cuh ggml_cuda_op_silu_single, then unary_gated: silu(z) * ((scale * x) * w).
FUSEKIT_GDN_HD float gated_norm_value(float x, float scale, float w, float z, int sabotage) {
    const float normed = scale * x * w;
    const float gate   = sabotage ? z : z / (1.0f + expf(-z));  // sabotage: no silu
    return gate * normed;
}

// The conv window of one channel at one token (d_conv = kConvWidth taps): stock's ssm_conv_f32 with n_t = 1 sums
// window[j] * w[j] for j = 0, 1, ... in order from 0.0f, then adds the bias (0.0f without one: it turns -0.0 into
// +0.0, so it is added here too), then ggml_cuda_op_silu_single. The window is the kConvWidth - 1 cached values
// followed by the token's x.
constexpr int kConvWidth = 4;

FUSEKIT_GDN_HD float conv_window_value(const float window[kConvWidth], const float w[kConvWidth], float bias) {
    float sumf = 0.0f;
    for (int j = 0; j < kConvWidth; ++j) {
        sumf += window[j] * w[j];
    }
    sumf += bias;
    return sumf / (1.0f + expf(-sumf));
}

// The window of one channel: its cached values, then x (0 in a sabotage build: the token is dropped).
FUSEKIT_GDN_HD void conv_window_load(const float * cached, float x, int sabotage, float window[kConvWidth]) {
    for (int j = 0; j < kConvWidth - 1; ++j) {
        window[j] = cached[j];
    }
    window[kConvWidth - 1] = sabotage ? 0.0f : x;
}

// Offset in floats of row r of a [ncols, n1, n2, n3] tensor with strides s1, s2, s3 (floats):
// rows run over dims 1, 2, 3 in that order, as stock's (row, channel, sample) grid does.
FUSEKIT_GDN_HD int64_t row_offset(int64_t r, int64_t n1, int64_t n2, int64_t s1, int64_t s2, int64_t s3) {
    const int64_t i1 = r % n1;
    const int64_t i2 = (r / n1) % n2;
    const int64_t i3 = r / (n1 * n2);
    return i1 * s1 + i2 * s2 + i3 * s3;
}

// ---- launch arguments ----

// A strided source of rows (dims 1..3 flattened into rows; elements contiguous).
struct Rows {
    const float * data;
    int64_t       n1, n2;      // sizes of dims 1 and 2 (dim 3 follows from the row count)
    int64_t       s1, s2, s3;  // strides of dims 1, 2, 3 in floats
};

// The conv-state path of build_conv_state at one token and one sequence (fusekit-gdn-chains.cu matches it).
struct ConvWindowArgs {
    const float *   cache;         // the conv-state cache, [(kConvWidth - 1) * channels] per row
    const int32_t * src_row;       // GET_ROWS's index (device memory): the row the window is read from
    int64_t         cache_row;     // floats from one cache row to the next
    const float *   x;             // the token's qkv_mixed, [channels] contiguous
    const float *   weight;        // ssm_conv1d, [kConvWidth] per channel
    int64_t         weight_row;    // floats from one channel's taps to the next
    const float *   bias;          // per channel, or nullptr (0.0f, as stock without a bias node)
    float *         window_dst;    // the CPY's destination: the shifted window, [(kConvWidth - 1) * channels]
    float *         dst;           // the SILU's output, [channels] contiguous
    int64_t         channels;
    int             sabotage;
};

struct PrologueArgs {
    Rows          q_src, k_src;    // the q and k views of the conv output
    float *       q_dst;           // contiguous [ncols, rows_q]
    float *       k_dst;           // contiguous [ncols, rows_k]
    int64_t       rows_q, rows_k;
    int           ncols;           // head dim, 32 * nchunks
    float         eps_q, eps_k;    // RMS_NORM eps of each chain
    float         scale_q, scale_k;
    const float * alpha;           // contiguous [n_heads * n_seqs]
    const float * dt_bias;         // [n_heads], broadcast over sequences
    const float * ssm_a;           // [n_heads]
    float *       gate_dst;        // contiguous, may be alpha itself (stock runs that chain in place)
    const float * beta_raw;        // contiguous [n_heads * n_seqs]
    float *       beta_dst;        // may be beta_raw itself
    int64_t       n_heads, n_gate; // n_gate = n_heads * n_seqs
    int           with_gate;       // compute gate_dst (the alpha chain)
    int           with_beta;       // compute beta_dst
    int           with_conv;       // only the conv window (conv below), nothing else
    ConvWindowArgs conv;
    int           sabotage;
};

struct GatedNormArgs {
    Rows          x;        // the GATED_DELTA_NET output view
    Rows          z;        // the z gate, same shape
    const float * weight;   // ssm_norm, [ncols]
    float *       dst;      // contiguous [ncols, rows]; may be z itself (element for element)
    int64_t       rows;
    int           ncols;
    float         eps;
    int           sabotage;
};

// Blocks of one warp each: rows_q for q, rows_k for k, then the gate/beta blocks (if either is asked for).
FUSEKIT_GDN_HD int64_t prologue_blocks(const PrologueArgs & a) {
    const bool tail = a.with_gate || a.with_beta;
    return a.rows_q + a.rows_k + (tail ? (a.n_gate + kWarp - 1) / kWarp : 0);
}

#if defined(__CUDACC__)

// Sum of squares of one row held as NCHUNKS registers per lane, in rms_norm_f32<256>'s tree.
template <int NCHUNKS>
__device__ __forceinline__ float row_sumsq(const float (&v)[NCHUNKS], int sabotage) {
    float s[kMaxChunks];
#pragma unroll
    for (int c = 0; c < kMaxChunks; ++c) {
        s[c] = 0.0f;
    }
    const int used = chunks_used(NCHUNKS, sabotage);
#pragma unroll
    for (int c = 0; c < NCHUNKS; ++c) {
        float t = c < used ? v[c] * v[c] : 0.0f;
#pragma unroll
        for (int offset = kWarp / 2; offset > 0; offset >>= 1) {
            t += __shfl_xor_sync(0xffffffffu, t, offset, kWarp);
        }
        s[c] = t;
    }
    return combine_warp_sums(s);
}

template <int NCHUNKS>
__device__ __forceinline__ void l2_norm_row(const Rows & src, float * dst, int64_t row, float eps, float scale_out,
                                            int sabotage) {
    const int     lane = threadIdx.x;
    const float * x    = src.data + row_offset(row, src.n1, src.n2, src.s1, src.s2, src.s3);
    float         v[NCHUNKS];
#pragma unroll
    for (int c = 0; c < NCHUNKS; ++c) {
        v[c] = x[c * kWarp + lane];
    }
    const float scale = rms_scale(row_sumsq<NCHUNKS>(v, sabotage), NCHUNKS * kWarp, eps);
    float *     out   = dst + row * (NCHUNKS * kWarp);
#pragma unroll
    for (int c = 0; c < NCHUNKS; ++c) {
        out[c * kWarp + lane] = scale_out * (scale * v[c]);  // stock: scale_out * (scale * x[col])
    }
}

template <int NCHUNKS>
__global__ void __launch_bounds__(kWarp) prologue_kernel(const PrologueArgs a) {
    const int64_t b = blockIdx.x;
    if (b < a.rows_q) {
        l2_norm_row<NCHUNKS>(a.q_src, a.q_dst, b, a.eps_q, a.scale_q, a.sabotage);
        return;
    }
    if (b < a.rows_q + a.rows_k) {
        l2_norm_row<NCHUNKS>(a.k_src, a.k_dst, b - a.rows_q, a.eps_k, a.scale_k, a.sabotage);
        return;
    }
    // gate and beta: one element per thread; each reads its own element before writing it, so
    // gate_dst == alpha and beta_dst == beta_raw (stock's in-place buffers) are fine.
    const int64_t i = (b - a.rows_q - a.rows_k) * kWarp + threadIdx.x;
    if (i < a.n_gate) {
        if (a.with_gate) {
            const int64_t h = i % a.n_heads;
            a.gate_dst[i]   = gate_value(a.alpha[i], a.dt_bias[h], a.ssm_a[h], a.sabotage);
        }
        if (a.with_beta) {
            a.beta_dst[i] = sigmoid_value(a.beta_raw[i], a.sabotage);
        }
    }
}

template <int NCHUNKS>
__global__ void __launch_bounds__(kWarp) gated_norm_kernel(const GatedNormArgs a) {
    const int64_t row  = blockIdx.x;
    const int     lane = threadIdx.x;
    const float * x    = a.x.data + row_offset(row, a.x.n1, a.x.n2, a.x.s1, a.x.s2, a.x.s3);
    const float * z    = a.z.data + row_offset(row, a.z.n1, a.z.n2, a.z.s1, a.z.s2, a.z.s3);
    float         v[NCHUNKS];
#pragma unroll
    for (int c = 0; c < NCHUNKS; ++c) {
        v[c] = x[c * kWarp + lane];
    }
    const float scale = rms_scale(row_sumsq<NCHUNKS>(v, a.sabotage), NCHUNKS * kWarp, a.eps);
    float *     out   = a.dst + row * (NCHUNKS * kWarp);
#pragma unroll
    for (int c = 0; c < NCHUNKS; ++c) {
        const int col = c * kWarp + lane;
        out[col]      = gated_norm_value(v[c], scale, a.weight[col], z[col], a.sabotage);
    }
}

// One thread per channel. It reads its window (the cached values of GET_ROWS's row, then x) before it writes the
// shifted window, so the CPY's row may be the row read (it is, at one sequence); no other thread touches the channel.
__global__ void __launch_bounds__(128) conv_window_kernel(const ConvWindowArgs a) {
    const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (c >= a.channels) {
        return;
    }
    constexpr int kCached = kConvWidth - 1;
    const float * cached  = a.cache + int64_t(*a.src_row) * a.cache_row + c * kCached;
    float         window[kConvWidth];
    conv_window_load(cached, a.x[c], a.sabotage, window);
    float w[kConvWidth];
#pragma unroll
    for (int j = 0; j < kConvWidth; ++j) {
        w[j] = a.weight[c * a.weight_row + j];
    }
    const float bias = a.bias != nullptr ? a.bias[c] : 0.0f;  // as stock's ssm_conv_f32 (the glue passes none)
    a.dst[c]         = conv_window_value(window, w, bias);
#pragma unroll
    for (int j = 0; j < kCached; ++j) {
        a.window_dst[c * kCached + j] = window[j + 1];
    }
}

inline bool launch_conv_window(const ConvWindowArgs & a, cudaStream_t stream) {
    const dim3 grid((unsigned) ((a.channels + 127) / 128)), block(128);
    conv_window_kernel<<<grid, block, 0, stream>>>(a);
    return true;
}

// Launchers: false (nothing launched) when ncols is not 32, 64, 128 or 256.
inline bool launch_prologue(const PrologueArgs & a, cudaStream_t stream) {
    if (a.with_conv) {
        return launch_conv_window(a.conv, stream);
    }
    const dim3 grid((unsigned) prologue_blocks(a)), block(kWarp);
    switch (a.ncols) {
        case 32:  prologue_kernel<1><<<grid, block, 0, stream>>>(a); return true;
        case 64:  prologue_kernel<2><<<grid, block, 0, stream>>>(a); return true;
        case 128: prologue_kernel<4><<<grid, block, 0, stream>>>(a); return true;
        case 256: prologue_kernel<8><<<grid, block, 0, stream>>>(a); return true;
        default:  return false;
    }
}

inline bool launch_gated_norm(const GatedNormArgs & a, cudaStream_t stream) {
    const dim3 grid((unsigned) a.rows), block(kWarp);
    switch (a.ncols) {
        case 32:  gated_norm_kernel<1><<<grid, block, 0, stream>>>(a); return true;
        case 64:  gated_norm_kernel<2><<<grid, block, 0, stream>>>(a); return true;
        case 128: gated_norm_kernel<4><<<grid, block, 0, stream>>>(a); return true;
        case 256: gated_norm_kernel<8><<<grid, block, 0, stream>>>(a); return true;
        default:  return false;
    }
}

#endif  // __CUDACC__

}  // namespace fusekit_gdn
