"""The values copied from C into ggml_bridge.constants, checked against the built library and the headers."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from fusekit.build import BuildResult
from ggml_bridge import Bridge
from ggml_bridge.constants import (
    BENCH_TYPES,
    GGML_DEFAULT_GRAPH_SIZE,
    GGML_MAX_DIMS,
    GGML_TYPE_COUNT,
    GGML_TYPES,
    NEEDS_IMATRIX,
)

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def bridge(stock_build: BuildResult) -> Bridge:
    with Bridge(stock_build.bin_dir, "CPU", threads=2) as b:
        yield b


def test_type_enum_matches_library(bridge: Bridge) -> None:
    for name, value in GGML_TYPES.items():
        assert bridge.type_name(value) == name


def test_block_sizes_and_traits_layout_match(bridge: Bridge) -> None:
    lib, ffi = bridge.lib, bridge.ffi
    for name, block in BENCH_TYPES.items():
        t = GGML_TYPES[name]
        assert lib.ggml_blck_size(t) == block, name
        traits = lib.ggml_get_type_traits(t)  # reading fields proves the struct declaration's layout
        assert ffi.string(traits.type_name).decode() == name
        assert traits.blck_size == block
        assert traits.type_size == lib.ggml_type_size(t)
        assert bool(traits.is_quantized) == bool(lib.ggml_is_quantized(t))
        assert name == "f32" or traits.to_float != ffi.NULL


def test_imatrix_types_match(bridge: Bridge) -> None:
    for name, value in GGML_TYPES.items():
        assert bool(bridge.lib.ggml_quantize_requires_imatrix(value)) == (name in NEEDS_IMATRIX), name


def test_header_defines_match(stock_build: BuildResult) -> None:
    header = (Path(stock_build.build_dir).parent / "ggml" / "include" / "ggml.h").read_text()
    assert int(re.search(r"#define GGML_MAX_DIMS\s+(\d+)", header).group(1)) == GGML_MAX_DIMS
    assert int(re.search(r"#define GGML_DEFAULT_GRAPH_SIZE\s+(\d+)", header).group(1)) == GGML_DEFAULT_GRAPH_SIZE
    assert int(re.search(r"GGML_TYPE_COUNT\s*=\s*(\d+)", header).group(1)) == GGML_TYPE_COUNT
    enum = dict(re.findall(r"^\s+GGML_TYPE_(\w+)\s*=\s*(\d+),", header, re.M))
    for name, value in GGML_TYPES.items():
        assert int(enum[name.upper()]) == value, name
