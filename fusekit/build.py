"""Configure and build a variant's llama.cpp tools with CMake and Ninja.

Each variant builds inside its own work tree (``trees/<label>/build-<backend>``): the source is
then always ``..`` from the build folder, so ccache (with ``CCACHE_BASEDIR`` at the trees' common
root and ``CCACHE_NOHASHDIR=1``) shares compiled objects between stock and every variant.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .errors import FusekitError
from .gitutil import run_git
from .hostcpu import isa_defines

TARGETS = ("llama-bench", "llama-perplexity", "llama-completion", "llama-quantize", "test-backend-ops")
BACKENDS = ("cpu", "cuda")
STAMP = "fusekit-build.json"
_NINJA_STEP = re.compile(r"^\[(\d+)/(\d+)\] (.*)$")
_ERROR_LINE = re.compile(r"(error|FAILED:|undefined reference|fatal)", re.I)

Progress = Callable[[str], None]
StepProgress = Callable[[int, int, str], None]


@dataclass(frozen=True)
class BuildOptions:
    """What, besides the source, decides a build's output."""

    backend: str = "cpu"
    cuda_arch: str | None = None
    build_type: str = "Release"
    extra_defines: tuple[str, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise FusekitError(f"unknown backend {self.backend!r} (known: {', '.join(BACKENDS)})")

    @property
    def key(self) -> str:
        name = self.backend if self.backend == "cpu" else f"cuda-sm{self.cuda_arch}"
        if self.build_type != "Release" or self.extra_defines:
            extra = hashlib.sha256(repr((self.build_type, self.extra_defines)).encode()).hexdigest()[:8]
            name += f"-{extra}"
        return name

    def cmake_defines(self, build_commit: str, ccache: str | None) -> list[str]:
        defines = [
            f"CMAKE_BUILD_TYPE={self.build_type}",
            "BUILD_SHARED_LIBS=ON",
            "LLAMA_BUILD_TESTS=ON",
            "LLAMA_BUILD_EXAMPLES=OFF",
            "LLAMA_BUILD_SERVER=OFF",
            "LLAMA_BUILD_APP=OFF",
            "LLAMA_OPENSSL=OFF",
            f"LLAMA_BUILD_COMMIT={build_commit}",
        ]
        if ccache:
            defines += [f"CMAKE_C_COMPILER_LAUNCHER={ccache}", f"CMAKE_CXX_COMPILER_LAUNCHER={ccache}"]
        if self.backend == "cuda":
            defines += ["GGML_CUDA=ON", f"CMAKE_CUDA_ARCHITECTURES={self.cuda_arch}"]
            if ccache:
                defines.append(f"CMAKE_CUDA_COMPILER_LAUNCHER={ccache}")
        return defines + list(isa_defines()) + list(self.extra_defines)


@dataclass(frozen=True)
class BuildResult:
    label: str
    build_dir: Path
    seconds: float
    steps: int
    up_to_date: bool
    ccache: bool
    record: dict[str, Any]

    @property
    def bin_dir(self) -> Path:
        return self.build_dir / "bin"

    def tool(self, name: str) -> Path:
        return self.bin_dir / name


def detect_cuda_arch() -> str:
    """Compute capability of the first visible GPU, as CMake wants it (``9.0`` -> ``90``)."""
    smi = shutil.which("nvidia-smi")
    if smi:
        done = subprocess.run([smi, "--query-gpu=compute_cap", "--format=csv,noheader"], capture_output=True, text=True)
        lines = done.stdout.split()
        if done.returncode == 0 and lines:
            return lines[0].replace(".", "")
    raise FusekitError("--backend cuda needs --cuda-arch (no GPU is visible to nvidia-smi)")


def _require_tools(options: BuildOptions) -> None:
    for tool, hint in (("cmake", "apt-get install cmake"), ("ninja", "apt-get install ninja-build")):
        if not shutil.which(tool):
            raise FusekitError(f"{tool} is not installed ({hint})")
    if not (os.environ.get("CXX") or shutil.which("c++") or shutil.which("g++") or shutil.which("clang++")):
        raise FusekitError("no C++ compiler found (apt-get install g++)")
    if options.backend == "cuda":
        cudacxx = os.environ.get("CUDACXX")
        if cudacxx and not os.access(cudacxx, os.X_OK):
            raise FusekitError(f"--backend cuda: CUDACXX={cudacxx} is not an executable nvcc")
        if not (cudacxx or shutil.which("nvcc") or Path("/usr/local/cuda/bin/nvcc").exists()):
            raise FusekitError("--backend cuda needs nvcc (the CUDA toolkit); none on PATH or in /usr/local/cuda")


def ccache_environment(trees_root: Path) -> dict[str, str]:
    return {"CCACHE_BASEDIR": str(trees_root), "CCACHE_NOHASHDIR": "1"}


def error_lines(output: str, limit: int = 40) -> str:
    """The compiler's and ninja's error lines (with the line after each), not the whole log."""
    lines = output.splitlines()
    keep: list[str] = []
    for index, line in enumerate(lines):
        if _ERROR_LINE.search(line) and not line.startswith("["):
            keep.append(line)
            if index + 1 < len(lines) and not _ERROR_LINE.search(lines[index + 1]):
                keep.append(lines[index + 1])
    return "\n".join(keep[:limit]) or "\n".join(lines[-limit:])


def build_variant(
    label: str,
    tree: Path,
    trees_root: Path,
    stack_sha256: str,
    options: BuildOptions,
    jobs: int | None,
    progress: Progress,
    step_progress: StepProgress | None = None,
    targets: tuple[str, ...] = TARGETS,
) -> BuildResult:
    """Configure when needed, then run ninja for ``targets``; raise with the error lines on failure."""
    _require_tools(options)
    if options.backend == "cuda" and not options.cuda_arch:
        options = BuildOptions("cuda", detect_cuda_arch(), options.build_type, options.extra_defines)
    build_dir = tree / f"build-{options.key}"
    ccache = shutil.which("ccache")
    if not ccache:
        progress("ccache is not installed: every build compiles from scratch (apt-get install ccache)")
    head = run_git(tree, "rev-parse", "HEAD")
    build_commit = f"{label}@{head[:10]}"
    defines = options.cmake_defines(build_commit, ccache)
    env = {**os.environ, **ccache_environment(trees_root)}
    stamp_path = build_dir / STAMP
    wanted_config = {"defines": defines, "targets": list(targets)}
    previous = json.loads(stamp_path.read_text()) if stamp_path.is_file() else {}
    started = time.monotonic()
    configured_for = configured_source(build_dir)
    if configured_for is not None and configured_for != tree.resolve():
        # a copied or moved home: its build files name the old tree's sources, which ninja would compile
        progress(f"{build_dir} was configured for {configured_for}: configuring it afresh for {tree}")
        (build_dir / "CMakeCache.txt").unlink()
        shutil.rmtree(build_dir / "CMakeFiles", ignore_errors=True)
        (build_dir / "build.ninja").unlink(missing_ok=True)
    if previous.get("config") != wanted_config or not (build_dir / "build.ninja").is_file():
        progress(f"configuring {label} ({options.key}) in {build_dir}")
        cmd = ["cmake", "-S", str(tree), "-B", str(build_dir), "-G", "Ninja"] + [f"-D{d}" for d in defines]
        done = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if done.returncode != 0:
            raise FusekitError(f"cmake configure of {label} failed", detail=_cmake_errors(done.stdout + done.stderr))
    steps = _run_ninja(build_dir, targets, jobs or os.cpu_count() or 1, env, label, step_progress)
    seconds = time.monotonic() - started
    record = {
        "variant": label,
        "stack_sha256": stack_sha256,
        "head": head,
        "uncommitted_edits_sha256": _edits_hash(tree),
        "options": asdict(options),
        "config": wanted_config,
        "build_commit": build_commit,
        "finished": time.time(),
    }
    stamp_path.write_text(json.dumps(record, indent=2) + "\n")
    return BuildResult(label, build_dir, seconds, steps, steps == 0, bool(ccache), record)


def configured_source(build_dir: Path) -> Path | None:
    """The source folder a CMake build folder was configured for (its cache's CMAKE_HOME_DIRECTORY), if any."""
    cache = build_dir / "CMakeCache.txt"
    if not cache.is_file():
        return None
    for line in cache.read_text(errors="replace").splitlines():
        if line.startswith("CMAKE_HOME_DIRECTORY:"):
            return Path(line.split("=", 1)[1]).resolve()
    return None


def _edits_hash(tree: Path) -> str:
    diff = run_git(tree, "diff", "HEAD", "--no-color", "--no-ext-diff")
    return hashlib.sha256(diff.encode()).hexdigest() if diff else ""


def _cmake_errors(output: str) -> str:
    lines = output.splitlines()
    picked = [i for i, line in enumerate(lines) if "CMake Error" in line]
    if not picked:
        return "\n".join(lines[-30:])
    out: list[str] = []
    for i in picked[:5]:
        out.extend(lines[i : i + 6])
    return "\n".join(out)


def _run_ninja(
    build_dir: Path,
    targets: tuple[str, ...],
    jobs: int,
    env: dict[str, str],
    label: str,
    step_progress: StepProgress | None,
) -> int:
    cmd = ["ninja", "-C", str(build_dir), f"-j{jobs}", *targets]
    env = {**env, "NINJA_STATUS": "[%f/%t] "}
    log: list[str] = []
    steps = 0
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            line = line.rstrip("\n")
            log.append(line)
            match = _NINJA_STEP.match(line)
            if match:
                steps = int(match.group(1))
                if step_progress:
                    step_progress(steps, int(match.group(2)), match.group(3))
        code = proc.wait()
    if code != 0:
        (build_dir / "fusekit-build-failed.log").write_text("\n".join(log) + "\n")
        raise FusekitError(
            f"build of {label} failed (full log: {build_dir / 'fusekit-build-failed.log'})",
            detail=error_lines("\n".join(log)),
        )
    return steps
