"""Checkpoints of a running eval: the result so far, in ``<final stem>.partial.json`` next to the final file.

After each finished phase (quality, text) and each finished speed round the eval writes its result so
far there (the result schema plus a ``partial`` record), atomically. A normal end writes the final file
and removes the partial one; an error keeps it and records the error; a kill keeps the last checkpoint.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fusekit.console import note
from fusekit.errors import FusekitError

from .results import now_iso, write_result

PARTIAL_SUFFIX = ".partial.json"

Checkpoint = Callable[[dict[str, Any], str], None]


def partial_path(final: Path) -> Path:
    """``eval-x.json`` -> ``eval-x.partial.json``, in the same folder."""
    return final.with_name(final.stem + PARTIAL_SUFFIX)


def final_name_of(partial: Path) -> str | None:
    """The name of the final ``.json`` file a partial file stands for; None for a name that is not partial."""
    if not partial.name.endswith(PARTIAL_SUFFIX):
        return None
    return partial.name.removesuffix(PARTIAL_SUFFIX) + ".json"


def one_line(exc: BaseException) -> str:
    """The first line of an error, as ``stopped_by`` records it."""
    text = exc.message if isinstance(exc, FusekitError) else str(exc)
    lines = text.strip().splitlines()
    first = lines[0] if lines else ""
    if isinstance(exc, FusekitError):
        return first or type(exc).__name__
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


class Checkpoints:
    """The partial file of one eval: rewritten after each completed step, kept or removed at the end."""

    def __init__(self, result: dict[str, Any], final: Path) -> None:
        self.result = result  # the envelope; each checkpoint sets its payload
        self.path = partial_path(final)
        self.completed: list[str] = []
        self.payload: dict[str, Any] = {}

    def save(self, payload: dict[str, Any], completed: str) -> None:
        """Record ``completed`` and write ``payload`` (the result so far) to the partial file."""
        self.payload = payload
        self.completed.append(completed)
        self._write(None)

    def stop(self, exc: BaseException) -> Path | None:
        """After an error: the partial file with ``stopped_by`` set, or None when nothing was completed."""
        if not self.completed:
            return None
        with contextlib.suppress(OSError):  # the last checkpoint then stays; the original error matters more
            self._write(one_line(exc))
        return self.path

    def discard(self) -> None:
        """The final result is written: the partial file (this eval's, or an earlier one's) goes."""
        self.path.unlink(missing_ok=True)

    def _write(self, stopped_by: str | None) -> None:
        partial = {"completed": list(self.completed), "stopped_by": stopped_by, "written": now_iso()}
        write_result({**self.result, "payload": self.payload, "partial": partial}, self.path)


def run_checkpointed(result: dict[str, Any], final: Path, run: Callable[[Checkpoint], dict[str, Any]]) -> Path:
    """``run(save)`` makes the payload, calling ``save`` after each completed step; write the final result.

    On an error after a checkpoint the partial file stays, its ``stopped_by`` set; a FusekitError is
    raised again with the partial file named on its line, other errors are re-raised after a note.
    """
    checkpoints = Checkpoints(result, final)
    try:
        result["payload"] = run(checkpoints.save)
    except FusekitError as exc:
        kept = checkpoints.stop(exc)
        if kept is None:
            raise
        raise FusekitError(f"{exc.message} (partial result kept in {kept})", detail=exc.detail) from exc
    except BaseException as exc:
        kept = checkpoints.stop(exc)
        if kept is not None:
            note(f"partial result kept in {kept}")
        raise
    result["finished"] = now_iso()
    path = write_result(result, final)
    checkpoints.discard()
    return path
