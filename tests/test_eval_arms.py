"""Arms: a variant with extra environment variables, named and recorded with its environment."""

from __future__ import annotations

import pytest

from evals.arms import arm_name, split_arm, with_env
from fusekit.errors import FusekitError


def test_split_and_name() -> None:
    assert split_arm("stock") == ("stock", ())
    spec, env = split_arm("fusion-1+fusion-3@GGML_CUDA_DISABLE_FUSION=1,X=a=b")
    assert spec == "fusion-1+fusion-3" and env == (("GGML_CUDA_DISABLE_FUSION", "1"), ("X", "a=b"))
    assert arm_name("stock", env[:1]) == "stock@GGML_CUDA_DISABLE_FUSION=1"
    assert with_env(["llama-bench", "-m", "m"], env[:1]) == [
        "/usr/bin/env",
        "GGML_CUDA_DISABLE_FUSION=1",
        "llama-bench",
        "-m",
        "m",
    ]
    assert with_env(["a"], ()) == ["a"]


@pytest.mark.parametrize("bad", ["stock@", "stock@1X=2", "stock@NOEQUALS"])
def test_bad_arms(bad: str) -> None:
    with pytest.raises(FusekitError, match="NAME=VALUE"):
        split_arm(bad)
