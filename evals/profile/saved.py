"""Profiles read back from a committed fusekit result (kind 'profile'), so two sessions' traces compare
without their SQLite exports (which stay on the GPU host).

A profile result holds one profile (``--from``) or two (stock, then the variant, from ``--against`` or a
recording). ``side`` picks one: ``stock`` is the first, ``variant`` the last. Kernel categories are taken from
today's rule table (``categories.py``), as the session report does, not from the file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from evals.results import read_result
from fusekit.errors import FusekitError

from .categories import categorize
from .parse import GraphCheck, KernelStat, OpStat, Profile, Timeline

SIDES = ("variant", "stock")


def is_saved_profile(path: Path) -> bool:
    """A ``.json`` path is a fusekit result; anything else is read as an Nsight Systems export."""
    return Path(path).suffix == ".json"


def _ops(rows: list[dict[str, Any]]) -> list[OpStat]:
    return [OpStat(r["name"], int(r["count"]), int(r["total_ns"]), r.get("bytes")) for r in rows]


def _timeline(row: dict[str, Any] | None) -> Timeline | None:
    if row is None:
        return None
    return Timeline(**{k: int(row[k]) for k in Timeline.__dataclass_fields__})


def profile_from_dict(data: dict[str, Any], path: Path) -> Profile:
    """Rebuild a Profile from ``Profile.to_dict()``'s output; ``path`` becomes the result file."""
    kernels, exclusive = [], {}
    for row in data["kernels"]:
        fields = {k: row[k] for k in KernelStat.__dataclass_fields__ if k != "category"}
        kernels.append(KernelStat(category=categorize(row["name"]), **fields))
        exclusive[row["name"]] = int(row.get("exclusive_ns", 0))
    graphs = data["graphs"]
    return Profile(
        path=str(path),
        kernels=kernels,
        memops=_ops(data.get("memops", [])),
        api=_ops(data.get("api", [])),
        nvtx=_ops(data.get("nvtx", [])),
        timeline=_timeline(data.get("timeline")),
        graphs=GraphCheck(**{k: graphs[k] for k in GraphCheck.__dataclass_fields__}),
        tokens=data.get("tokens"),
        tokens_source=data.get("tokens_source", ""),
        notes=list(data.get("notes", [])),
        exclusive=exclusive if any(exclusive.values()) else {},
    )


def read_saved_profile(path: Path, side: str = "variant", tokens: int | None = None) -> Profile:
    """One profile of a committed profile result; refuse other results, or files without profiles, clearly."""
    if side not in SIDES:
        raise FusekitError(f"unknown side {side!r}: use one of {', '.join(SIDES)}")
    if not Path(path).is_file():
        raise FusekitError(f"no such profile result: {path}")
    result = read_result(Path(path))
    if result.get("kind") != "profile":
        kind = result.get("kind")
        raise FusekitError(f"{path} is a '{kind}' result, not a profile result ('fusekit profile --json')")
    profiles = (result.get("payload") or {}).get("profiles") or []
    if not profiles:
        raise FusekitError(f"{path} holds no profile")
    try:
        profile = profile_from_dict(profiles[0] if side == "stock" else profiles[-1], Path(path))
    except (KeyError, TypeError, ValueError) as exc:
        raise FusekitError(f"{path} has a damaged profile ({type(exc).__name__}: {exc})") from exc
    if tokens is not None:
        profile.tokens, profile.tokens_source = tokens, "--tokens"
    return profile
