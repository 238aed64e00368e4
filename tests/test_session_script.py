"""scripts/h200_session.sh on a machine without a GPU: the settings its steps inherit, and the flake step with a
stand-in test-backend-ops (the real one needs CUDA)."""

from __future__ import annotations

import hashlib
import json
import lzma
import os
import re
import subprocess
import time
from pathlib import Path

import pytest

from .conftest import REPO

SCRIPT = REPO / "scripts" / "h200_session.sh"


def _run(batch: Path, step: str, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(SCRIPT), str(batch), step, *args],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=120,
    )


def _built(batch: Path, *variants: str) -> None:
    """The session's build record as the steps read it: stock and these variants built without error."""
    (batch / "results").mkdir(parents=True)
    records = [{"variant": name} for name in ("stock", *variants)]
    (batch / "results" / "builds.json").write_text(json.dumps(records))


def test_the_script_never_reassigns_variants() -> None:
    """The steps run as child processes and read VARIANTS from the environment; bash exports no arrays, so a step
    that turned it into one (session 9 did, with mapfile) left every later step without it."""
    code = [line for line in SCRIPT.read_text().splitlines() if not line.lstrip().startswith("#")]
    writes = re.compile(r"(\bVARIANTS\+?=|mapfile[^#]*\bVARIANTS\b|read\b[^#]*\bVARIANTS\b|declare[^#]*\bVARIANTS\b)")
    assert [line for line in code if writes.search(line)] == []


def test_no_script_changes_the_cards_clocks() -> None:
    """We measure the card as we find it. Nsight Compute locks the SM clock to base unless told otherwise (session 15's
    ncu step ran at 1.40 GHz before this guard), and nvidia-smi's setting flags would change it for good."""
    offending = []
    for script in sorted((REPO / "scripts").glob("*.sh")):
        for number, line in enumerate(script.read_text().splitlines(), 1):
            code = line.split("#", 1)[0]
            reads_only = "--import" in code or "--query-metrics" in code  # no kernel runs: nothing to lock
            runs_ncu = re.search(r'("\$ncu"|\bncu)\s+-', code) and not reads_only
            if runs_ncu and "--clock-control none" not in code:
                offending.append(f"{script.name}:{number}")
            if re.search(r"nvidia-smi\b[^|;&]*\s(-r|-pm|-pl|-ac|-lgc|-lmc|-rgc|-c|-mig)\b", code):
                offending.append(f"{script.name}:{number}")
    assert offending == []


def test_steps_see_the_variants_they_were_given(tmp_path: Path) -> None:
    done = _run(tmp_path / "b", "variants", {"VARIANTS": "fusion-5 fusion-1+fusion-5", "FUSEKIT_HOME": str(tmp_path)})
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["fusion-5", "fusion-1+fusion-5"]


def test_flake_step_counts_failures_per_setting(tmp_path: Path) -> None:
    home, batch = tmp_path / "home", tmp_path / "b"
    stock = home / "trees" / "stock" / "build-cuda-sm90" / "bin" / "test-backend-ops"
    stock.parent.mkdir(parents=True)
    stock.write_text('#!/usr/bin/env bash\necho "  1/1 tests passed"\n')
    stock.chmod(0o755)
    binary = home / "trees" / "fusion-5" / "build-cuda-sm90" / "bin" / "test-backend-ops"
    binary.parent.mkdir(parents=True)
    # fails unless CUDA graphs are off, and says which selection it was given
    binary.write_text(
        "#!/usr/bin/env bash\n"
        'if [[ -n "${GGML_CUDA_DISABLE_GRAPHS:-}" ]]; then echo "  1/1 tests passed"; exit 0; fi\n'
        'echo "  0/1 tests passed: $*"; exit 1\n'
    )
    binary.chmod(0o755)
    _built(batch, "fusion-5")
    # an arm runs fusion-5's build: the steps that run builds (smoke, check-mm, flake) leave it to fusion-5
    env = {"FUSEKIT_HOME": str(home), "VARIANTS": "fusion-5 fusion-5@GGML_CUDA_PDL=0", "FLAKE_RUNS": "3"}
    done = _run(batch, "flake", env)
    assert done.returncode == 0, done.stderr
    lines = (batch / "results" / "flake.txt").read_text().splitlines()
    assert len(lines) == 4  # stock first (a failure of stock's own code shows as such), then the variants
    assert lines[0].startswith("stock default op=MUL_MAT_ID ") and "runs=3 failed=0" in lines[0]
    assert lines[1].startswith("stock GGML_CUDA_DISABLE_GRAPHS=1 ") and "runs=3 failed=0" in lines[1]
    assert lines[2].startswith("fusion-5 default op=MUL_MAT_ID params=type_a=q4_0,") and "runs=3 failed=3" in lines[2]
    assert lines[3].startswith("fusion-5 GGML_CUDA_DISABLE_GRAPHS=1 ") and "runs=3 failed=0" in lines[3]
    kept = sorted(p.name for p in (batch / "logs").glob("flake-*.log"))
    assert kept == [f"flake-fusion-5-default-{run}.log" for run in (1, 2, 3)]
    assert "-o MUL_MAT_ID -p type_a=q4_0," in (batch / "logs" / "flake-fusion-5-default-1.log").read_text()


def test_flake_settings_choose_the_environments(tmp_path: Path) -> None:
    """Session 31: the one-value case is fusion-5's own, so stock's build has no such case (EMPTY); FLAKE_SETTINGS
    runs a variant's build under GGML_CUDA_DISABLE_FUSION=1 instead (stock's arithmetic)."""
    home, batch = tmp_path / "home", tmp_path / "b"
    _fake_binary(home, "stock", 'echo "  0/0 tests passed"\n')
    _fake_binary(
        home,
        "fusion-5",
        'if [[ -n "${GGML_CUDA_DISABLE_FUSION:-}" ]]; then echo "  1/1 tests passed"; exit 0; fi\n'
        'echo "  0/1 tests passed"; exit 1\n',
    )
    _built(batch, "fusion-5")
    env = {
        "FUSEKIT_HOME": str(home),
        "VARIANTS": "fusion-5",
        "FLAKE_RUNS": "2",
        "FLAKE_SETTINGS": "default GGML_CUDA_DISABLE_FUSION=1",
    }
    done = _run(batch, "flake", env)
    assert done.returncode == 0, done.stderr
    lines = (batch / "results" / "flake.txt").read_text().splitlines()
    assert [line.split(" op=")[0] for line in lines] == [
        "stock default",
        "stock GGML_CUDA_DISABLE_FUSION=1",
        "fusion-5 default",
        "fusion-5 GGML_CUDA_DISABLE_FUSION=1",
    ]
    assert "EMPTY" in lines[0] and "failed=2" in lines[2] and "failed=0 last: 1/1" in lines[3]


def test_ncu_kernel_runs_each_variant_and_arm_under_its_environment(tmp_path: Path) -> None:
    """Session 31's question for the next: does the weight streams' L2 policy decide what flash attention finds in L2?
    ncu-kernel profiles one decode kernel in stock and every variant and arm (the arm under its environment), with
    L2 left as the kernels before left it and the clocks untouched, and keeps each raw page."""
    home, batch, calls = tmp_path / "home", tmp_path / "b", tmp_path / "ncu-calls.txt"
    for variant in ("stock", "fusion-5"):
        _fake_binary(home, variant, "exit 0\n", tool="llama-bench")
    raw = '"Kernel Name","gpu__time_duration.sum"\n"","usecond"\n"flash_attn_ext_f16(x)","7.2"\n'
    _stub_bin(
        tmp_path / "stub",
        "ncu",
        f"if [[ \"$1\" == --import ]]; then printf '{raw}'; exit 0; fi\n"
        'if [[ "$1" == --query-metrics ]]; then\n'
        '  printf "Device NVIDIA H200 (GH100)\\n----\\nMetric Name   Metric Description\\n"\n'
        '  printf "lts__t_sectors_srcunit_ltcfabric   # of LTS sectors from unit LTCFABRIC\\n"\n'
        '  printf "dram__cycles_active   # of cycles where DRAM was active\\n"; exit 0\n'
        "fi\n"
        f'echo "$*" >>"{calls}"\n',
    )
    _built(batch, "fusion-5")
    env = {
        "FUSEKIT_HOME": str(home),
        "VARIANTS": "fusion-5 fusion-5@GGML_CUDA_PDL=0",
        "NCU": str(tmp_path / "stub" / "ncu"),
        "NCU_KERNEL_METRICS": "lts__t_sectors_srcunit_ltcfabric.sum,dram__cycles_active.avg,lts__no_such_metric.sum",
    }
    done = _run(batch, "ncu-kernel", env)
    assert done.returncode == 0, done.stderr
    stock, plain, arm = calls.read_text().splitlines()
    for line in (stock, plain, arm):
        assert "--cache-control none" in line and "--clock-control none" in line
        assert "-k regex:flash_attn_ext_f16" in line and "lts__t_sectors_srcunit_tex_op_read_lookup_hit.sum" in line
        assert "smsp__inst_executed.sum,lts__t_sectors_srcunit_ltcfabric.sum,dram__cycles_active.avg " in line
    assert "/trees/stock/build-cuda-sm90/bin/llama-bench -m" in stock
    assert "env " + str(home / "trees" / "fusion-5") in plain
    assert "env GGML_CUDA_PDL=0 " + str(home / "trees" / "fusion-5") in arm
    pages = sorted(p.name for p in (batch / "results").glob("ncu-kernel-*.csv"))
    assert pages == ["ncu-kernel-fusion-5.csv", "ncu-kernel-fusion-5@GGML_CUDA_PDL=0.csv", "ncu-kernel-stock.csv"]
    assert done.stdout.count(" 1 launches -> results/ncu-kernel-") == 3
    # a name this ncu does not list would fail every run: dropped with one line per run, the others kept
    assert "lts__no_such_metric" not in calls.read_text()
    assert done.stderr.count("ncu-kernel: dropped metric lts__no_such_metric.sum") == 3


def test_profile_of_an_arm_of_a_long_label_gets_a_trace_folder(tmp_path: Path) -> None:
    """The profile step's trace folder is named by the spec's label; an arm with two settings on a long label passes
    255 bytes (session 31's failures were the files inside the folder, fixed in evals/profile/record.py), so the folder
    goes through fit_name, the label stays in --variant."""
    stub, record, batch, home = tmp_path / "stub", tmp_path / "fusekit-args.txt", tmp_path / "b", tmp_path / "home"
    real = subprocess.run(["bash", "-c", "command -v python3"], capture_output=True, text=True).stdout.strip()
    _stub_bin(
        stub,
        "python3",
        f'if [[ "$*" == *"from fusekit.cli import main"* ]]; then shift 2; echo "$*" >>"{record}"; exit 0; fi\n'
        f'exec "{real}" "$@"\n',
    )
    patches = [tmp_path / f"{letter * 75}.patch" for letter in "xyz"]
    for patch in patches:
        patch.write_text("--- a/README.md\n+++ b/README.md\n@@ -1 +1 @@\n-a\n+b\n")
    arm = "@GGML_CUDA_PDL=0,GGML_CUDA_DISABLE_GRAPHS=1"
    spec = "+".join(["fusion-5", *map(str, patches)]) + arm
    label = "+".join(["fusion-5", *(letter * 75 for letter in "xyz")])
    assert len(label.encode()) < 240 and len((label + arm).encode()) > 255
    _built(batch, label)
    env = {"FUSEKIT_HOME": str(home), "VARIANTS": spec, "PATH": f"{stub}:{os.environ['PATH']}"}
    done = _run(batch, "profile-a", env)
    assert done.returncode == 0, done.stderr
    args = record.read_text().split()
    assert args[:3] == ["profile", "--variant", spec]
    out = Path(args[args.index("--out") + 1])
    assert out.is_dir() and out.parent == batch / "traces" and len(out.name.encode()) <= 240
    assert out.name.endswith(arm)


def test_flake_logs_of_a_long_stack_label_fit_a_file_name(tmp_path: Path) -> None:
    """Session 11: the stack with every experiment has a 229-byte label, and 'flake-LABEL-GGML_CUDA_DISABLE_GRAPHS=1-N
    .log' passed the 255 bytes of a file name, so every run 'failed' without running; the logs now fall back to a
    hash of the name followed by its end."""
    home, batch = tmp_path / "home", tmp_path / "b"
    patches = [tmp_path / f"{letter * 75}.patch" for letter in "xyz"]
    for patch in patches:
        patch.write_text("--- a/README.md\n+++ b/README.md\n@@ -1 +1 @@\n-a\n+b\n")
    spec = "+".join(["fusion-5", *map(str, patches)])
    label = "+".join(["fusion-5", *(letter * 75 for letter in "xyz")])
    for variant in ("stock", label):
        binary = home / "trees" / variant / "build-cuda-sm90" / "bin" / "test-backend-ops"
        binary.parent.mkdir(parents=True)
        binary.write_text('#!/usr/bin/env bash\necho "  0/1 tests passed"; exit 1\n')
        binary.chmod(0o755)
    _built(batch, label)
    done = _run(batch, "flake", {"FUSEKIT_HOME": str(home), "VARIANTS": spec, "FLAKE_RUNS": "2"})
    assert done.returncode == 0, done.stderr
    assert "too long" not in done.stderr
    lines = (batch / "results" / "flake.txt").read_text().splitlines()
    assert [line.split(" op=")[0] for line in lines[2:]] == [f"{label} default", f"{label} GGML_CUDA_DISABLE_GRAPHS=1"]
    assert all("failed=2 last: 0/1 tests passed" in line for line in lines)
    kept = sorted(p.name for p in (batch / "logs").glob("*.log"))
    assert len(kept) == 8 and all(len(name) <= 255 for name in kept)
    assert sum(name.endswith("zzz-GGML_CUDA_DISABLE_GRAPHS=1-2.log") for name in kept) == 1


def _fake_binary(home: Path, variant: str, body: str, tool: str = "test-backend-ops") -> None:
    binary = home / "trees" / variant / "build-cuda-sm90" / "bin" / tool
    binary.parent.mkdir(parents=True, exist_ok=True)
    binary.write_text("#!/usr/bin/env bash\n" + body)
    binary.chmod(0o755)


@pytest.mark.parametrize("sabotaged", [False, True], ids=["experiment", "with-its-sabotage"])
def test_check_mm_expects_an_experiments_checks_to_fail_under_a_sabotage_patch(tmp_path: Path, sabotaged: bool) -> None:
    """An experiment's own ops (its "Checks:" line) must pass, and must fail when the variant holds a sabotage patch
    (which then runs nothing else); the matrix-product ops and CHECK_EXTRA_OPS run once each, also when an
    experiment names one of them again."""
    home, batch = tmp_path / "home", tmp_path / "b"
    diff = "--- a/README.md\n+++ b/README.md\n@@ -1 +1 @@\n-a\n+b\n"
    experiment = tmp_path / "fusion-5-thing.patch"
    experiment.write_text("Checks: THING MUL_MAT_ID\n" + diff)
    sabotage = tmp_path / "sabotage-thing.patch"
    sabotage.write_text(diff)
    spec = f"fusion-5+{experiment}" + (f"+{sabotage}" if sabotaged else "")
    label = "fusion-5+fusion-5-thing" + ("+sabotage-thing" if sabotaged else "")
    # THING's cases fail on the sabotaged build only; everything else passes
    thing = 'if [[ " $* " == *" -o THING "* ]]; then echo "  0/1 tests passed"; exit 1; fi\n' if sabotaged else ""
    _fake_binary(home, label, thing + 'echo "  1/1 tests passed"\n')
    _built(batch, label)
    env = {"FUSEKIT_HOME": str(home), "VARIANTS": spec, "CHECK_EXTRA_OPS": "EXTRA"}
    done = _run(batch, "check-mm", env)
    assert done.returncode == 0, done.stderr
    checks = [line.split(" :: ")[0] for line in (batch / "results" / "checks.txt").read_text().splitlines()]
    expect = "fail rc=1 failed_lines=0" if sabotaged else "pass rc=0 failed_lines=0"
    base = [
        f"mm-{label}-MUL_MAT expect=pass rc=0 failed_lines=0 verdict=ok",
        f"mm-{label}-MUL_MAT_ID expect=pass rc=0 failed_lines=0 verdict=ok",
        f"mm-{label}-MUL_MAT_VEC_FUSION expect=pass rc=0 failed_lines=0 verdict=ok",
        f"mm-{label}-EXTRA expect=pass rc=0 failed_lines=0 verdict=ok",
    ]
    # a sabotaged build runs only its experiments' own checks
    assert checks == [*([] if sabotaged else base), f"mm-{label}-THING expect={expect} verdict=ok"]


def test_an_experiments_own_sabotage_fails_its_checks_only(tmp_path: Path) -> None:
    """A sabotage patch that an experiment of the variant names as its own ("Sabotage:") must fail that experiment's
    Checks, and the other experiments' Checks in the variant must still pass; a sabotage no experiment names (a
    fusion's) keeps the rule above: every experiment's Checks must fail."""
    home, batch = tmp_path / "home", tmp_path / "b"
    diff = "--- a/README.md\n+++ b/README.md\n@@ -1 +1 @@\n-a\n+b\n"
    sabotage = tmp_path / "sabotage-thing.patch"
    sabotage.write_text(diff)
    base = tmp_path / "fusion-1-base.patch"
    base.write_text("Checks: BASE\n" + diff)
    thing = tmp_path / "fusion-1-thing.patch"
    thing.write_text(f"Checks: THING\nSabotage: tests/patches/{sabotage.name}\n" + diff)
    label = "fusion-1+fusion-1-base+fusion-1-thing+sabotage-thing"
    _fake_binary(home, label, 'if [[ " $* " == *" -o THING "* ]]; then exit 1; fi\necho "  1/1 tests passed"\n')
    _built(batch, label)
    env = {"FUSEKIT_HOME": str(home), "VARIANTS": f"fusion-1+{base}+{thing}+{sabotage}"}
    done = _run(batch, "check-mm", env)
    assert done.returncode == 0, done.stderr
    checks = [line.split(" rc=")[0] for line in (batch / "results" / "checks.txt").read_text().splitlines()]
    assert checks == [f"mm-{label}-BASE expect=pass", f"mm-{label}-THING expect=fail"]
    lines = (batch / "results" / "checks.txt").read_text().splitlines()
    assert all(" verdict=ok " in line for line in lines), lines


def test_a_sabotaged_variant_is_never_timed(tmp_path: Path) -> None:
    functions = f'source <(sed -n "/^sabotaged() {{/,/^}}/p; /^timed() {{/,/^}}/p" {SCRIPT})'
    done = subprocess.run(
        ["bash", "-c", f"{functions}; timed a b+/x/sabotage-y.patch c+/z/q.patch"], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["a", "c+/z/q.patch"]


def test_eval2_without_its_model_says_so_after_waiting(tmp_path: Path) -> None:
    """SECOND_MODEL names a model joined from parts carried over later calls; eval2 waits SECOND_WAIT seconds."""
    missing = tmp_path / "smollm2.gguf"
    env = {"FUSEKIT_HOME": str(tmp_path), "VARIANTS": "fusion-5", "SECOND_MODEL": str(missing), "SECOND_WAIT": "5"}
    done = _run(tmp_path / "b", "eval2", env)
    assert done.returncode == 1
    assert f"eval2: no second model {missing} (waited 5 s)" in done.stdout + done.stderr
    assert "syntax error" not in done.stderr


def test_check_base_ops_replaces_the_matrix_product_ops(tmp_path: Path) -> None:
    home, batch = tmp_path / "home", tmp_path / "b"
    _fake_binary(home, "fusion-5", 'echo "  1/1 tests passed"\n')
    _built(batch, "fusion-5")
    env = {"FUSEKIT_HOME": str(home), "VARIANTS": "fusion-5", "CHECK_BASE_OPS": "MUL_MAT_VEC_FUSION"}
    done = _run(batch, "check-mm", env)
    assert done.returncode == 0, done.stderr
    checks = [line.split(" expect=")[0] for line in (batch / "results" / "checks.txt").read_text().splitlines()]
    assert checks == ["mm-fusion-5-MUL_MAT_VEC_FUSION"]


def test_smoke_keeps_a_variant_with_nan_log_probs_out_of_the_evals(tmp_path: Path) -> None:
    """Session 12: a stack whose llama-bench run was fine read NaN log-probs, and its eval stopped every variant after
    it. The smoke step now runs one chunk of perplexity at one token per batch; a variant without a finite estimate
    fails it (and ok_variants drops it). A sabotaged build computes wrong values by design: only its run counts."""
    home, batch = tmp_path / "home", tmp_path / "b"
    sabotage = REPO / "tests" / "patches" / "sabotage-gdn-chains.patch"
    labels = {"stock": "12.5", "fusion-1": "12.5", "fusion-5": "nan", "fusion-2+sabotage-gdn-chains": "nan"}
    for label, ppl in labels.items():
        _fake_binary(home, label, 'echo "build,model"\necho "stock,x"\n', tool="llama-bench")
        unexpected = "echo 'E Unexpected negative standard deviation of log(prob)'\n" if ppl == "nan" else ""
        body = f"{unexpected}echo 'Final estimate: PPL = {ppl} +/- 0.5'\n" if ppl != "nan" else unexpected
        _fake_binary(home, label, body, tool="llama-perplexity")
    (batch / "results").mkdir(parents=True)
    records = ", ".join(f'{{"variant": "{label}"}}' for label in labels)
    (batch / "results" / "builds.json").write_text(f"[{records}]")
    env = {"FUSEKIT_HOME": str(home), "VARIANTS": f"fusion-1 fusion-5 fusion-2+{sabotage}"}
    done = _run(batch, "smoke", env)
    assert done.returncode == 0, done.stderr
    verdicts = {line.split()[0]: line for line in (batch / "results" / "smoke.txt").read_text().splitlines()}
    assert set(verdicts) == set(labels)
    assert verdicts["stock"].split()[1] == "ok" and 'values="ppl 12.5"' in verdicts["stock"]
    assert verdicts["fusion-1"].split()[1] == "ok"
    assert verdicts["fusion-5"].split()[1] == "fail"
    assert "log-probs not finite: no estimate (Unexpected negative standard deviation" in verdicts["fusion-5"]
    assert verdicts["fusion-2+sabotage-gdn-chains"].split()[1] == "ok"
    assert 'values="not checked"' in verdicts["fusion-2+sabotage-gdn-chains"]
    # ok_variants drops a variant whose smoke line holds " fail " (the evals, profiles and checks take ok_variants)
    assert " fail " in verdicts["fusion-5"] and " fail " not in verdicts["fusion-2+sabotage-gdn-chains"]


def test_check_own_runs_a_fusions_checks_and_expects_its_sabotage_to_fail(tmp_path: Path) -> None:
    """check-own runs the FOCUS fusions' own checks (their ops, fusion disabled, the sabotage build failing) without
    the stack's: the next session checks the promoted fusion-3's sabotage on its own."""
    home, batch = tmp_path / "home", tmp_path / "b"
    _fake_binary(home, "fusion-3", 'echo "  1/1 tests passed"\n')
    _fake_binary(home, "fusion-3+sabotage-moe-router", 'echo "  0/1 tests passed"; exit 1\n')
    (batch / "results").mkdir(parents=True)
    builds = '[{"variant": "stock"}, {"variant": "fusion-3"}, {"variant": "fusion-3+sabotage-moe-router"}]'
    (batch / "results" / "builds.json").write_text(builds)
    env = {"FUSEKIT_HOME": str(home), "FOCUS": "3", "VARIANTS": "fusion-3"}
    done = _run(batch, "check-own", env)
    assert done.returncode == 0, done.stderr
    verdicts = {
        line.split(" expect=")[0]: line.split(" :: ")[0].split()[1:]
        for line in (batch / "results" / "checks.txt").read_text().splitlines()
    }
    assert verdicts["fusion-3-FUSEKIT_MOE_ROUTER"] == ["expect=pass", "rc=0", "failed_lines=0", "verdict=ok"]
    assert verdicts["fusion-3-disabled"][0] == "expect=pass" and verdicts["fusion-3-disabled"][-1] == "verdict=ok"
    assert (
        verdicts["fusion-3-sabotage-router"][0] == "expect=fail"
        and verdicts["fusion-3-sabotage-router"][-1] == "verdict=ok"
    )
    assert not any(name.startswith(("stack-", "mm-")) for name in verdicts)


def test_eval_decode_runs_decode_only_in_many_short_rounds(tmp_path: Path) -> None:
    """Session 15: one variant's decode median moved 3-5% between processes, so eval-decode spends its time on rounds
    (processes), with no prompts, no quality runs and no text; DECODE_ROUNDS / DECODE_REPS override 15 / 3."""
    stub, record = tmp_path / "stub", tmp_path / "fusekit-args.txt"
    stub.mkdir()
    real = subprocess.run(["bash", "-c", "command -v python3"], capture_output=True, text=True).stdout.strip()
    (stub / "python3").write_text(
        "#!/usr/bin/env bash\n"
        f'if [[ "$*" == *"from fusekit.cli import main"* ]]; then shift 2; echo "$*" >>"{record}"; exit 0; fi\n'
        f'exec "{real}" "$@"\n'
    )
    (stub / "python3").chmod(0o755)
    batch = tmp_path / "b"
    _built(batch, "fusion-5")
    env = {"FUSEKIT_HOME": str(tmp_path), "VARIANTS": "fusion-5", "PATH": f"{stub}:{os.environ['PATH']}"}
    for extra, rounds, reps in (({}, "15", "3"), ({"DECODE_ROUNDS": "20", "DECODE_REPS": "2"}, "20", "2")):
        record.unlink(missing_ok=True)
        done = _run(batch, "eval-decode", {**env, **extra, "ROUNDS": "5", "PROMPTS": "512,4096"})
        assert done.returncode == 0, done.stderr
        args = record.read_text().split()
        assert args[:2] == ["eval", "fusion-5"]
        assert args[args.index("-p") + 1] == "0" and args[args.index("--rounds") + 1] == rounds
        assert args[args.index("-r") + 1] == reps and "--no-text" in args
        assert not {"--ppl", "--kl"} & set(args)
    # EVAL_VARIANTS: the eval times a subset of VARIANTS (session 31: the arms profiled, not timed again)
    record.unlink()
    both = {**env, "VARIANTS": "fusion-5 fusion-5@GGML_CUDA_PDL=0"}
    for extra, timed in (({}, ["fusion-5", "fusion-5@GGML_CUDA_PDL=0"]), ({"EVAL_VARIANTS": "fusion-5"}, ["fusion-5"])):
        record.unlink(missing_ok=True)
        assert _run(batch, "eval-decode", {**both, **extra}).returncode == 0
        args = record.read_text().split()
        assert args[1 : args.index("--against")] == timed


def test_eval_quality_runs_the_values_at_one_token_without_timings(tmp_path: Path) -> None:
    """Session 46: a fix checked for its values (the fold's use after free) needs perplexity, KL against stock and text
    at one token a batch, not tok/s: eval-quality passes --ppl --kl --ppl-ubatch 1 --no-speed for the evaluated
    variants and writes eval-quality-35b.json; the step fails when the eval does."""
    stub, record = tmp_path / "stub", tmp_path / "fusekit-args.txt"
    real = subprocess.run(["bash", "-c", "command -v python3"], capture_output=True, text=True).stdout.strip()
    _stub_bin(
        stub,
        "python3",
        f'if [[ "$*" == *"from fusekit.cli import main"* ]]; then shift 2; echo "$*" >>"{record}"; '
        'exit "${STUB_EVAL_RC:-0}"; fi\n'
        f'exec "{real}" "$@"\n',
    )
    batch = tmp_path / "b"
    _built(batch, "fusion-2")
    env = {"FUSEKIT_HOME": str(tmp_path), "VARIANTS": "fusion-2", "PATH": f"{stub}:{os.environ['PATH']}"}
    done = _run(batch, "eval-quality", env)
    assert done.returncode == 0, done.stderr
    args = record.read_text().split()
    assert args[:2] == ["eval", "fusion-2"] and args[args.index("--against") + 1] == "stock"
    assert {"--ppl", "--kl", "--no-speed"} <= set(args) and args[args.index("--ppl-ubatch") + 1] == "1"
    assert args[args.index("--json") + 1] == str(batch / "results" / "eval-quality-35b.json")
    assert _run(batch, "eval-quality", {**env, "STUB_EVAL_RC": "1"}).returncode != 0


def _stub_bin(stub: Path, name: str, body: str) -> None:
    stub.mkdir(exist_ok=True)
    (stub / name).write_text(f"#!/usr/bin/env bash\n{body}")
    (stub / name).chmod(0o755)


def test_kernels_step_times_fla_from_the_bundles_wheels(tmp_path: Path) -> None:
    """Issue #10 wants fla's chunked kernel timed on the same host in the same run: the kernels step installs fla-core
    and einops from the bundle into a private folder and runs scripts/fla_gdn_timing.py with it on the path."""
    stub, record, batch, bundle = tmp_path / "stub", tmp_path / "calls.txt", tmp_path / "b", tmp_path / "bundle"
    real = subprocess.run(["bash", "-c", "command -v python3"], capture_output=True, text=True).stdout.strip()
    _stub_bin(stub, "nvcc", "exit 1\n")  # the standalone programs need CUDA: skipped, as on a host without nvcc
    _stub_bin(
        stub,
        "python3",
        f'if [[ "$1" == -m || "$1" == *fla_gdn_timing.py ]]; then\n'
        f'  echo "PYTHONPATH=$PYTHONPATH $*" >>"{record}"; exit 0\n'
        f'fi\nexec "{real}" "$@"\n',
    )
    (bundle / "whl").mkdir(parents=True)
    for wheel in ("fla_core-0.6.0-py3-none-any.whl", "einops-0.8.2-py3-none-any.whl"):
        (bundle / "whl" / wheel).write_bytes(b"")
    (batch / "bin").mkdir(parents=True)
    env = {"FUSEKIT_HOME": str(tmp_path), "NCU": "/none", "BUNDLE": str(bundle), "PATH": f"{stub}:{os.environ['PATH']}"}
    done = _run(batch, "kernels", env)
    assert done.returncode == 0, done.stderr
    install, timing = record.read_text().splitlines()
    assert "-m pip install" in install and "--no-index" in install and f"--target {batch}/fla-site" in install
    assert "fla_core-0.6.0" in install and "einops-0.8.2" in install
    assert timing.startswith(f"PYTHONPATH={batch}/fla-site") and "scripts/fla_gdn_timing.py" in timing
    assert f"--json {batch}/results/fla-gdn-reference.json" in timing

    record.unlink()
    (bundle / "whl" / "einops-0.8.2-py3-none-any.whl").unlink()
    done = _run(batch, "kernels", env)
    assert done.returncode == 0 and not record.exists()
    assert "lacks the fla-core or einops wheel" in (batch / "logs" / "fla-gdn.log").read_text()


def test_an_arm_is_evaluated_when_its_variant_was_built_and_a_missing_build_is_named(tmp_path: Path) -> None:
    """Session 17's decode-spread run asked for stock@GGML_CUDA_DISABLE_GRAPHS=1; ok_variants took the whole arm for a
    variant name, found no such build and dropped it without a word, so the eval timed stock against itself."""
    batch = tmp_path / "b"
    _built(batch, "fusion-1")
    (batch / "results" / "smoke.txt").write_text("stock ok rc=0\nfusion-1 ok rc=0\n")
    env = {"FUSEKIT_HOME": str(tmp_path / "home"), "VARIANTS": "stock@GGML_CUDA_DISABLE_GRAPHS=1 fusion-1 fusion-5"}
    done = _run(batch, "evaluated", env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["stock@GGML_CUDA_DISABLE_GRAPHS=1", "fusion-1"]
    assert "left out fusion-5: fusion-5 was not built or failed its smoke run" in done.stderr


def test_poll_on_a_fresh_host_says_so_at_once(tmp_path: Path) -> None:
    """Session 27 lost 219 s of device time: its second call reached a fresh machine, and poll waited out the whole
    limit for a session that was never started there."""
    polled = _run(tmp_path / "b", "poll", {}, "300")
    assert polled.returncode == 3 and "no session was started" in polled.stdout, polled.stdout + polled.stderr


def test_poll_stops_when_the_session_process_is_gone(tmp_path: Path) -> None:
    """A session killed without its EXIT trap (no session.done) ends the wait too, and poll names it."""
    logs = tmp_path / "b" / "logs"
    logs.mkdir(parents=True)
    gone = subprocess.run(["bash", "-c", "echo $$"], capture_output=True, text=True).stdout.strip()
    (logs / "session.pid").write_text(gone + "\n")
    (logs / "session.log").write_text("== setup\n")
    polled = _run(tmp_path / "b", "poll", {}, "300")
    assert polled.returncode == 0 and f"SESSION GONE: its process {gone}" in polled.stdout, polled.stdout


def test_kernel_programs_none_compiles_no_program(tmp_path: Path) -> None:
    """Sessions 31 and 32 passed KERNEL_PROGRAMS=none to skip the standalone programs, and the step compiled a program
    named none; with none it must call nvcc not at all, and with a name it must compile that program."""
    stub, record, batch = tmp_path / "stub", tmp_path / "nvcc-calls.txt", tmp_path / "b"
    _stub_bin(stub, "nvcc", f'echo "$*" >>"{record}"; exit 1\n')
    (batch / "bin").mkdir(parents=True)
    env = {"FUSEKIT_HOME": str(tmp_path), "NCU": "/none", "FLA_REFERENCE": "0", "PATH": f"{stub}:{os.environ['PATH']}"}
    done = _run(batch, "kernels", {**env, "KERNEL_PROGRAMS": "none"})
    assert done.returncode == 0, done.stderr
    assert not record.exists() and not (batch / "logs" / "nvcc-none.log").exists()

    done = _run(batch, "kernels", {**env, "KERNEL_PROGRAMS": "conv_window"})
    assert done.returncode == 0, done.stderr
    assert "kernels/conv_window_check.cu" in record.read_text()


def test_kernels_step_stops_a_program_that_hangs_and_skips_ncu_on_request(tmp_path: Path) -> None:
    """The session waits for the kernels step after the builds: a kernel that hangs on its first GPU run (session 38
    put an untried chain into the #7 call's builds) is stopped after KERNEL_TIMEOUT seconds, and KERNELS_NCU=0 keeps
    Nsight Compute's pass (up to 420 s) out of it."""
    stub, batch, record = tmp_path / "stub", tmp_path / "b", tmp_path / "ncu-calls.txt"
    # nvcc "builds" a program that never ends
    never_ends = (
        'out=$(sed -n "s/.*-o \\([^ ]*\\).*/\\1/p" <<<"$*")\n'
        'printf "#!/usr/bin/env bash\\nsleep 600\\n" >"$out"\n'
        'chmod +x "$out"\n'
    )
    _stub_bin(stub, "nvcc", never_ends)
    _stub_bin(stub, "ncu", f'echo "$*" >>"{record}"\n')
    (batch / "bin").mkdir(parents=True)
    env = {
        "FUSEKIT_HOME": str(tmp_path),
        "NCU": str(stub / "ncu"),
        "FLA_REFERENCE": "0",
        "KERNEL_PROGRAMS": "chunked_gdn",
        "KERNEL_TIMEOUT": "1",
        "KERNELS_NCU": "0",
        "PATH": f"{stub}:{os.environ['PATH']}",
    }
    started = time.monotonic()
    done = _run(batch, "kernels", env)
    assert done.returncode == 0, done.stderr
    assert time.monotonic() - started < 60
    assert (batch / "bin" / "chunked_gdn_check").exists()
    assert not record.exists()

    done = _run(batch, "kernels", {**env, "KERNELS_NCU": "1", "NCU_TIMEOUT": "5"})
    assert done.returncode == 0, done.stderr
    assert "chunked_gdn_check" in record.read_text()


def _experiment_and_sabotage(folder: Path, name: str = "fusion-5-thing") -> tuple[Path, Path]:
    """A fusion-5 experiment patch ``name`` and a sabotage patch (both a one-line README change) in ``folder``."""
    diff = "--- a/README.md\n+++ b/README.md\n@@ -1 +1 @@\n-a\n+b\n"
    experiment, sabotage = folder / f"{name}.patch", folder / "sabotage-thing.patch"
    experiment.write_text(diff)
    sabotage.write_text(diff)
    return experiment, sabotage


@pytest.mark.parametrize("sabotage_fails", [True, False], ids=["sabotage-caught", "sabotage-missed"])
def test_race_mm_races_the_variants_against_stock_and_judges_the_sabotage_by_its_checks(
    tmp_path: Path, sabotage_fails: bool
) -> None:
    """Issue #11's criterion is measured through the bridge: race-mm puts stock and every unsabotaged variant in one
    race (named by spec, patch files by stem), and a sabotaged build's bridge check must show failed checks; its
    verdict comes from the result, so a bridge that did not run never counts as a caught sabotage."""
    home, batch, stub, record = tmp_path / "home", tmp_path / "b", tmp_path / "stub", tmp_path / "bridge-calls.txt"
    real = subprocess.run(["bash", "-c", "command -v python3"], capture_output=True, text=True).stdout.strip()
    experiment, sabotage = _experiment_and_sabotage(tmp_path)
    labels = ["fusion-5", "fusion-5+fusion-5-thing", "fusion-5+fusion-5-thing+sabotage-thing"]
    for label in ["stock", *labels]:
        _fake_binary(home, label, "exit 0\n", tool="llama-bench")
    # a healthy build fails the shifted-ids check (expected), so only a check that should pass and fails counts
    check = {"sabotaged": False, "type_name": "q8_0"}
    shifted_ids = {**check, "passed": False, "expect_fail": True}
    checks = json.dumps({"payload": {"checks": [shifted_ids, {**check, "passed": not sabotage_fails}]}})
    _stub_bin(
        stub,
        "python3",
        'if [[ "$1 $2" == "-m ggml_bridge" ]]; then\n'
        f'  echo "$*" >>"{record}"\n'
        '  if [[ " $* " == *" --check "* ]]; then\n'
        '    out=""; prev=""; for a in "$@"; do [[ $prev == --out ]] && out=$a; prev=$a; done\n'
        f"    echo '{checks}' >\"$out\"; exit 1\n"
        "  fi\n"
        "  exit 0\n"
        f'fi\nexec "{real}" "$@"\n',
    )
    (batch / "results").mkdir(parents=True)
    (batch / "results" / "builds.json").write_text(json.dumps([{"variant": v} for v in ["stock", *labels]]))
    specs = f"fusion-5 fusion-5+{experiment} fusion-5+{experiment}+{sabotage}"
    env = {"FUSEKIT_HOME": str(home), "VARIANTS": specs, "PATH": f"{stub}:{os.environ['PATH']}"}
    done = _run(batch, "race-mm", env)
    assert done.returncode == 0, done.stderr
    race, check = record.read_text().splitlines()
    trees = home / "trees"
    assert f"--lib-dir stock={trees}/stock/build-cuda-sm90/bin --lib-dir fusion-5={trees}/fusion-5/build" in race
    assert f"--lib-dir fusion-5+fusion-5-thing={trees}/fusion-5+fusion-5-thing/build-cuda-sm90/bin --control" in race
    assert "sabotage" not in race and "--tokens 1,2,4,8 --check-tokens 1,2,3,8,64" in race
    # stock raced twice (the A/A control), each contender in RACE_PROCESSES processes (default 1)
    assert "/bin --control --processes 1 --backend CUDA0" in race
    assert " --control " not in check and " --processes " not in check
    assert (
        check.startswith("-m ggml_bridge mulmat --lib-dir fusion-5+fusion-5-thing+sabotage-thing=")
        and " --check " in check
    )
    verdict = (batch / "results" / "checks.txt").read_text()
    if sabotage_fails:
        assert (
            "race-mm fusion-5+fusion-5-thing+sabotage-thing: 1 of 2 checks went wrong: caught, as a sabotaged"
            in verdict
        )
    else:
        assert "0 of 2 checks went wrong: PASSED, and a sabotaged build must fail" in verdict

    # a bridge that did not run at all leaves no result: never a caught sabotage
    (batch / "results" / "checks.txt").unlink()
    _stub_bin(stub, "python3", f'if [[ "$1 $2" == "-m ggml_bridge" ]]; then exit 1; fi\nexec "{real}" "$@"\n')
    for stale in (batch / "results").glob("race-mm-sabotage-*.json"):
        stale.unlink()
    done = _run(batch, "race-mm", env)
    assert done.returncode == 0, done.stderr
    assert "NO RESULT: the bridge did not run" in (batch / "results" / "checks.txt").read_text()


def _fitted(label: str, most: int) -> str:
    """host_env.sh's fit_name: the label, or past ``most`` bytes a hash of it and its last 60 bytes."""
    if len(label) <= most:
        return label
    return f"{hashlib.sha256(label.encode()).hexdigest()[:12]}-{label[-60:]}"


@pytest.mark.parametrize(
    ("patch", "settings"),
    [
        ("fusion-5-thing", None),
        ("fusion-5-" + "long-" * 40 + "thing", None),
        ("fusion-5-thing", "default GGML_CUDA_PDL=0"),
    ],
    ids=["short", "long", "pdl-off"],
)
def test_node_profile_traces_each_shapes_race_and_compares_the_kernels_with_stock(
    tmp_path: Path, patch: str, settings: str | None
) -> None:
    """Session 48: on 6144 x 4096 the stream kernel's race node took 1.7 us more than the kernel alone. node-profile
    races each NODE_SHAPES shape alone for stock and each unsabotaged variant under nsys, then compares each variant's
    trace with stock's through fusekit profile (the real one here, on synthetic exports), one JSON per shape. A long
    stack label is fitted on its own (session 49: the whole name fitted lost its node- prefix, so the variant's race
    JSON and its profile took one path and the race was overwritten). NODE_SETTINGS (session 50) runs the step once
    per setting, both sides under its environment, its files keyed SHAPE_SETTING and compared with stock's of the
    same setting."""
    home, batch, stub, record = tmp_path / "home", tmp_path / "b", tmp_path / "stub", tmp_path / "bridge-calls.txt"
    real = subprocess.run(["bash", "-c", "command -v python3"], capture_output=True, text=True).stdout.strip()
    experiment, sabotage = _experiment_and_sabotage(tmp_path, patch)
    variant = f"fusion-5+{patch}"
    labels = [variant, f"{variant}+sabotage-thing"]
    for label in ["stock", *labels]:
        _fake_binary(home, label, "exit 0\n", tool="llama-bench")
    _stub_bin(  # the bridge: records its arguments and writes its --out file
        stub,
        "python3",
        'if [[ "$1 $2" == "-m ggml_bridge" ]]; then\n'
        f'  echo "${{GGML_CUDA_PDL-unset}}|$*" >>"{record}"\n'
        '  out=""; prev=""; for a in "$@"; do [[ $prev == --out ]] && out=$a; prev=$a; done\n'
        '  echo "{}" >"$out"; exit 0\n'
        f'fi\nexec "{real}" "$@"\n',
    )
    synth = f"import sys; sys.path.insert(0, {str(REPO)!r}); from pathlib import Path; from tests.nsys_synth import "
    synth += "LLAMA_KERNELS, decode_trace; decode_trace(list(LLAMA_KERNELS[:2]), 4).write(Path(sys.argv[1]))"
    _stub_bin(  # nsys: profile runs the command and leaves a report; export writes a synthetic SQLite export
        stub,
        "nsys",
        'if [[ $1 == profile ]]; then base=$7; shift 7; "$@"; : >"$base.nsys-rep"; exit 0; fi\n'
        f'if [[ $1 == export ]]; then exec "{real}" -c "{synth}" "$6"; fi\nexit 1\n',
    )
    _built(batch, *labels)
    env = {
        "FUSEKIT_HOME": str(home),
        "VARIANTS": f"fusion-5+{experiment} fusion-5+{experiment}+{sabotage}",
        "NODE_SHAPES": "6144x4096,4096x4096",
        "PATH": f"{stub}:{os.environ['PATH']}",
    }
    env.pop("GGML_CUDA_PDL", None)
    tags, shapes = {"": "unset"}, ["6144x4096", "4096x4096"]  # file key suffix -> the environment the bridge saw
    if settings:  # and without NODE_SHAPES: the step's default shapes
        env["NODE_SETTINGS"], tags["_GGML_CUDA_PDL0"] = settings, "0"
        del env["NODE_SHAPES"]
        shapes.append("4096x14336")
    keys = [(shape + tag, seen) for tag, seen in tags.items() for shape in shapes]
    done = _run(batch, "node-profile", env)
    assert done.returncode == 0, done.stderr
    seen, calls = zip(*(line.split("|", 1) for line in record.read_text().splitlines()), strict=True)
    assert len(calls) == 2 * len(keys) and not [c for c in calls if "sabotage" in c]
    assert list(seen) == [s for _, s in keys for _ in range(2)]  # stock and the variant under the same setting
    trees = home / "trees"
    assert calls[0].startswith(f"-m ggml_bridge mulmat --lib-dir stock={trees}/stock/build-cuda-sm90/bin ")
    assert f"--lib-dir {variant}={trees}/{variant}/build-cuda-sm90/bin" in calls[1]
    assert "--shapes 6144x4096 --tokens 1 --check-tokens 1 --rounds 3" in calls[1]
    assert "--shapes 4096x4096" in calls[3]
    results, fitted = batch / "results", _fitted(variant, 160)
    assert (results / "node-race-6144x4096-stock.json").is_file()
    for key, _ in keys:
        assert json.loads((results / f"node-race-{key}-{fitted}.json").read_text()) == {}  # the bridge's own
        compared = json.loads((results / f"node-profile-{key}-{fitted}.json").read_text())
        assert compared["payload"]["comparison"] is not None, compared
        traced = [Path(t["path"]).name for t in compared["inputs"]["traces"]]
        assert traced == [f"node-{key}-stock.sqlite", f"node-{key}-{fitted}.sqlite"]
    kinds = sorted(p.name[:10] for p in results.glob("*.json"))
    assert kinds == ["builds.jso"] + ["node-profi"] * len(keys) + ["node-race-"] * 2 * len(keys)
    packed = sorted(p.name for p in (results / "node-traces").iterdir())
    assert packed == sorted(f"node-{k}-{n}.sqlite.xz" for k, _ in keys for n in ("stock", fitted))
    for path in (results / "node-traces").iterdir():  # each the export itself, as fusekit profile reads it
        assert lzma.decompress(path.read_bytes()) == (batch / "traces" / path.name.removesuffix(".xz")).read_bytes()
    assert not list(results.glob("node-profile-*stock.json")) and not list(results.glob("*sabotage*"))


def test_memcheck_step_sanitizes_only_the_runs_that_fail(tmp_path: Path) -> None:
    """Session 45: fusion-2-within-gdn aborted a two-chunk perplexity run with a misaligned address that no
    test-backend-ops case and no decode bench showed. The memcheck step runs that command on stock and each measured
    variant with CUDA graphs off, and only a failing one again under compute-sanitizer (slow), with fusion-2's plan
    printed; the sanitizer's first report lands in results/memcheck.txt."""
    home, batch, stub, calls = tmp_path / "home", tmp_path / "b", tmp_path / "stub", tmp_path / "sanitizer-calls.txt"
    fails_without_graphs = (
        'if [[ "${GGML_CUDA_DISABLE_GRAPHS:-}" == 1 ]]; then echo "CUDA error: misaligned address" >&2; exit 134; fi\n'
    )
    _fake_binary(home, "stock", "exit 0\n", tool="llama-perplexity")
    _fake_binary(home, "fusion-2", fails_without_graphs, tool="llama-perplexity")
    _stub_bin(
        stub,
        "compute-sanitizer",
        f'echo "DEBUG=$FUSEKIT_GDN_DEBUG GRAPHS_OFF=$GGML_CUDA_DISABLE_GRAPHS $*" >>"{calls}"\n'
        'echo "========= COMPUTE-SANITIZER"\n'
        'echo "========= Invalid __global__ read of size 4 bytes"\n'
        'echo "=========     at void gated_delta_net_cuda<128, false, true, true>(...)+0x1f0"\n'
        'echo "=========     by thread (3,0,0) in block (5,0,7)"\n'
        'echo "=========     Address 0x7f0000000002 is misaligned"\n'
        "exit 1\n",
    )
    _built(batch, "fusion-2")
    env = {
        "FUSEKIT_HOME": str(home),
        "VARIANTS": "fusion-2",
        "MEMCHECK_MODEL": str(tmp_path / "model.gguf"),
        "PATH": f"{stub}:{os.environ['PATH']}",
    }
    done = _run(batch, "memcheck", env)
    assert done.returncode == 0, done.stderr
    lines = (batch / "results" / "memcheck.txt").read_text().splitlines()
    assert lines[0] == "stock rc=0 runs through"
    assert lines[1].startswith("fusion-2 rc=134 fails: CUDA error: misaligned address; memcheck: ========= Invalid")
    assert "gated_delta_net_cuda<128, false, true, true>" in lines[1] and "by thread (3,0,0)" in lines[1]
    (call,) = calls.read_text().splitlines()  # stock ran through: not sanitized
    assert call.startswith("DEBUG=1 GRAPHS_OFF=1 --tool memcheck --print-limit 8 ")
    assert "fusion-2/build-cuda-sm90/bin/llama-perplexity -m " in call and "-c 512 --chunks 2 -b 512 -ub 1" in call
    corpus = Path(call.split(" -f ")[1].split()[0])  # CPython's documentation text, written by the step
    assert corpus.parent == batch and corpus.stat().st_size > 100_000
