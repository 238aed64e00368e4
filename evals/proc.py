"""Run one llama.cpp tool as its own process; a crash becomes one clear error with its last stderr lines."""

from __future__ import annotations

import shlex
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from fusekit.errors import FusekitError

STDERR_TAIL_LINES = 15


@dataclass(frozen=True)
class ToolRun:
    """What one tool invocation printed, and how long it took."""

    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str
    seconds: float
    started: float

    @property
    def command_line(self) -> str:
        return shlex.join(self.argv)

    def record(self) -> dict[str, object]:
        """The run as stored in a result (the command line and timing; output is parsed elsewhere)."""
        return {"argv": list(self.argv), "rc": self.returncode, "seconds": self.seconds, "started": self.started}


def tail(text: str, lines: int = STDERR_TAIL_LINES) -> str:
    return "\n".join(text.rstrip().splitlines()[-lines:])


def run_tool(argv: list[str], what: str, timeout: float | None = None, check: bool = True) -> ToolRun:
    """Run ``argv``; with ``check``, a non-zero exit raises naming ``what`` with the stderr tail."""
    tool = Path(argv[0])
    if not tool.is_file():
        raise FusekitError(f"{tool.name} is not built at {tool}; run 'fusekit build' first")
    started = time.time()
    clock = time.monotonic()
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, errors="replace", timeout=timeout, stdin=subprocess.DEVNULL
        )
    except subprocess.TimeoutExpired as exc:
        raise FusekitError(f"{what} did not finish within {timeout:.0f}s: {shlex.join(argv)}") from exc
    run = ToolRun(tuple(argv), done.returncode, done.stdout, done.stderr, time.monotonic() - clock, started)
    if check and done.returncode != 0:
        how = f"was killed by signal {-done.returncode}" if done.returncode < 0 else f"exited with {done.returncode}"
        raise FusekitError(
            f"{what} {how}: {run.command_line}",
            detail=tail(done.stderr) or tail(done.stdout),
        )
    return run
