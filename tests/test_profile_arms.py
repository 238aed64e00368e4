"""fusekit profile --variant VARIANT@K=V: which sides are traced and under what environment (the pure parts of
evals/profile/record.py; the tracing itself needs a GPU and nsys)."""

from __future__ import annotations

from pathlib import Path

import pytest

from evals.arms import split_arm
from evals.profile import record
from evals.profile.record import decode_argv, sides
from fusekit.errors import FusekitError
from fusekit.variants import Variant

from .test_profile_errors import assert_one_line_error, run_profile


def variant(label: str) -> Variant:
    return Variant(label=label, entries=(), stack_sha256="0" * 64, tree=Path("/nonexistent"), head="0" * 40)


def test_an_arm_traces_its_variant_under_the_environment_and_stock_without() -> None:
    stock, stack = variant("stock"), variant("stack-1-5")
    env = (("GGML_CUDA_PDL", "0"),)
    assert sides(stock, stack, env) == [(stock, ()), (stack, env)]
    assert sides(stock, stock, env) == [(stock, ()), (stock, env)]  # stock@K=V: stock twice, once with K=V
    assert sides(stock, stock, ()) == [(stock, ())]
    assert sides(stock, stack, ()) == [(stock, ()), (stack, ())]


def test_the_traced_command_carries_the_environment() -> None:
    plain = decode_argv(Path("/b/llama-bench"), Path("m.gguf"), 16, 0, ())
    assert plain[:3] == ["/b/llama-bench", "-m", "m.gguf"] and "-d" not in plain
    armed = decode_argv(Path("/b/llama-bench"), Path("m.gguf"), 16, 512, (("GGML_CUDA_PDL", "0"),))
    assert armed[:3] == ["/usr/bin/env", "GGML_CUDA_PDL=0", "/b/llama-bench"]
    assert armed[-2:] == ["-d", "512"] and armed[3:] == [*plain[1:], "-d", "512"]


def test_a_malformed_arm_is_one_clear_line(tmp_path: Path) -> None:
    """Checked before the GPU, nsys and the model are looked for: the same line on any machine."""
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    assert_one_line_error(run_profile("--variant", "stack-1-5@PDL", "--model", str(model)), "NAME=VALUE", "'PDL'")
    with pytest.raises(FusekitError, match="NAME=VALUE"):
        split_arm("fusion-5@GGML_CUDA_PDL")


def test_a_trace_of_a_long_arm_leaves_room_for_what_nsys_adds(tmp_path: Path) -> None:
    """Session 31: an arm's 254-byte name gave a 263-byte .nsys-rep, and at a 240-byte stem the export still failed
    on its 247-byte .sqlite; the stem is cut to TRACE_STEM_BYTES, the environment kept."""
    arm = "+".join(f"experiment-{i:02d}" for i in range(18)) + "+10-more-065bec762a40@GGML_CUDA_PDL=0"
    assert len((arm + ".nsys-rep").encode()) > 255
    base = record.trace_base(tmp_path, arm)
    assert base.parent == tmp_path and base.name.endswith("@GGML_CUDA_PDL=0")
    assert len((base.name + ".sqlite-journal").encode()) <= record.TRACE_STEM_BYTES + len(".sqlite-journal") < 255
    base.with_suffix(".nsys-rep").write_text("")  # the file system takes it, the suffix where nsys puts it
    assert record.trace_base(tmp_path, "stock") == tmp_path / "stock"
