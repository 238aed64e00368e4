"""The fusion registry: one TOML manifest per fusion in ``fusions/``, parsed by one loader.

A manifest that is malformed stops every command with the file and the problem; a name that
is not known gets the nearest known names as suggestions.
"""

from __future__ import annotations

import difflib
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

from .errors import FusekitError
from .paths import fusions_dir, kernels_dir, patches_dir

NAME_PATTERN = re.compile(r"^fusion-(\d+)$")
ALIAS_PATTERN = re.compile(r"^[a-z0-9][a-z0-9-]*$")
KNOWN_BACKENDS = frozenset({"cpu", "cuda"})
REQUIRED = ("name", "alias", "title", "description", "patches", "backends", "ops")


@dataclass(frozen=True)
class KernelFile:
    """A file from ``kernels/`` that the fusion places into the llama.cpp tree."""

    source: Path
    dest: str


@dataclass(frozen=True)
class Fusion:
    name: str
    alias: str
    title: str
    description: str
    patches: tuple[Path, ...]
    kernels: tuple[KernelFile, ...]
    backends: tuple[str, ...]
    ops: tuple[str, ...]
    manifest: Path

    @property
    def order(self) -> int:
        match = NAME_PATTERN.match(self.name)
        assert match is not None
        return int(match.group(1))


def _fail(path: Path, problem: str) -> FusekitError:
    return FusekitError(f"malformed fusion manifest {path}: {problem}")


def parse_manifest(path: Path) -> Fusion:
    """Parse and validate one manifest; every referenced file must exist."""
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise _fail(path, str(exc)) from exc
    missing = [key for key in REQUIRED if key not in data]
    if missing:
        raise _fail(path, f"missing {', '.join(missing)}")
    unknown = sorted(set(data) - set(REQUIRED) - {"kernels"})
    if unknown:
        raise _fail(path, f"unknown keys {', '.join(unknown)}")
    name, alias = data["name"], data["alias"]
    if not isinstance(name, str) or not NAME_PATTERN.match(name):
        raise _fail(path, f"name {name!r} is not of the form fusion-N")
    if path.stem != name:
        raise _fail(path, f"file is named {path.name} but declares {name}")
    if not isinstance(alias, str) or not ALIAS_PATTERN.match(alias) or NAME_PATTERN.match(alias):
        raise _fail(path, f"alias {alias!r} must be lower-case words joined by '-'")
    for key in ("patches", "backends", "ops"):
        if not isinstance(data[key], list) or not all(isinstance(v, str) for v in data[key]):
            raise _fail(path, f"{key} must be a list of strings")
    if not data["patches"] and not data.get("kernels"):
        raise _fail(path, "a fusion needs at least one patch or kernel file")
    bad_backends = sorted(set(data["backends"]) - KNOWN_BACKENDS)
    if bad_backends:
        raise _fail(path, f"unknown backends {', '.join(bad_backends)} (known: {', '.join(sorted(KNOWN_BACKENDS))})")
    patches = tuple(patches_dir() / p for p in data["patches"])
    for patch in patches:
        if not patch.is_file():
            raise _fail(path, f"patch {patch} does not exist")
    kernels = []
    for entry in data.get("kernels", []):
        if not isinstance(entry, dict) or set(entry) != {"source", "dest"}:
            raise _fail(path, "each [[kernels]] entry needs exactly 'source' and 'dest'")
        source = kernels_dir() / entry["source"]
        if not source.is_file():
            raise _fail(path, f"kernel source {source} does not exist")
        dest = entry["dest"]
        if dest.startswith("/") or ".." in Path(dest).parts:
            raise _fail(path, f"kernel dest {dest!r} must be a relative path inside the tree")
        kernels.append(KernelFile(source, dest))
    return Fusion(
        name=name,
        alias=alias,
        title=data["title"],
        description=data["description"],
        patches=patches,
        kernels=tuple(kernels),
        backends=tuple(data["backends"]),
        ops=tuple(data["ops"]),
        manifest=path,
    )


class Registry:
    """All fusions of this checkout, looked up by name or alias."""

    def __init__(self, fusions: list[Fusion]) -> None:
        self._by_key: dict[str, Fusion] = {}
        for fusion in sorted(fusions, key=lambda f: f.order):
            for key in (fusion.name, fusion.alias):
                if key in self._by_key:
                    other = self._by_key[key]
                    raise FusekitError(
                        f"fusion name or alias {key!r} is used by both {other.manifest} and {fusion.manifest}"
                    )
                self._by_key[key] = fusion
        self.fusions = sorted(fusions, key=lambda f: f.order)

    @classmethod
    def load(cls, folder: Path | None = None) -> Registry:
        folder = folder or fusions_dir()
        manifests = sorted(folder.glob("*.toml")) if folder.is_dir() else []
        return cls([parse_manifest(path) for path in manifests])

    def __contains__(self, key: str) -> bool:
        return key in self._by_key

    def get(self, key: str) -> Fusion:
        try:
            return self._by_key[key]
        except KeyError:
            raise FusekitError(unknown_fusion_message(key, list(self._by_key))) from None


def unknown_fusion_message(key: str, known: list[str]) -> str:
    close = difflib.get_close_matches(key, known, n=3, cutoff=0.5)
    hint = f"; did you mean {' or '.join(close)}?" if close else ""
    listing = ", ".join(sorted(known)) if known else "none in this checkout"
    return f"unknown fusion {key!r}{hint} (known: {listing}; a patch file needs a path that exists)"
