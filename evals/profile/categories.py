"""The one rule table that sorts ggml-cuda kernels into categories ("what a token spends its time on").

Rules are ordered regular expressions searched in the demangled kernel name; the first match wins.
Kernel names come from the pinned tree's ``ggml/src/ggml-cuda/*.cu`` (``__global__`` functions), plus
the cuBLAS/CUTLASS GEMM kernels llama.cpp reaches through ``ggml_cuda_mul_mat_*``. Template arguments
are part of the demangled name (``unary_op_kernel<&op_silu, float>``), so unary ops are matched too.
"""

from __future__ import annotations

import re
from functools import lru_cache

MATMUL = "matrix products"
QUANTIZE = "activation quantize"
NORM = "norms"
ELEMENTWISE = "element-wise"
ATTENTION = "attention"
SSM = "gated-delta-net and SSM"
MOE = "MoE routing and reduction"
COPY = "copies and gathers"
OTHER = "other"

CATEGORIES = (MATMUL, QUANTIZE, NORM, ELEMENTWISE, ATTENTION, SSM, MOE, COPY, OTHER)

# (category, pattern): order matters. Patterns match the kernel's own name (a word boundary before it),
# not a substring of an argument type, except where template arguments are the point (unary ops).
RULES: tuple[tuple[str, str], ...] = (
    # activation quantize first: quantize_mmq_q8_1 would otherwise look like an mmq kernel
    (QUANTIZE, r"\bquantize_(q8_1|mmq_\w+)\b"),
    # fusekit's own kernels (kernels/fusekit-*.cuh) by namespace, where the kernel itself is in it (anchored at the
    # start: fusion-1-glu-q8's MMVQ takes a fusekit_nq::GroupQ8 argument and is still a matrix product);
    # fusekit_q8::q8_gemv_kernel is a GEMV below
    (MOE, r"^(void\s+)?fusekit_moe::"),
    (SSM, r"^(void\s+)?fusekit_gdn::"),
    (NORM, r"^(void\s+)?fusekit_nq::"),
    (ELEMENTWISE, r"\bfusekit_unary_\w+"),  # fusion-1-gated-q8: the unary+MUL kernel that also writes q8_1
    # MoE routing before matrix products: mm_ids_helper / topk_moe are not GEMMs
    (MOE, r"\b(topk_moe\w*|mm_ids_helper|moe_weighted_reduction\w*|k_argsort\w*|argsort\w*|top_k_radix\w*)\b"),
    (MATMUL, r"\bmul_mat_(vec_q|vec_f|q|f)(_\w+)?\b"),  # mmvq (+_moe), mmvf, mmq (+stream_k_fixup), mmf (+_ids)
    (MATMUL, r"(cutlass|cublas|\bgemm|gemv|_gemm_|xmma|nvjet|\bk_compute_batched_ptrs\b|ampere_|sm\d+_)"),
    (NORM, r"\b(rms_norm\w*|norm_f32|group_norm_f32|l2_norm_f32)\b"),
    (
        SSM,
        r"\b(gated_delta_net\w*|ssm_conv\w*|ssm_scan\w*|ssm_ssd_\w+|rwkv_wkv\w*|gated_linear_attn\w*|solve_tri\w*)\b",
    ),
    (ATTENTION, r"\b(flash_attn\w*|soft_max\w*|rope_(norm|neox|multi|vision)\w*|diag_mask_inf\w*)\b"),
    (
        COPY,
        r"\b(cpy_\w+|k_get_rows\w*|get_rows\w*|concat\w*|k_set_rows\w*|set_rows\w*|convert_unary\w*|"
        r"dequantize_block\w*|k_repeat_back\w*)\b",
    ),
    (
        ELEMENTWISE,
        r"\b(k_bin_bcast\w*|unary_\w*op_kernel|swiglu\w*|geglu\w*|silu\w*|sigmoid\w*|softplus\w*|scale_f32|"
        r"softcap_f32|op_clamp_kernel|leaky_relu_kernel|xielu_kernel|snake_kernel|add_id_kernel|fill_kernel|"
        r"pad_f32|acc_f32|arange_f32|gelu\w*|relu\w*|tanh\w*|exp\w*|sqr\w*|sqrt\w*|abs\w*|neg\w*)\b",
    ),
)

_COMPILED = tuple((category, re.compile(pattern)) for category, pattern in RULES)


@lru_cache(maxsize=4096)
def categorize(name: str | None) -> str:
    """The category of a kernel, from its demangled name (``other`` when no rule matches)."""
    if not name:
        return OTHER
    for category, pattern in _COMPILED:
        if pattern.search(name):
            return category
    return OTHER
