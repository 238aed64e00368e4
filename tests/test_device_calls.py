"""scripts/device_calls/: the device calls a session plans for the next one, committed so that a fresh checkout has
them (session 36 found the git-ignored .bundle/ copies gone). Each must parse and name only patches and stacks that
exist, or its first call on a fresh machine would lose the build time."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tarfile
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


HAND_OVER = re.compile(r"exec bash \"?scripts/device_calls/([\w.-]+\.sh)")


def test_the_standalone_calls_are_the_ones_without_a_session() -> None:
    """A call that builds nothing (standalone.sh: the standalone kernel programs only; issue11-floor-trace.sh: the
    stream check's timing program under nsys) runs without h200_session.sh; issue10-chain-regs.sh (session 39's runs)
    is standalone.sh for one program. A call may hand over to another
    (first-by-card.sh by the card, issue8-within-fixed.sh to the memcheck call with one more step): what it hands over
    to starts a session. Every other first call starts a session."""
    session_names = {p.name for p in SESSION_CALLS}
    handing = {p.name: HAND_OVER.findall(p.read_text()) for p in FIRST_CALLS if p.name not in session_names}
    handing = {name: targets for name, targets in handing.items() if targets}
    expected = {
        "first-by-card.sh": ["issue11-medium-tables.sh"],
        "issue8-within-fixed.sh": ["issue8-within-memcheck.sh"],
    }
    assert handing == expected
    assert all(target in session_names for targets in handing.values() for target in targets)
    standalone = {p.name for p in FIRST_CALLS} - session_names - set(handing)
    assert standalone == {"issue10-chain-regs.sh", "issue11-floor-trace.sh", "standalone.sh"}
    calls = REPO / "scripts" / "device_calls"
    assert "PROGRAMS=chunked_gdn exec bash" in (calls / "issue10-chain-regs.sh").read_text()


def _stub(folder: Path, name: str, body: str) -> None:
    folder.mkdir(exist_ok=True)
    (folder / name).write_text(f"#!/usr/bin/env bash\n{body}")
    (folder / name).chmod(0o755)


def test_the_standalone_call_packs_each_programs_results_and_skips_one_that_does_not_compile(tmp_path: Path) -> None:
    """standalone.sh runs each program as the session's kernels step does (host_env.sh's standalone_program), packs
    results and logs but no binaries (nor an earlier call's files) into $OUT, says what sources ran, goes on past a
    program that does not compile, and with NCU_CHAIN=1 profiles only the two chains."""
    stub, out, record = tmp_path / "stub", tmp_path / "out", tmp_path / "ncu-calls.txt"
    # the "program": writes its --json file; nvcc "compiles" chunked_gdn and fails on reader_quantize
    program = 'json=""; while (($#)); do [[ $1 == --json ]] && json=$2; shift; done; echo "{}" >"$json"\n'
    _stub(
        stub,
        "nvcc",
        'out=$(sed -n "s/.*-o \\([^ ]*\\).*/\\1/p" <<<"$*")\n'
        'if [[ $* == *reader_quantize* ]]; then echo "error: no" >&2; exit 1; fi\n'
        f"cat >\"$out\" <<'PROGRAM'\n#!/usr/bin/env bash\n{program}PROGRAM\n"
        'chmod +x "$out"\n',
    )
    _stub(stub, "ncu", f'echo "$*" >>"{record}"\n')
    out.mkdir()
    (tmp_path / "batch" / "results").mkdir(parents=True)
    (tmp_path / "batch" / "results" / "stale-standalone.json").write_text("{}")  # an earlier call on a warm machine
    env = {
        **os.environ,
        "OUT": str(out),
        "STANDALONE_BATCH": str(tmp_path / "batch"),
        "FUSEKIT_HOME": str(tmp_path / "home"),
        "NCU": str(stub / "ncu"),
        "NCU_CHAIN": "1",
        "PATH": f"{stub}:{os.environ['PATH']}",
    }
    done = subprocess.run(
        ["bash", str(REPO / "scripts" / "device_calls" / "standalone.sh")], capture_output=True, text=True, env=env
    )
    assert done.returncode == 0, done.stderr
    (packed,) = out.glob("batch-*.tgz")
    with tarfile.open(packed) as tar:
        names = {Path(n).as_posix().removeprefix("./") for n in tar.getnames()}
    assert {
        "results/chunked-gdn-standalone.json",
        "results/chunked-gdn-standalone-sabotage.json",
        "results/sources.sha256",
        "logs/nvcc-reader-quantize.log",
    } <= names
    assert "results/reader-quantize-standalone.json" not in names and "results/stale-standalone.json" not in names
    assert not [n for n in names if n.startswith("bin")]
    assert "kernels/reader_quantize_check.cu" in (tmp_path / "batch" / "results" / "sources.sha256").read_text()
    assert "regex:chunked_gdn_tc_chain_(regs|pairs)" in record.read_text().split("\n")[0]


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


@pytest.mark.parametrize(
    ("card", "order"),
    [("NVIDIA H200", "smoke race-mm eval check-mm"), ("NVIDIA H100 80GB HBM3", "smoke eval check-mm race-mm")],
    ids=["h200", "h100"],
)
@pytest.mark.parametrize("sabotage", [True, False], ids=["with-sabotage", "sabotage-0"])
def test_the_lean_medium_tables_call_builds_zy_and_f_and_orders_its_steps_by_card(
    tmp_path: Path, card: str, order: str, sabotage: bool
) -> None:
    """LEAN=1 (session 49): the full call needs about 22 minutes, more than sessions with failed starts keep. It builds
    ZY, F and F's sabotage (not M, which F holds), evaluates ZY beside F, and runs #11's race first on an H200 (never
    raced there) and the eval first elsewhere; every step packs on the way, so what ran first is what a cut keeps.
    SABOTAGE=0 (session 50) drops the sabotage build and test-backend-ops, nothing else. Session 52: W (F with the
    residency cap, the full grid and fill-or-cap) joins the race, is evaluated beside ZY, and carries the sabotage."""
    root, out, record = tmp_path / "repo", tmp_path / "out", tmp_path / "session.txt"
    (root / "scripts" / "device_calls").mkdir(parents=True)
    shutil.copy(REPO / "scripts" / "device_calls" / "issue11-medium-tables.sh", root / "scripts" / "device_calls")
    (root / "scripts" / "h200_session.sh").write_text(
        f'echo "$2|$GPU0_STEPS|$VARIANTS|$EVAL_VARIANTS|$RACE_TOKENS" >>"{record}"\n'
    )
    stub = tmp_path / "bin"
    stub.mkdir()
    (stub / "nvidia-smi").write_text(f'#!/usr/bin/env bash\necho "{card}"\n')
    (stub / "nvidia-smi").chmod(0o755)
    out.mkdir()
    env = {**os.environ, "OUT": str(out), "LEAN": "1", "PATH": f"{stub}:{os.environ['PATH']}"}
    if not sabotage:
        env["SABOTAGE"] = "0"
    done = subprocess.run(
        ["bash", str(root / "scripts" / "device_calls" / "issue11-medium-tables.sh")],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    run, *rest = record.read_text().splitlines()
    step, steps, variants, evaluated, tokens = run.split("|")
    assert (step, steps, tokens) == ("run", order if sabotage else order.replace(" check-mm", ""), "1")
    names = [[Path(part).stem for part in spec.split("+")[1:]] for spec in variants.split()]
    zy, f = (
        ["fusion-5-stream-zy-y-registers"],
        ["fusion-5-stream-zzz-medium-tables", "fusion-5-stream-zzzz-mmvq-short-tables"],
    )
    w = [*zy, *f, "fusion-5-stream-zzzzz-residency-cap", "fusion-5-stream-zzzzzz-full-grid"]
    w.append("fusion-5-stream-zzzzzzz-fill-or-cap")
    assert names == [zy, zy + f, w, [*w, "sabotage-q8-stock-order"]][: 4 if sabotage else 3]
    assert evaluated.split() == [variants.split()[0], variants.split()[2]]
    assert [line.split("|")[0] for line in rest] == ["poll", "pack"]


@pytest.mark.parametrize(
    ("fill_only", "sabotage", "expected"),
    [
        (False, False, ["cap", "full", "fill"]),
        (False, True, ["cap", "full", "fill", "fill+S"]),
        (True, True, ["fill", "fill+S"]),
        (True, False, ["fill"]),
    ],
    ids=["all", "all-sabotage", "fill-only-sabotage", "fill-only"],
)
def test_the_node_profile_call_builds_the_capped_stacks_or_fill_or_cap_alone(
    tmp_path: Path, fill_only: bool, sabotage: bool, expected: list[str]
) -> None:
    """issue11-node-profile.sh builds the capped stack, + full grid and + fill-or-cap (session 52); SABOTAGE=1 adds
    fill-or-cap under the sabotage patch, and FILL_ONLY=1 (session 53, for check-mm after the cap and the full grid
    passed test-backend-ops) keeps fill-or-cap and its sabotage build only."""
    root, out, record = tmp_path / "repo", tmp_path / "out", tmp_path / "session.txt"
    (root / "scripts" / "device_calls").mkdir(parents=True)
    shutil.copy(REPO / "scripts" / "device_calls" / "issue11-node-profile.sh", root / "scripts" / "device_calls")
    (root / "scripts" / "h200_session.sh").write_text(f'echo "$2|$GPU0_STEPS|$VARIANTS" >>"{record}"\n')
    stub = tmp_path / "bin"
    _stub(stub, "nvidia-smi", 'echo "NVIDIA H100 80GB HBM3"\n')
    out.mkdir()
    env = {**os.environ, "OUT": str(out), "PATH": f"{stub}:{os.environ['PATH']}", "STEPS": "check-mm"}
    env.update({"FILL_ONLY": "1" if fill_only else "0", "SABOTAGE": "1" if sabotage else "0"})
    script = root / "scripts" / "device_calls" / "issue11-node-profile.sh"
    done = subprocess.run(["bash", str(script)], capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    run, *rest = record.read_text().splitlines()
    step, steps, variants = run.split("|")
    assert (step, steps) == ("run", "check-mm")
    short = {
        "fusion-5-stream-zzzzz-residency-cap": "cap",
        "fusion-5-stream-zzzzzz-full-grid": "full",
        "fusion-5-stream-zzzzzzz-fill-or-cap": "fill",
        "sabotage-q8-stock-order": "S",
    }
    labels = []
    for spec in variants.split():
        parts = [Path(part).stem for part in spec.split("+")]
        assert parts[:5] == [
            "stack-1-5-stock-order-l1",
            "fusion-5-stream-zy-y-registers",
            "fusion-5-stream-zzz-medium-tables",
            "fusion-5-stream-zzzz-mmvq-short-tables",
            "fusion-5-stream-zzzzz-residency-cap",
        ]
        tail = [short[p] for p in parts[5:]]  # e.g. ["full", "fill", "S"]: labelled by its last patch, "fill+S"
        labels.append("cap" if not tail else "fill+S" if tail[-1] == "S" else tail[-1])
    assert labels == expected
    assert [line.split("|")[0] for line in rest] == ["poll", "pack"]


def test_the_floor_trace_call_profiles_each_shape_of_the_timing_program(tmp_path: Path) -> None:
    """issue11-floor-trace.sh (session 49): the timing program once per shape under nsys, each export profiled by
    fusekit profile (the real one, on a synthetic export) and packed as .sqlite.xz beside the program's own JSON, all in
    one batch-*.tgz under OUT; a shape whose run leaves no trace is named and the others go on."""
    stub, out, batch = tmp_path / "bin", tmp_path / "out", tmp_path / "batch"
    out.mkdir()
    real = shutil.which("python3")
    synth = f"import sys; sys.path.insert(0, {str(REPO)!r}); from pathlib import Path; from tests.nsys_synth import "
    synth += "LLAMA_KERNELS, decode_trace; decode_trace(list(LLAMA_KERNELS[:2]), 4).write(Path(sys.argv[1]))"
    _stub(stub, "nvidia-smi", 'echo "NVIDIA H100 80GB HBM3"\n')
    fake = tmp_path / "timing"  # the "timing program": writes its --json file, fails for the shape 1x1
    fake.write_text('#!/usr/bin/env bash\n[[ $2 == 1x1 ]] && exit 1\necho "{}" >"$6"\n')
    fake.chmod(0o755)
    _stub(
        stub,
        "nvcc",
        f'out=""; prev=""; for a in "$@"; do [[ $prev == -o ]] && out=$a; prev=$a; done\ncp "{fake}" "$out"\n',
    )
    _stub(  # nsys: profile runs the command (no report when it fails), export writes a synthetic SQLite export
        stub,
        "nsys",
        'if [[ $1 == profile ]]; then base=$7; shift 7; "$@" || exit 1; : >"$base.nsys-rep"; exit 0; fi\n'
        f'if [[ $1 == export ]]; then exec "{real}" -c "{synth}" "$6"; fi\nexit 1\n',
    )
    env = {
        **os.environ,
        "OUT": str(out),
        "FLOOR_BATCH": str(batch),
        "FLOOR_SETUP": "0",
        "FUSEKIT_HOME": str(tmp_path / "home"),
        "SHAPES": "6144x4096 1x1 4096x4096",
        "PATH": f"{stub}:{os.environ['PATH']}",
    }
    script = REPO / "scripts" / "device_calls" / "issue11-floor-trace.sh"
    done = subprocess.run(["bash", str(script)], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "floor-trace: 1x1 did not trace" in done.stdout
    (packed,) = out.glob("batch-*.tgz")
    with tarfile.open(packed) as tar:
        names = {Path(n).name for n in tar.getnames()}
    for shape in ("6144x4096", "4096x4096"):
        assert {f"floor-timing-{shape}.json", f"floor-profile-{shape}.json", f"floor-{shape}.sqlite.xz"} <= names
        profile = json.loads((batch / "results" / f"floor-profile-{shape}.json").read_text())
        assert profile["payload"]["profiles"][0]["kernels"], profile
    assert not [n for n in names if "1x1" in n or n.endswith(".sqlite")]
    assert (out / "card.txt").read_text().strip() == "NVIDIA H100 80GB HBM3"
