"""The category rule table on real ggml-cuda kernel names (as nsys demangles them)."""

from __future__ import annotations

import pytest

from evals.profile.categories import (
    ATTENTION,
    CATEGORIES,
    COPY,
    ELEMENTWISE,
    MATMUL,
    MOE,
    NORM,
    OTHER,
    QUANTIZE,
    RULES,
    SSM,
    categorize,
)

CASES = [
    ("void mul_mat_q<(ggml_type)12, 64, false>(const char *, const int *, float *, int, int)", MATMUL),
    ("void mul_mat_q_stream_k_fixup<(ggml_type)12, 64, false>(const int *, float *, int)", MATMUL),
    ("void mul_mat_vec_q<(ggml_type)8, 1, false>(const void *, const void *, float *)", MATMUL),
    ("void mul_mat_vec_q_moe<(ggml_type)39, 4>(const void *, const void *, const int *, float *)", MATMUL),
    ("void mul_mat_vec_f<__half, float, 1, 128, false>(const __half *, const float *, float *)", MATMUL),
    ("void mul_mat_f<__nv_bfloat16, 32, 16, false>(const __nv_bfloat16 *, const float *)", MATMUL),
    ("void cutlass::Kernel2<cutlass_80_wmma_tensorop_h161616gemm_32x32_128x2_tn_align8>(Params)", MATMUL),
    ("sm90_xmma_gemm_f16f16_f16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_kernel", MATMUL),
    ("nvjet_tst_128x64_64x8_2x1_v_bz_TNT", MATMUL),
    ("void quantize_q8_1(const float *, void *, long, long, long, long, long, long)", QUANTIZE),
    ("void quantize_mmq_q8_1<(mmq_q8_1_ds_layout)1>(const float *, const int *, void *, long)", QUANTIZE),
    ("void rms_norm_f32<256, true, false>(const float *, float *, int, long, long, long, float)", NORM),
    ("void norm_f32<1024>(const float *, float *, int, long, long, long, float)", NORM),
    ("void rms_norm_mul_rope_f32<true>(const float *, float *, int)", NORM),
    ("void k_bin_bcast<&op_mul, float, float, float>(const float *, const float *, float *)", ELEMENTWISE),
    ("void unary_op_kernel<&op_silu, float>(const float *, float *, int)", ELEMENTWISE),
    ("void unary_op_kernel<&op_softplus, float>(const float *, float *, int)", ELEMENTWISE),
    ("void unary_gated_op_kernel<&op_gelu, float>(const float *, const float *, float *, long)", ELEMENTWISE),
    ("void scale_f32<float>(const float *, float *, float, float, long)", ELEMENTWISE),
    (
        "void fusekit_unary_gated_q8_kernel<&op_sigmoid>(const float *, const float *, float *, long, long, long, "
        "long, "
        "void *, bool)",
        ELEMENTWISE,
    ),
    ("void swiglu_oai_kernel<float>(const float *, const float *, float *, long)", ELEMENTWISE),
    ("void flash_attn_ext_vec<128, 1, (ggml_type)1, (ggml_type)1, false>(const char *, float *)", ATTENTION),
    ("void flash_attn_combine_results<128>(const float *, const float2 *, float *, int)", ATTENTION),
    ("void soft_max_f32<true, 0, 0, float>(const float *, const float *, float *)", ATTENTION),
    ("void rope_multi<true, true, float>(const float *, float *, int, int)", ATTENTION),
    ("void gated_delta_net_cuda<128, false>(const float *, const float *, const float *, float *)", SSM),
    ("void ssm_conv_f32<128, 4>(const float *, const float *, int, int, float *)", SSM),
    ("void ssm_scan_f32<128, 16>(const float *, const float *, const float *, float *)", SSM),
    ("void topk_moe_cuda<128, true>(const float *, float *, int *, int)", MOE),
    ("void k_argsort_f32_i32<(ggml_sort_order)1>(const float *, int *, int, int)", MOE),
    ("void mm_ids_helper<8>(const int *, int *, int *, int)", MOE),
    ("void moe_weighted_reduction_f32(const float *, const float *, float *, int)", MOE),
    ("void cpy_scalar<&cpy_1_scalar<float, __half>>(const char *, char *, int)", COPY),
    ("void k_get_rows_float<float, float>(const float *, const int *, float *, long)", COPY),
    ("void k_set_rows<float, __half, long>(const float *, const long *, __half *, long)", COPY),
    ("void concat_cont<float>(const float *, const float *, float *, long)", COPY),
    ("void convert_unary<__half, float>(const void *, float *, long)", COPY),
    # fusekit's own kernels, as the H200 traces name them (results/h200-2026-11-30-fusions/logs/profile-*.log)
    ("void fusekit_moe::router_kernel<<unnamed>::GgmlHooks, (int)8>(fusekit_moe::RouterParams)", MOE),
    ("void fusekit_moe::tail_kernel<<unnamed>::GgmlHooks>(fusekit_moe::TailParams)", MOE),
    ("void fusekit_gdn::prologue_kernel<(int)4>(fusekit_gdn::PrologueArgs)", SSM),
    ("void fusekit_gdn::gated_norm_kernel<(int)4>(fusekit_gdn::GatedNormArgs)", SSM),
    ("void fusekit_q8::q8_gemv_kernel<(int)1, (int)4, (bool)0, <unnamed>::Hooks>(fusekit_q8::Problem)", MATMUL),
    # a namespace in an argument type does not make a kernel fusekit's (session 15 counted these MMVQs as norms)
    (
        "void mul_mat_vec_q<(ggml_type)8, (int)1, (bool)0, (bool)0, (bool)0>(const void *, const void *, const int *, "
        "ggml_cuda_mm_fusion_args_device, float *, unsigned int, uint3, unsigned int, fusekit_nq::GroupQ8)",
        MATMUL,
    ),
    ("void fusekit_nq::norm_quantize_kernel<(int)256>(fusekit_nq::Args)", NORM),
    ("void argmax_f32(const float *, int *, long)", OTHER),
    ("", OTHER),
]


@pytest.mark.parametrize(("name", "category"), CASES)
def test_categorize(name: str, category: str) -> None:
    assert categorize(name) == category


def test_rules_name_known_categories_and_every_category_is_reachable() -> None:
    assert {c for c, _ in RULES} <= set(CATEGORIES)
    assert {c for _, c in CASES} == set(CATEGORIES)
