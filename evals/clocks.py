"""GPU clocks, temperature and power, sampled with nvidia-smi in a thread while timed runs go on.

Only reads: fusekit never changes clock or power settings.
"""

from __future__ import annotations

import shutil
import subprocess
import threading
import time
from typing import Any

QUERY = (
    "timestamp",
    "index",
    "clocks.sm",
    "clocks.mem",
    "temperature.gpu",
    "power.draw",
    "clocks_throttle_reasons.active",
)
INTERVAL_MS = 500


def parse_sample(line: str, tag: str) -> dict[str, Any] | None:
    """One ``--format=csv,noheader,nounits`` line as a dict (numbers as floats where they parse)."""
    values = [v.strip() for v in line.split(",")]
    if len(values) != len(QUERY):
        return None
    sample: dict[str, Any] = {"tag": tag}
    for key, value in zip(QUERY, values, strict=True):
        try:
            sample[key] = float(value) if key not in ("timestamp", "clocks_throttle_reasons.active") else value
        except ValueError:
            sample[key] = value  # "[N/A]" and the like stay as printed
    return sample


class ClockSampler:
    """Runs ``nvidia-smi -lms`` while active; ``tag`` names the run that the next samples belong to."""

    def __init__(self, enabled: bool) -> None:
        self.smi = shutil.which("nvidia-smi") if enabled else None
        self.samples: list[dict[str, Any]] = []
        self.errors: list[str] = []
        self.tag = ""
        self._proc: subprocess.Popen[str] | None = None
        self._thread: threading.Thread | None = None

    @property
    def active(self) -> bool:
        return self.smi is not None

    def __enter__(self) -> ClockSampler:
        if self.smi:
            cmd = [self.smi, f"--query-gpu={','.join(QUERY)}", "--format=csv,noheader,nounits", f"-lms={INTERVAL_MS}"]
            self._proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            self._thread = threading.Thread(target=self._read, daemon=True)
            self._thread.start()
        return self

    def _read(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        for line in self._proc.stdout:
            sample = parse_sample(line, self.tag)
            if sample is None:
                self.errors.append(line.strip())
            else:
                sample["t"] = time.time()
                self.samples.append(sample)

    def __exit__(self, *exc: object) -> None:
        if self._proc is not None:
            self._proc.terminate()
            try:
                _, err = self._proc.communicate(timeout=5)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                _, err = self._proc.communicate()
            if err and err.strip():
                self.errors.append(err.strip())
        if self._thread is not None:
            self._thread.join(timeout=5)

    def record(self) -> dict[str, Any]:
        return {
            "sampled": self.active,
            "interval_ms": INTERVAL_MS if self.active else None,
            "query": list(QUERY),
            "samples": list(self.samples),  # a copy: the reader thread keeps appending
            "errors": self.errors[:20],
        }
