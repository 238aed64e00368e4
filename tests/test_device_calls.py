"""scripts/device_calls/: the device calls a session plans for the next one, committed so that a fresh checkout has
them (session 36 found the git-ignored .bundle/ copies gone). Each must parse and name only patches and stacks that
exist, or its first call on a fresh machine would lose the build time."""

from __future__ import annotations

import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

from .conftest import REPO

CALLS = sorted((REPO / "scripts" / "device_calls").glob("*.sh"))
EXPERIMENTS = REPO / "patches" / "experiments"
FOLDERS = {"P": EXPERIMENTS, "E": EXPERIMENTS, "X": REPO / "tests" / "patches"}


def test_there_are_device_calls() -> None:
    assert {p.name for p in CALLS} >= {"poll.sh", "prepare.sh", "issue7-residual-norm.sh"}


@pytest.mark.parametrize("script", CALLS, ids=lambda p: p.stem)
def test_a_device_call_parses(script: Path) -> None:
    done = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("script", CALLS, ids=lambda p: p.stem)
def test_a_device_call_names_patches_and_stacks_that_exist(script: Path) -> None:
    text = script.read_text()
    named = [FOLDERS[var] / name for var, name in re.findall(r"\$(P|E|X)/([\w.+-]+\.patch)", text)]
    named += [REPO / rel for rel in re.findall(r"\$PWD/([\w./+-]+\.patch)", text)]
    assert all(path.is_file() for path in named), [str(p) for p in named if not p.is_file()]
    stacks = tomllib.loads((REPO / "patches" / "stacks.toml").read_text())
    assert set(re.findall(r"\b(stack-[\w-]+)", text)) <= set(stacks)


FIRST_CALLS = [p for p in CALLS if p.name not in ("poll.sh", "prepare.sh", "slim_tree.sh")]  # the last two run here
SESSION_CALLS = [p for p in FIRST_CALLS if "h200_session.sh" in p.read_text()]


def test_the_standalone_calls_are_the_ones_without_a_session() -> None:
    """A call that builds nothing (standalone.sh: the standalone kernel programs only) runs without h200_session.sh
    and writes straight to $OUT; issue10-chain-regs.sh (session 39's runs) is standalone.sh for one program. Every
    other first call starts a session."""
    standalone = {p.name for p in FIRST_CALLS} - {p.name for p in SESSION_CALLS}
    assert standalone == {"issue10-chain-regs.sh", "standalone.sh"}
    calls = REPO / "scripts" / "device_calls"
    text = (calls / "standalone.sh").read_text()
    assert '--json "$OUT/' in text and "nvidia-smi --query-gpu" in text  # results and clocks both come back
    assert "sources.sha256" in text  # what ran, whatever the device's copy of .git says
    assert "PROGRAMS=chunked_gdn exec bash" in (calls / "issue10-chain-regs.sh").read_text()


def test_the_standalone_call_compiles_programs_that_exist() -> None:
    text = (REPO / "scripts" / "device_calls" / "standalone.sh").read_text()
    default = re.search(r"PROGRAMS:-([\w ]+)\}", text)
    assert default is not None
    for program in default.group(1).split():
        assert (REPO / "kernels" / f"{program}_check.cu").is_file(), program


@pytest.mark.parametrize("script", SESSION_CALLS, ids=lambda p: p.stem)
def test_a_first_call_starts_the_session_and_packs_before_its_limit(script: Path) -> None:
    """A machine lost between calls keeps only what was packed (session 35): the first call packs at its end."""
    text = script.read_text()
    assert "h200_session.sh /tmp/b run" in text and text.rstrip().endswith('pack "$OUT"')


def test_slim_tree_takes_results_out_of_the_index_and_puts_it_back(tmp_path: Path) -> None:
    """With results/ tracked, a device call's tree passed its 64 MiB limit (session 37); slim_tree.sh on must leave
    results/ on disk but out of what travels, and off must restore the index exactly."""
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", "--no-checkout", str(REPO), str(clone)], check=True)
    subprocess.run(["git", "-C", str(clone), "checkout", "-q", "HEAD", "--", "results", "scripts"], check=True)
    slim = clone / "scripts" / "device_calls" / "slim_tree.sh"
    shutil.copyfile(REPO / "scripts" / "device_calls" / "slim_tree.sh", slim)  # the script as it is now, not HEAD's

    def tracked() -> list[str]:
        return subprocess.run(["git", "-C", str(clone), "ls-files"], capture_output=True, text=True).stdout.split()

    before = tracked()
    assert subprocess.run(["bash", str(slim), "on"], capture_output=True).returncode == 0
    assert not [p for p in tracked() if p.startswith("results/")] and (clone / "results").is_dir()
    travelling = subprocess.run(
        ["git", "-C", str(clone), "ls-files", "--others", "--exclude-standard"], capture_output=True, text=True
    ).stdout
    assert "results/" not in travelling  # ignored, so it does not travel as untracked files either
    assert subprocess.run(["bash", str(slim), "off"], capture_output=True).returncode == 0
    assert tracked() == before
