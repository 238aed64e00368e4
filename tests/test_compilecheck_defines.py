"""compile-check passes each CUDA unit the FlashAttention definitions a default CMake configuration would, so that a
change to a header every unit includes (common.cuh) compiles fattn.cu too instead of failing on undefined names."""

from pathlib import Path

from fusekit.compilecheck import fattn_defines


def _tree(root: Path, types: str, default: str) -> Path:
    (root / "ggml/cmake").mkdir(parents=True)
    (root / "ggml/cmake/common.cmake").write_text(f"function(x)\n    set(FA_TYPES {types})\nendfunction()\n")
    (root / "ggml/CMakeLists.txt").write_text(f'set   (GGML_CUDA_FA_QUANTS "{default}" CACHE STRING\n    "doc")\n')
    return root


def test_the_default_pairs_and_f16_are_built_and_the_rest_not(tmp_path: Path) -> None:
    defines = fattn_defines(_tree(tmp_path, "q4_0 q8_0 f16", "q4_0-q4_0;q8_0-q8_0"))
    assert '-DGGML_CUDA_FA_QUANTS="q4_0-q4_0,q8_0-q8_0"' in defines
    built = {d for d in defines if d.endswith("=1")}
    assert built == {"-DGGML_CUDA_FA_Q4_0_Q4_0=1", "-DGGML_CUDA_FA_Q8_0_Q8_0=1", "-DGGML_CUDA_FA_F16_F16=1"}
    assert "-DGGML_CUDA_FA_Q4_0_F16=0" in defines and len(defines) == 1 + 9


def test_all_builds_every_pair(tmp_path: Path) -> None:
    defines = fattn_defines(_tree(tmp_path, "q4_0 f16", "all"))
    assert all(d.endswith("=1") for d in defines[1:]) and len(defines) == 1 + 4


def test_a_tree_without_the_cmake_files_gets_no_definitions(tmp_path: Path) -> None:
    assert fattn_defines(tmp_path) == []
