// fusekit fusion-2 (gdn-chains): what ggml-cuda.cu calls (see fusekit-gdn-chains.cu).
#pragma once

#include "common.cuh"

// What a node is in this evaluation's plan.
enum class fusekit_gdn_role : uint8_t {
    none,   // stock path
    skip,   // computed by a fused kernel launched at another node: do nothing here
    fused,  // launch the fused kernel planned here: it computes this node and the nodes it covers after it
};

// Matches the chains once per evaluation, before the node loop. enabled = false (a CUDA-graph replay,
// nodes spread over several streams) clears the plan, as does GGML_CUDA_DISABLE_FUSION; every node then
// takes the stock path.
void fusekit_gdn_chains_plan(const ggml_cgraph * cgraph, bool enabled);

fusekit_gdn_role fusekit_gdn_chains_role(const ggml_cgraph * cgraph, int node_idx);

// Launches the kernel planned at node_idx (role fused) and returns how many nodes after node_idx it also
// computed (0: only node_idx itself).
int fusekit_gdn_chains_launch(const ggml_cgraph * cgraph, int node_idx, cudaStream_t stream);
