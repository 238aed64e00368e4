"""The stock KL-divergence base: llama-perplexity's saved log-probs, cached per stock build, model, corpus
and settings, with a JSON sidecar that is checked before the base is used."""

from __future__ import annotations

import hashlib
import json
import os
import struct
from pathlib import Path
from typing import Any

from fusekit.errors import FusekitError
from fusekit.source import sha256_of

MAGIC = b"_logits_"
SIDECAR_VERSION = 1


def read_header(path: Path) -> dict[str, int]:
    """``n_ctx``, ``n_vocab`` and ``n_chunk`` from the head of a log-probs file (as llama-perplexity writes it)."""
    with open(path, "rb") as handle:
        head = handle.read(8 + 4 + 4 + 4)
    if len(head) < 20 or head[:8] != MAGIC:
        raise FusekitError(f"{path} is not a llama-perplexity KL base (no '_logits_' header)")
    n_ctx, n_vocab, n_chunk = struct.unpack("<Iii", head[8:20])
    return {"n_ctx": n_ctx, "n_vocab": n_vocab, "n_chunk": n_chunk}


def base_identity(stock_build: dict[str, Any], model_sha: str, corpus_sha: str, settings: dict[str, Any]) -> dict:
    """What a base depends on: the stock build (commit, options, uncommitted edits), model, corpus, settings.

    Passed through JSON so that it compares equal to the copy read back from a sidecar (tuples become lists).
    """
    identity = {
        "stock_head": stock_build["head"],
        "stock_edits_sha256": stock_build.get("uncommitted_edits_sha256", ""),
        "build_options": stock_build["options"],
        "model_sha256": model_sha,
        "corpus_sha256": corpus_sha,
        "settings": settings,
    }
    return json.loads(json.dumps(identity, sort_keys=True))


def cache_path(cache: Path, identity: dict[str, Any]) -> Path:
    digest = hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:20]
    return cache / "kl-base" / f"stock-{digest}.kld"


def sidecar_of(base: Path) -> Path:
    return base.with_name(base.name + ".json")


def write_sidecar(base: Path, identity: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    record = {
        "sidecar_version": SIDECAR_VERSION,
        "identity": identity,
        "header": read_header(base),
        "sha256": sha256_of(base),
        **extra,
    }
    tmp = sidecar_of(base).with_suffix(".tmp")
    tmp.write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, sidecar_of(base))
    return record


def check_base(base: Path, identity: dict[str, Any], ctx: int) -> dict[str, Any]:
    """The sidecar of ``base`` if it matches ``identity``; otherwise one line naming what differs."""
    side = sidecar_of(base)
    if not base.is_file():
        raise FusekitError(f"KL base {base} does not exist")
    if not side.is_file():
        raise FusekitError(f"KL base {base} has no sidecar {side.name}; fusekit cannot tell what it was made from")
    try:
        record = json.loads(side.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise FusekitError(f"KL base sidecar {side} does not parse: {exc}") from None
    if record.get("sidecar_version") != SIDECAR_VERSION:
        raise FusekitError(f"KL base sidecar {side} has version {record.get('sidecar_version')}, expected 1")
    differs = _differences(record.get("identity", {}), identity)
    if differs:
        raise FusekitError(f"KL base {base} does not match this eval: {'; '.join(differs)}")
    header = read_header(base)
    if header["n_ctx"] != ctx:
        raise FusekitError(f"KL base {base} was computed with context {header['n_ctx']}, this eval uses {ctx}")
    if header != record.get("header"):
        raise FusekitError(f"KL base {base} changed since its sidecar was written (header {header})")
    return record


def _differences(stored: dict[str, Any], wanted: dict[str, Any]) -> list[str]:
    names = {
        "model_sha256": "model",
        "corpus_sha256": "corpus",
        "settings": "settings",
        "stock_head": "stock build",
        "stock_edits_sha256": "stock build (uncommitted edits)",
        "build_options": "build options",
    }
    out = []
    for key, label in names.items():
        if stored.get(key) != wanted.get(key):
            out.append(f"{label} {_short(stored.get(key))} != {_short(wanted.get(key))}")
    return out


def _short(value: Any) -> str:
    if isinstance(value, str) and len(value) == 64:
        return value[:12]
    return json.dumps(value, sort_keys=True)
