// What the stream-grid CPU checks share (q8_residency_cap_test.cu, q8_stream_grid_test.cu): plan_stream's launch for
// a plain one-token Q8_0 table on an H100's or H200's 132 SMs, as ggml's glue would ask for it. Include after
// fusekit-q8-gemv.cuh.
#pragma once

constexpr int kSmCount = 132;  // H100 SXM and H200

inline fusekit_q8::Launch plan_plain_q8(int nrows, int nblocks) {
    fusekit_q8::Problem p{};
    p.weights = fusekit_q8::Weights::q8_0;
    p.nrows   = nrows;
    p.nblocks = nblocks;
    p.row_x   = nblocks;
    return fusekit_q8::plan_stream<fusekit_q8::PlainHooks, fusekit_q8::Weights::q8_0>(p, kSmCount);
}
