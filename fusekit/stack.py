"""Patch stacks: what a variant is made of, in canonical order, and its content-derived identity."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

from .errors import FusekitError
from .named_stacks import expand, load_stacks
from .paths import kernels_dir
from .registry import Fusion, Registry

STOCK = "stock"
_LABEL_SAFE = re.compile(r"[^A-Za-z0-9._-]+")


def file_sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@dataclass(frozen=True)
class Entry:
    """One element of a stack: a registered fusion or a user's own patch file."""

    kind: str  # "fusion" or "patch"
    name: str  # fusion name, or the patch file's label
    patches: tuple[Path, ...]
    kernels: tuple[tuple[Path, str], ...] = ()  # (source in kernels/, destination in the tree)

    @property
    def sort_key(self) -> tuple[int, int]:
        if self.kind == "fusion":
            return (0, int(self.name.split("-")[1]))
        return (1, 0)

    def content_hash(self) -> str:
        """sha256 over the patch and kernel files (and where kernels go)."""
        digest = hashlib.sha256()
        digest.update(f"{self.kind}:{self.name}\n".encode())
        for patch in self.patches:
            digest.update(f"patch {patch.name} {file_sha256(patch)}\n".encode())
        for source, dest in self.kernels:
            digest.update(f"kernel {dest} {file_sha256(source)}\n".encode())
        return digest.hexdigest()

    def describe(self) -> dict[str, object]:
        """JSON-ready description with hashes (for status and result files)."""
        return {
            "kind": self.kind,
            "name": self.name,
            "sha256": self.content_hash(),
            "patches": [{"file": str(p), "sha256": file_sha256(p)} for p in self.patches],
            "kernels": [{"file": str(s), "dest": d, "sha256": file_sha256(s)} for s, d in self.kernels],
        }


def fusion_entry(fusion: Fusion) -> Entry:
    return Entry("fusion", fusion.name, fusion.patches, tuple((k.source, k.dest) for k in fusion.kernels))


def patch_label(path: Path) -> str:
    stem = path.name
    for suffix in (".patch", ".diff"):
        stem = stem.removesuffix(suffix)
    return _LABEL_SAFE.sub("-", stem).strip("-") or "patch"


def check_is_patch(path: Path) -> None:
    """A unified diff with at least one file header and one hunk."""
    if not path.is_file():
        raise FusekitError(f"patch file {path} does not exist")
    try:
        text = path.read_text()
    except UnicodeDecodeError as exc:
        raise FusekitError(f"{path} is not a patch (not text)") from exc
    has_header = re.search(r"^(diff --git |--- )", text, re.M) and re.search(r"^\+\+\+ ", text, re.M)
    if not has_header or not re.search(r"^@@ ", text, re.M):
        raise FusekitError(f"{path} is not a patch (no unified-diff file header and hunk)")


def patch_description(text: str) -> str:
    """The lines of a patch file before its first file header: the description an experiment's header fields
    (Applies on, Checks, Sabotage, Kernels) live in, which ``git apply`` skips and a refresh must keep."""
    lines = text.splitlines(keepends=True)
    for index, line in enumerate(lines):
        if line.startswith(("diff --git ", "--- ")):
            return "".join(lines[:index])
    return ""


def patch_header_field(path: Path, field: str) -> list[str]:
    """The words of a patch's ``FIELD: ...`` header line (in its description, before the first diff); [] without one.
    scripts/h200_session.sh reads the same lines with sed."""
    for line in patch_description(path.read_text()).splitlines():
        if line.startswith(f"{field}: "):
            return line.removeprefix(f"{field}: ").split()
    return []


# Where the kernel files a patch names go: beside ggml-cuda's sources, as every fusion's do.
PATCH_KERNEL_DIR = "ggml/src/ggml-cuda"


def patch_kernels(path: Path) -> tuple[tuple[Path, str], ...]:
    """The files of ``kernels/`` that a patch's header names on a ``Kernels:`` line: an experiment that includes
    kernel sources its fusion does not place. Each goes into PATCH_KERNEL_DIR, and its contents count in the entry's
    hash as a fusion's kernels do."""
    placed = []
    for name in patch_header_field(path, "Kernels"):
        source = kernels_dir() / name
        if "/" in name or not source.is_file():
            raise FusekitError(f"{path}: its Kernels: line names {name!r}, which is not a file in {kernels_dir()}")
        placed.append((source, f"{PATCH_KERNEL_DIR}/{name}"))
    return tuple(placed)


def user_patch_entry(path: Path) -> Entry:
    check_is_patch(path)
    return Entry("patch", patch_label(path), (path.resolve(),), patch_kernels(path))


def resolve_spec(spec: str, registry: Registry) -> Entry:
    """A fusion name or alias, or the path of a patch file."""
    if spec in registry:
        return fusion_entry(registry.get(spec))
    path = Path(spec).expanduser()
    if path.exists() or spec.endswith((".patch", ".diff")) or "/" in spec:
        return user_patch_entry(path)
    registry.get(spec)  # raises the "unknown fusion ... did you mean" error
    raise AssertionError("unreachable")


def spec_entries(spec: str, registry: Registry) -> list[Entry]:
    """``stock``, a fusion, a named stack, a patch file, or several joined with '+' (``fusion-1+fusion-5``)."""
    if spec == STOCK:
        return []
    parts = [p for p in spec.split("+") if p]
    if not parts:
        raise FusekitError(f"empty variant {spec!r}")
    return [resolve_spec(part, registry) for part in expand(parts, load_stacks(registry))]


def canonical(entries: list[Entry]) -> list[Entry]:
    """Fusions by number, then user patches in the order they were first added; no duplicates.

    Two entries of one name are one entry when their files hold the same bytes (e.g. the applied variant's patch
    came from another checkout of this repository): it keeps its first place and the later entry's files. With
    different bytes they are refused.
    """
    seen: dict[tuple[str, str], Entry] = {}
    for entry in entries:
        key = (entry.kind, entry.name)
        if key in seen and seen[key] != entry and seen[key].content_hash() != entry.content_hash():
            first, second = seen[key].patches[0], entry.patches[0]
            raise FusekitError(
                f"two different patches are both called {entry.name!r} ({first} and {second}); rename one, or "
                "'fusekit reset' first if the applied one is an older copy"
            )
        seen[key] = entry  # a dict keeps a key's first place
    ordered = list(seen.values())
    return sorted(ordered, key=lambda e: e.sort_key)  # sort is stable: user patches keep their order


# A label names a work tree folder and a git branch (whose lock file adds ".lock"): file names stop at 255 bytes.
MAX_LABEL_BYTES = 240


def file_stem(name: str, limit: int = MAX_LABEL_BYTES) -> str:
    """``name`` as a file or folder name: itself up to ``limit`` bytes, else ``<hash>-`` of the whole and its last
    bytes, where an arm's environment is (``VARIANT@GGML_CUDA_PDL=0`` plus a suffix can pass 255 bytes where
    ``VARIANT`` does not; scripts/host_env.sh's fit_name cuts the same way)."""
    raw = name.encode()
    if len(raw) <= limit:
        return name
    digest = hashlib.sha256(raw).hexdigest()[:12]
    return digest + "-" + raw[-(limit - 13) :].decode(errors="ignore")


def label_of(entries: list[Entry]) -> str:
    """Human name of a variant: ``stock`` or the entry names joined with '+'. Past MAX_LABEL_BYTES, the names that
    fit and ``+N-more-<hash>`` (N names left out, the hash of the whole list), so it still names a folder and a
    branch (git refuses '~' in branch names)."""
    if not entries:
        return STOCK
    full = "+".join(e.name for e in entries)
    if len(full.encode()) <= MAX_LABEL_BYTES:
        return full
    digest = hashlib.sha256(full.encode()).hexdigest()[:12]
    kept: list[str] = []
    for entry in entries:
        tail = f"+{len(entries) - len(kept) - 1}-more-{digest}"
        if len("+".join([*kept, entry.name]).encode()) + len(tail) > MAX_LABEL_BYTES:
            break
        kept.append(entry.name)
    return "+".join([*kept, f"{len(entries) - len(kept)}-more-{digest}"])


def stack_hash(entries: list[Entry]) -> str:
    digest = hashlib.sha256()
    for entry in entries:
        digest.update(entry.content_hash().encode())
    return digest.hexdigest()
