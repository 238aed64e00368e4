"""The text that perplexity and KL divergence are measured on: CPython's pydoc topics, or any text file."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from fusekit.errors import FusekitError
from fusekit.source import sha256_of

from .models import InputFile

Corpus = InputFile


def default_text() -> str:
    """English prose from the Python documentation that ships with every CPython (``pydoc_data.topics``)."""
    from pydoc_data.topics import topics

    return "\n\n".join(topics[key].strip() for key in sorted(topics)) + "\n"


def default_corpus(cache: Path) -> Corpus:
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    target = cache / "corpus" / f"pydoc-topics-py{version}.txt"
    text = default_text().encode()
    if not target.is_file() or target.read_bytes() != text:
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_suffix(".part")
        partial.write_bytes(text)
        os.replace(partial, target)
    return Corpus(target, sha256_of(target), target.stat().st_size, default=True)


def user_corpus(path: Path) -> Corpus:
    path = path.expanduser().resolve()
    if not path.is_file():
        raise FusekitError(f"corpus {path} does not exist")
    data = path.read_bytes()
    try:
        text = data.decode()
    except UnicodeDecodeError as exc:
        raise FusekitError(f"corpus {path} is not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    if not text.strip():
        raise FusekitError(f"corpus {path} is empty")
    return Corpus(path, sha256_of(path), len(data), default=False)


def resolve_corpus(path: Path | None, cache: Path) -> Corpus:
    return user_corpus(path) if path is not None else default_corpus(cache)
