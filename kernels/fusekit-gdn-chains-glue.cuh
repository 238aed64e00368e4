// fusekit fusion-2 (gdn-chains): what ggml-cuda.cu calls (see fusekit-gdn-chains.cu).
#pragma once

#include "common.cuh"

// What a node is in this evaluation's plan.
enum class fusekit_gdn_role : uint8_t {
    none,        // stock path
    skip,        // computed by a fused kernel launched at another node: do nothing here
    prologue,    // GATED_DELTA_NET: launch the prologue kernel first, then the stock node (and its fusions)
    gated_norm,  // SILU of the gated output norm: launch the gated-norm kernel, which also covers the MUL after it
};

// Matches the chains once per evaluation, before the node loop. enabled = false (fusion disabled,
// nodes spread over several streams) clears the plan, and every node takes the stock path.
void fusekit_gdn_chains_plan(const ggml_cgraph * cgraph, bool enabled);

fusekit_gdn_role fusekit_gdn_chains_role(const ggml_cgraph * cgraph, int node_idx);

// Launches the kernel planned at node_idx (role prologue or gated_norm) and returns how many nodes after
// node_idx it covered: 0 for the prologue (the GATED_DELTA_NET node itself still runs), the distance to
// the final MUL for the gated norm.
int fusekit_gdn_chains_launch(const ggml_cgraph * cgraph, int node_idx, cudaStream_t stream);
