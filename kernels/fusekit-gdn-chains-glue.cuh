// fusekit fusion-2 (gdn-chains): what ggml-cuda.cu calls (see fusekit-gdn-chains.cu).
#pragma once

#include "common.cuh"

// What a node is in this evaluation's plan.
enum class fusekit_gdn_role : uint8_t {
    none,   // stock path
    skip,   // computed by a fused kernel launched at another node: do nothing here
    fused,  // launch the fused kernel planned here: it computes this node and the nodes it covers after it
};

// Where a GATED_DELTA_NET reads its recurrent state when the plan skipped build_rs's GET_ROWS copy (experiment
// fusion-2-state-rows): sequence s's state starts at base + row[s] * row_stride floats.
struct fusekit_gdn_state_rows {
    const float *   base;
    const int32_t * row;
    int64_t         row_stride;
};

// Whether the plan has the GATED_DELTA_NET at node_idx read its state in place (and skipped the GET_ROWS before it).
bool fusekit_gdn_chains_state_rows(const ggml_cgraph * cgraph, int node_idx, fusekit_gdn_state_rows & rows);

// Matches the chains once per evaluation, before the node loop. enabled = false (a CUDA-graph replay,
// nodes spread over several streams) clears the plan, as does GGML_CUDA_DISABLE_FUSION; every node then
// takes the stock path.
void fusekit_gdn_chains_plan(const ggml_cgraph * cgraph, bool enabled);

fusekit_gdn_role fusekit_gdn_chains_role(const ggml_cgraph * cgraph, int node_idx);

// Launches the kernel planned at node_idx (role fused) and returns how many nodes after node_idx it also
// computed (0: only node_idx itself).
int fusekit_gdn_chains_launch(const ggml_cgraph * cgraph, int node_idx, cudaStream_t stream);
