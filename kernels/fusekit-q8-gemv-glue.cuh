// fusekit fusion-5 (q8-gemv): the one entry point ggml's MMVQ dispatch calls (see fusekit-q8-gemv.cu).
#pragma once

#include "common.cuh"

// Runs the one-token Q8_0 product when the case is ours and returns true; returns false (nothing
// launched) otherwise, and the caller goes on with MMVQ. Arguments are MMVQ's, strides in blocks/floats.
// x_is_weight: vx lies in a weight buffer (no earlier kernel writes it), so its loads may start before
// the programmatic-dependent-launch wait.
bool fusekit_q8_gemv_try(
        ggml_type type, const void * vx, const void * vy, const int32_t * ids, const ggml_cuda_mm_fusion_args_device & fusion,
        bool x_is_weight, float * dst, int64_t ncols_x, int64_t nrows_x, int64_t ncols_dst,
        int64_t stride_row_x, int64_t stride_col_y, int64_t stride_col_dst,
        int64_t nchannels_x, int64_t nchannels_y, int64_t nchannels_dst,
        int64_t stride_channel_x, int64_t stride_channel_y, int64_t stride_channel_dst,
        int64_t nsamples_x, int64_t nsamples_dst, int64_t stride_sample_x, int64_t stride_sample_y, int64_t stride_sample_dst,
        cudaStream_t stream);
