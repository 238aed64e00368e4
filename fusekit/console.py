"""Terminal output helpers: progress lines on stderr, tables, JSON."""

from __future__ import annotations

import json
import sys
import time
from typing import Any

import click


def note(message: str) -> None:
    """A progress line on stderr (stdout stays for results and --json)."""
    click.echo(f"fusekit: {message}", err=True)


class StepMeter:
    """Shows ninja's [n/N] progress: one rewritten line on a terminal, a line per 10% elsewhere."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.tty = sys.stderr.isatty()
        self.last_decile = -1
        self.started = time.monotonic()

    def __call__(self, done: int, total: int, what: str) -> None:
        if self.tty:
            text = f"\r[{done}/{total}] {self.label}: {what}"[:160]
            click.echo(text.ljust(160), err=True, nl=False)
            if done == total:
                click.echo("", err=True)
            return
        decile = done * 10 // max(total, 1)
        if decile != self.last_decile:
            self.last_decile = decile
            elapsed = time.monotonic() - self.started
            click.echo(f"fusekit: building {self.label}: [{done}/{total}] {elapsed:.0f}s", err=True)


def print_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, sort_keys=True, default=str))


def table(headers: list[str], rows: list[list[Any]]) -> str:
    """A plain aligned text table."""
    cells = [[str(c) for c in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) if cells else len(h) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=False)).rstrip()]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=False)).rstrip() for row in cells]
    return "\n".join(lines)
