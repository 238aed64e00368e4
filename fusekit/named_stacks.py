"""Named stacks (``patches/stacks.toml``): registered fusions and the patches measured on top of them, under one
name that ``fusekit apply`` and variant specs accept (``fusekit apply stack-1-5``).

A named stack is exactly the entries a GPU session measured as one variant, in that order, so that a user gets the
measured variant with one word. The file names the evidence; the names never collide with fusions or aliases.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

from .errors import FusekitError
from .paths import patches_dir
from .registry import Registry

STACKS_FILE = "stacks.toml"
STACK_NAME = re.compile(r"^stack-[a-z0-9][a-z0-9-]*$")
KEYS = ("title", "entries", "evidence")


@dataclass(frozen=True)
class NamedStack:
    name: str
    title: str
    specs: tuple[str, ...]  # fusion names, and absolute paths of patch files, in the order they are applied
    evidence: str  # where the measurement of this exact variant is (a path in the repository)


def _fail(path: Path, problem: str) -> FusekitError:
    return FusekitError(f"malformed stacks file {path}: {problem}")


def parse_stacks(path: Path, registry: Registry) -> dict[str, NamedStack]:
    """Parse and validate a stacks file; patch entries are relative to the folder holding it."""
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise _fail(path, str(exc)) from exc
    stacks = {}
    for name, table in data.items():
        if not STACK_NAME.match(name):
            raise _fail(path, f"stack name {name!r} must be 'stack-' and lower-case words joined by '-'")
        if name in registry:
            raise _fail(path, f"stack name {name!r} is already a fusion or alias")
        if not isinstance(table, dict) or sorted(table) != sorted(KEYS):
            raise _fail(path, f"[{name}] needs exactly the keys {', '.join(KEYS)}")
        entries = table["entries"]
        if not isinstance(entries, list) or not entries or not all(isinstance(e, str) for e in entries):
            raise _fail(path, f"[{name}] entries must be a non-empty list of strings")
        specs = []
        for entry in entries:
            if entry in registry:
                specs.append(registry.get(entry).name)
                continue
            patch = path.parent / entry
            if not patch.is_file():
                raise _fail(path, f"[{name}] entry {entry!r} is neither a fusion nor a file under {path.parent}")
            specs.append(str(patch.resolve()))
        stacks[name] = NamedStack(name, str(table["title"]), tuple(specs), str(table["evidence"]))
    return stacks


def load_stacks(registry: Registry) -> dict[str, NamedStack]:
    """The named stacks of this checkout (none when it has no stacks file)."""
    path = patches_dir() / STACKS_FILE
    return parse_stacks(path, registry) if path.is_file() else {}


def expand(specs: list[str], stacks: dict[str, NamedStack]) -> list[str]:
    """The specs with every named stack replaced by its entries."""
    expanded: list[str] = []
    for spec in specs:
        if spec in stacks:
            expanded.extend(stacks[spec].specs)
        elif STACK_NAME.match(spec) and not Path(spec).exists():
            known = ", ".join(sorted(stacks)) or "none in this checkout"
            raise FusekitError(f"unknown stack {spec!r} (named stacks: {known}; see 'fusekit list')")
        else:
            expanded.append(spec)
    return expanded
