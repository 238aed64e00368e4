"""The result schema: one JSON envelope for every measurement fusekit writes (eval, profile, bench).

This module owns the format. Writers call :func:`new_result` and :func:`write_result`; readers
call :func:`read_result`, which refuses files of another schema version with an instruction.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from fusekit import __version__
from fusekit.errors import FusekitError
from fusekit.pin import load_pin

SCHEMA = "fusekit-result"
SCHEMA_VERSION = 1
KINDS = ("eval", "profile", "bench-mulmat", "baseline", "bench-spine")


def now_iso() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def gpu_info() -> list[dict[str, str]]:
    """Name, driver, memory and compute capability of each visible NVIDIA GPU (empty without one)."""
    smi = shutil.which("nvidia-smi")
    if not smi:
        return []
    fields = "name,driver_version,memory.total,compute_cap,clocks.max.sm,clocks.max.mem"
    done = subprocess.run([smi, f"--query-gpu={fields}", "--format=csv,noheader"], capture_output=True, text=True)
    if done.returncode != 0:
        return []
    keys = fields.split(",")
    return [dict(zip(keys, (v.strip() for v in line.split(",")), strict=False)) for line in done.stdout.splitlines()]


def machine_info() -> dict[str, Any]:
    return {
        "hostname": platform.node(),
        "os": platform.platform(),
        "python": sys.version.split()[0],
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "gpus": gpu_info(),
    }


def new_result(kind: str, command: list[str] | None = None) -> dict[str, Any]:
    """The common envelope; the writer fills ``payload`` (and may add ``inputs``/``variants``)."""
    if kind not in KINDS:
        raise ValueError(f"unknown result kind {kind!r}")
    pin = load_pin()
    return {
        "schema": SCHEMA,
        "schema_version": SCHEMA_VERSION,
        "kind": kind,
        "fusekit_version": __version__,
        "created": now_iso(),
        "command": command if command is not None else list(sys.argv),
        "llama_cpp": {"commit": pin.commit, "tree": pin.tree},
        "machine": machine_info(),
        "variants": [],  # Variant.describe() dicts plus build records
        "inputs": {},  # model/corpus paths and sha256
        "payload": {},
    }


def write_result(result: dict[str, Any], path: Path) -> Path:
    """Write ``result`` atomically: a complete, synced temporary file in the same folder, then os.replace.

    A process killed at any point leaves either the previous file or the new one, never a torn one.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    text = json.dumps(result, indent=2, sort_keys=True, default=str) + "\n"
    try:
        with open(tmp, "w") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def read_result(path: Path) -> dict[str, Any]:
    """Load a result file; refuse what is not one, or of another schema version."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise FusekitError(f"{path} is not a fusekit result file: {exc}") from exc
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise FusekitError(f"{path} is not a fusekit result file (no '{SCHEMA}' schema tag)")
    version = data.get("schema_version")
    if version != SCHEMA_VERSION:
        raise FusekitError(
            f"{path} has result schema version {version}, this fusekit reads {SCHEMA_VERSION}; "
            f"use the fusekit version that wrote it ({data.get('fusekit_version')}) or re-run the measurement"
        )
    return data
