"""Arms: a variant run with extra environment variables (``stock@GGML_CUDA_DISABLE_FUSION=1``).

An arm measures a runtime switch of one build side by side with the plain build, e.g. stock with
ggml's own CUDA fusions disabled. The environment is part of every recorded command line.
"""

from __future__ import annotations

import re

from fusekit.errors import FusekitError

SEPARATOR = "@"
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=.*$")


def split_arm(spec: str) -> tuple[str, tuple[tuple[str, str], ...]]:
    """``VARIANT@K=V,K2=V2`` -> (``VARIANT``, ((K, V), (K2, V2))); a plain spec has no environment."""
    variant, sep, settings = spec.partition(SEPARATOR)
    if not sep:
        return spec, ()
    pairs = []
    for item in settings.split(","):
        if not _ASSIGNMENT.match(item):
            raise FusekitError(f"{spec!r}: after '{SEPARATOR}' give NAME=VALUE[,NAME=VALUE] (got {item!r})")
        name, _, value = item.partition("=")
        pairs.append((name, value))
    return variant, tuple(pairs)


def arm_name(label: str, env: tuple[tuple[str, str], ...]) -> str:
    return label + (SEPARATOR + ",".join(f"{k}={v}" for k, v in env) if env else "")


def with_env(argv: list[str], env: tuple[tuple[str, str], ...]) -> list[str]:
    """Prefix ``env K=V`` so the environment is both applied and recorded with the command."""
    return ["/usr/bin/env", *(f"{k}={v}" for k, v in env), *argv] if env else argv
