"""Values copied from the pinned ggml headers (llama.cpp 0c1e57098b); tests check them against the built library.

Every number here names where it came from, so a pin bump that moves one is caught by
``tests/test_bridge_constants.py`` instead of silently mis-declaring a tensor.
"""

from __future__ import annotations

# ggml/include/ggml.h: "#define GGML_MAX_DIMS 4"
GGML_MAX_DIMS = 4
# ggml/include/ggml.h: "#define GGML_DEFAULT_GRAPH_SIZE 2048" (we size graphs ourselves with ggml_new_graph_custom)
GGML_DEFAULT_GRAPH_SIZE = 2048

# ggml/include/ggml.h: enum ggml_type (values that are still supported; gaps are removed types)
GGML_TYPES: dict[str, int] = {
    "f32": 0,
    "f16": 1,
    "q4_0": 2,
    "q4_1": 3,
    "q5_0": 6,
    "q5_1": 7,
    "q8_0": 8,
    "q8_1": 9,
    "q2_K": 10,
    "q3_K": 11,
    "q4_K": 12,
    "q5_K": 13,
    "q6_K": 14,
    "q8_K": 15,
    "iq2_xxs": 16,
    "iq2_xs": 17,
    "iq3_xxs": 18,
    "iq1_s": 19,
    "iq4_nl": 20,
    "iq3_s": 21,
    "iq2_s": 22,
    "iq4_xs": 23,
    "i8": 24,
    "i16": 25,
    "i32": 26,
    "i64": 27,
    "f64": 28,
    "iq1_m": 29,
    "bf16": 30,
    "tq1_0": 34,
    "tq2_0": 35,
    "mxfp4": 39,
    "nvfp4": 40,
    "q1_0": 41,
    "q2_0": 42,
}
GGML_TYPE_COUNT = 43  # ggml.h: GGML_TYPE_COUNT = 43
GGML_TYPE_F32 = GGML_TYPES["f32"]
GGML_TYPE_F16 = GGML_TYPES["f16"]
GGML_TYPE_I32 = GGML_TYPES["i32"]

# Weight types the bench accepts: usable as the weight of ggml_mul_mat with f32 activations, and
# quantizable by ggml_quantize_chunk. Block size (elements) from ggml/src/ggml-common.h (QK8_0 = 32, QK_K = 256).
BENCH_TYPES: dict[str, int] = {
    "f32": 1,
    "f16": 1,
    "bf16": 1,
    "q4_0": 32,
    "q4_1": 32,
    "q5_0": 32,
    "q5_1": 32,
    "q8_0": 32,
    "q2_K": 256,
    "q3_K": 256,
    "q4_K": 256,
    "q5_K": 256,
    "q6_K": 256,
    "iq2_xxs": 256,
    "iq2_xs": 256,
    "iq2_s": 256,
    "iq3_xxs": 256,
    "iq3_s": 256,
    "iq4_nl": 32,
    "iq4_xs": 256,
}

# Types whose ggml_quantize_chunk asserts without an importance matrix (ggml.c ggml_quantize_requires_imatrix).
NEEDS_IMATRIX = frozenset({"iq2_xxs", "iq2_xs", "iq1_s"})

# Unquantized controls: sabotage has no packed blocks to corrupt in them.
CONTROL_TYPES = frozenset({"f32", "f16", "bf16"})

# ggml/include/ggml.h: enum ggml_status
GGML_STATUS_SUCCESS = 0
# ggml/include/ggml-backend.h: enum ggml_backend_dev_type
GGML_BACKEND_DEVICE_TYPE_CPU = 0
GGML_BACKEND_DEVICE_TYPE_GPU = 1


def type_id(name: str) -> int:
    return GGML_TYPES[name]
