"""scripts/graph_aliases_summary.py: where a residual norm's outputs lie against its addends."""

from __future__ import annotations

import importlib.util
import sys

import pytest

from .conftest import REPO

spec = importlib.util.spec_from_file_location("graph_aliases_summary", REPO / "scripts" / "graph_aliases_summary.py")
summary = importlib.util.module_from_spec(spec)
sys.modules["graph_aliases_summary"] = summary
spec.loader.exec_module(summary)

# a gated-delta-net residual as session 37's graph had it: the sum over x, the MUL over the attention output
GDN = """$ graph_aliases q.gguf
ADD      attn_residual-0        0x1000+1024 | RESHAPE attn_out (reshaped) 0x2000 | GET_ROWS x 0x1000
RMS_NORM norm-0                 0x2000+1024 | ADD attn_residual-0 0x1000
MUL      attn_post_norm-0       0x2000+1024 | RMS_NORM norm-0 0x2000 | NONE w 0x9000
"""


def test_exact_placements_are_named() -> None:
    (line,) = summary.residual_norms(summary.parse(GDN))
    assert "sum: exact x" in line and "MUL: exact attn_out (reshaped)" in line and "apart" in line


def test_a_partial_overlap_is_flagged() -> None:
    shifted = GDN.replace("MUL      attn_post_norm-0       0x2000", "MUL      attn_post_norm-0       0x2100")
    (line,) = summary.residual_norms(summary.parse(shifted))
    assert "MUL: PARTLY attn_out (reshaped)" in line


def test_a_chain_of_adds_gives_all_its_addends() -> None:
    chain = """ADD      ffn_out-0              0x1000+1024 | ADD moe_out 0x1000 | MUL shexp 0x3000
ADD      l_out-0                0x1000+1024 | ADD ffn_out-0 0x1000 | ADD attn_residual 0x5000
RMS_NORM norm-1                 0x5000+1024 | ADD l_out-0 0x1000
MUL      attn_norm-1            0x5000+1024 | RMS_NORM norm-1 0x5000 | NONE w 0x9000
"""
    (line,) = summary.residual_norms(summary.parse(chain))
    assert "ADDs 2" in line and "sum: exact moe_out" in line and "MUL: exact attn_residual" in line


def test_a_line_that_is_not_graph_aliases_output_is_refused() -> None:
    with pytest.raises(ValueError, match="not a graph_aliases line"):
        summary.parse("hello world\n")
