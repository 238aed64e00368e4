#!/usr/bin/env bash
# Sourced by the GPU-host scripts (gpu_batch.sh, h200_*.sh): one definition of how fusekit runs there.
# Needs REPO (this checkout) and FUSEKIT_HOME; the bundle's setup step fills $FUSEKIT_HOME/site (wheels)
# and $FUSEKIT_HOME/nsys-debs (libdw/libelf for nsys' importer, ccache and its libhiredis).
#
# Every step must see the same ccache: fusekit's build records the compiler launcher in its configure
# stamp, so a step without ccache on PATH would reconfigure and recompile a whole CUDA build.

SITE_DIR="$FUSEKIT_HOME/site"  # the bundle's wheels, installed by gpu_batch.sh's setup step

use_fusekit() {
  local site="$SITE_DIR" debroot="$FUSEKIT_HOME/nsys-debs" libdw
  if [[ -d "$site" ]]; then
    export PYTHONPATH="$REPO:$site${PYTHONPATH:+:$PYTHONPATH}"
    export PATH="$site/bin:$PATH"
  else
    export PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}"
  fi
  libdw="$(find "$debroot" -name libdw.so.1 2>/dev/null | head -n1 || true)"
  [[ -z "$libdw" ]] || export FUSEKIT_NSYS_LIBS="${FUSEKIT_NSYS_LIBS:-$(dirname "$libdw")}"
  if ! command -v ccache >/dev/null && [[ -x "$debroot/usr/bin/ccache" ]]; then
    export PATH="$debroot/usr/bin:$PATH"
    export LD_LIBRARY_PATH="$debroot/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    export CCACHE_DIR="${CCACHE_DIR:-$FUSEKIT_HOME/ccache}" CCACHE_MAXSIZE="${CCACHE_MAXSIZE:-20G}"
  fi
}

fusekit() { python3 -c 'import sys; from fusekit.cli import main; sys.argv[0] = "fusekit"; main()' "$@"; }

nsys_path() {  # the nsys that fusekit profile would use, empty where there is none
  python3 -c 'from evals.profile.runner import find_nsys; print(find_nsys(None) or "")'
}

nsys_trace() {  # nsys_trace BASE COMMAND...: COMMAND recorded as fusekit profile records (evals.profile.runner.trace)
  # and exported to BASE.sqlite; fails where nothing was traced
  python3 -c 'import sys; from pathlib import Path; from evals.profile import runner
print(runner.trace(runner.find_nsys(None), Path(sys.argv[1]), sys.argv[2:]))' "$@"
}

# Session helpers of the h200_*.sh scripts; they need B (the batch folder).
bin_of() { ls -d "$FUSEKIT_HOME"/trees/"$1"/build-"${BACKEND:-cuda}"*/bin | head -n 1; }  # a variant's build bin/

smi() {  # clocks, temperature and power, never settings: appended to results/clocks.csv with a label
  nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader \
    >>"$B/results/clocks.csv" 2>&1 || true
  echo "$1" >>"$B/results/clocks.csv"
}

fit_name() {  # fit_name NAME [MAX]: NAME, or, where it is longer than MAX bytes (240: a file name holds 255, with
  # room for an extension; long stack labels), a hash of NAME followed by its last 60 bytes (the step's own suffix:
  # the op, the setting, the run)
  local name=$1 max=${2:-240}
  (( ${#name} <= max )) || name="$(printf '%s' "$name" | sha256sum | cut -c1-12)-${name: -60}"
  echo "$name"
}

log_path() {  # log_path NAME: $B/logs/NAME.log, the name fitted (fit_name)
  echo "$B/logs/$(fit_name "$1").log"
}

tbo() {  # tbo NAME EXPECT BIN [ENV=VAL] ARGS...: test-backend-ops on CUDA0, EXPECT pass|fail
  local name=$1 expect=$2 bin=$3; shift 3
  local envs=()
  while [[ $# -gt 0 && "$1" == *=* && "$1" != -* ]]; do envs+=("$1"); shift; done
  local rc=0 log
  log=$(log_path "tbo-$name")
  env "${envs[@]}" "$bin/test-backend-ops" test -b "${CHECK_BACKEND:-CUDA0}" "$@" >"$log" 2>&1 || rc=$?
  local summary
  summary=$({ grep -E "tests passed|Backend CUDA0: " "$log" || true; } | tr '\n' ' ' | head -c 300)  # a crash prints neither
  local failed
  failed=$(grep -c "FAIL" "$log" || true)
  local verdict=ok
  if [[ $expect == pass && $rc -ne 0 ]] || [[ $expect == fail && $rc -eq 0 ]]; then verdict=UNEXPECTED; fi
  if grep -q " 0/0 tests passed" "$log"; then verdict=EMPTY; fi  # a filter that matched nothing
  echo "$name expect=$expect rc=$rc failed_lines=$failed verdict=$verdict :: $summary" | tee -a "$B/results/checks.txt"
}

session_eval() {  # session_eval "VARIANT..." MODEL NAME [fusekit eval flags...]: against stock, 3x5 interleaved
  local variants=$1 model=$2 name=$3; shift 3
  use_fusekit
  smi "eval $name"
  # shellcheck disable=SC2086
  local backend=(--backend "${BACKEND:-cuda}"); [[ "${BACKEND:-cuda}" == cuda ]] && backend+=(--cuda-arch 90)
  fusekit eval $variants --against stock --model "$model" "${backend[@]}" -p "${PROMPTS:-512,4096}" -n 128 \
    --rounds "${ROUNDS:-3}" -r "${REPS:-5}" --chunks 4 --prompts 4 --tokens 64 "$@" \
    --json "$B/results/eval-$name.json" 2>&1 | tee "$B/logs/eval-$name.log" | tail -n 45
  smi "eval $name"
}

# A spec's variant label, by fusekit's own rule (fusekit.stack: canonical order, patch names).
LABEL_OF_SPEC='from evals.arms import arm_name, split_arm
from fusekit.registry import Registry
from fusekit.stack import canonical, label_of, spec_entries
def label(spec):  # an arm (VARIANT@K=V) keeps its environment in the label
    variant, env = split_arm(spec)
    return arm_name(label_of(canonical(spec_entries(variant, Registry.load()))), env)'

spec_label() {  # spec_label SPEC: fusion-5+/path/to/x.patch -> fusion-5+x (an arm: fusion-5+x@K=V)
  use_fusekit
  python3 -c "$LABEL_OF_SPEC"$'\nimport sys; print(label(sys.argv[1]))' "$1"
}

session_profile() {  # session_profile SPEC MODEL: fusekit profile records stock and SPEC, compares them (files by label)
  local spec=$1 model=$2 variant traces
  use_fusekit
  variant=$(spec_label "$spec")
  smi "profile $variant"
  traces="$B/traces/$(fit_name "$variant")"  # an arm's label (VARIANT@GGML_CUDA_PDL=0) can pass 255 bytes
  mkdir -p "$traces"
  local stem  # the label is in the JSON (fusekit report reads it there); the file name only has to fit
  stem="profile-$(fit_name "$variant" 225)-vs-stock"
  fusekit profile --variant "$spec" --model "$model" --decode 16 --out "$traces" \
    --json "$B/results/$stem.json" --csv "$B/results/$stem.csv" 2>&1 \
    | tee "$(log_path "profile-$variant")" | tail -n 40
  smi "profile $variant"
}

standalone_program() {  # standalone_program NAME: kernels/NAME_check.cu compiled into $B/bin, run, then run under
  # --sabotage (every check must fail): results/<name>-standalone(-sabotage).json and logs/. Each run at most
  # KERNEL_TIMEOUT seconds (300): a session waits for its kernels step after the builds, so a kernel that hangs on its
  # first GPU run must not hold the session's steps back. Returns 1 when the program does not compile.
  local program=$1 name=${1//_/-}
  nvcc -O3 -std=c++17 -arch=sm_90 -lineinfo -I"$REPO/kernels" -o "$B/bin/${program}_check" "$REPO/kernels/${program}_check.cu" \
    >"$B/logs/nvcc-$name.log" 2>&1 || { tail -n 20 "$B/logs/nvcc-$name.log"; return 1; }
  timeout "${KERNEL_TIMEOUT:-300}" "$B/bin/${program}_check" --json "$B/results/$name-standalone.json" 2>&1 \
    | tee "$B/logs/$name.log" || true
  timeout "${KERNEL_TIMEOUT:-300}" "$B/bin/${program}_check" --sabotage --json "$B/results/$name-standalone-sabotage.json" \
    2>&1 | tail -n 2 | tee "$B/logs/$name-sabotage.log" || true
}

# fusion-4's kernels once each (the program's --once, first case) under Nsight Compute, where the host has it: speed
# of light, occupancy, warp stalls, memory traffic and shared-memory bank conflicts of the kernels matching KERNELS
# (a regex, default every chunked_gdn_tc_ kernel; session 39's question, where step 4a's and 4b's chains spend a chunk,
# passes 'chunked_gdn_tc_chain_(regs|pairs)'), as CSV in results/ncu-chunked-gdn*.csv (NCU=path overrides the search;
# a missing ncu or a refused counter access is logged and skipped)
ncu_chunked_gdn() {  # ncu_chunked_gdn PROGRAM [KERNELS]
  local program=$1 kernels=${2:-chunked_gdn_tc_} ncu=${NCU:-}
  [[ -n $ncu ]] || ncu=$(ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | tail -n 1 || true)
  if [[ ! -x "$ncu" ]]; then echo "ncu: not found on this host" | tee "$B/logs/ncu-chunked-gdn.log"; return 0; fi
  local metrics=l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum
  metrics+=,smsp__inst_executed_op_shared_ld.sum,smsp__inst_executed_op_shared_st.sum
  # --clock-control none: ncu's default locks the SM clock to base while it profiles, and we never change clocks
  # NCU_NAME_BASE=demangled matches KERNELS against the whole name with its template arguments (one instantiation
  # of several); ncu's default (function) matches the bare function name
  timeout "${NCU_TIMEOUT:-420}" "$ncu" --clock-control none -f -o /tmp/ncu-chunked-gdn --kernel-name-base "${NCU_NAME_BASE:-function}" \
    -k regex:"$kernels" --section SpeedOfLight \
    --section Occupancy --section WarpStateStats --section LaunchStats --section MemoryWorkloadAnalysis --section SourceCounters \
    --metrics "$metrics" "$program" --once >"$B/logs/ncu-chunked-gdn.log" 2>&1 || { tail -n 5 "$B/logs/ncu-chunked-gdn.log"; return 0; }
  "$ncu" --import /tmp/ncu-chunked-gdn.ncu-rep --csv --page details >"$B/results/ncu-chunked-gdn.csv" 2>>"$B/logs/ncu-chunked-gdn.log" \
    || tail -n 5 "$B/logs/ncu-chunked-gdn.log"
  # every metric (the warp stall reasons are only here), and the SASS with stall samples per instruction (after
  # session 15's step 2d: the chain's 10 us per chunk is neither issue- nor occupancy-bound; where does it wait?)
  "$ncu" --import /tmp/ncu-chunked-gdn.ncu-rep --csv --page raw >"$B/results/ncu-chunked-gdn-raw.csv" \
    2>>"$B/logs/ncu-chunked-gdn.log" || tail -n 5 "$B/logs/ncu-chunked-gdn.log"
  # (xz through Python's lzma, about 4x smaller than gzip for these listings: the device tool carries at most 64 MiB
  # with the repository; one SASS listing per profiled launch; after session 17 the prep pass, now the largest of the
  # three, and the output passes of step 3c; after session 18 the chains too: step 2c's held its state tiles in local memory)
  "$ncu" --import /tmp/ncu-chunked-gdn.ncu-rep --csv --page source --print-source sass -k regex:'chunked_gdn_tc_(prep|output|chain)' \
    2>>"$B/logs/ncu-chunked-gdn.log" | python3 -c 'import lzma, shutil, sys; out = lzma.open(sys.stdout.buffer, "wb", preset=6); shutil.copyfileobj(sys.stdin.buffer, out); out.close()' \
    >"$B/results/ncu-chunked-gdn-sass.csv.xz" || tail -n 5 "$B/logs/ncu-chunked-gdn.log"
}

session_pack() {  # session_pack OUTDIR: the batch folder's results and logs, without traces, models or binaries
  local outdir=${1:?output folder} rc=0
  tar -czf "$outdir/batch-$(date -u +%H%M%S).tgz" -C "$B" --exclude='traces' --exclude='*.sqlite' \
    --exclude='*.nsys-rep' --exclude='*.qdstrm' --exclude='bin' . || rc=$?
  ((rc <= 1)) || echo "pack: tar exit $rc"  # 1: a file changed while it was read (a step still running)
  ls -l "$outdir"
}

fusion_common_step() {  # fusion_common_step SCRIPT STEP [OUT]: the steps every h200_fusionN.sh shares;
  # needs VARIANTS. A script with a `models` step makes its models
  # there; otherwise start writes the 35B preset.
  local script=$1 step=$2
  case "$step" in
    variants)  # the builds this session needs besides stock, one per line (for h200_session.sh)
      printf '%s\n' "${VARIANTS[@]}" ;;
    start)  # setup, the standalone step, detached builds (stock and VARIANTS), models, then poll
      smi start
      "$REPO/scripts/gpu_batch.sh" "$B" setup
      bash "$script" "$B" standalone
      POLL_SECONDS=0 "$REPO/scripts/gpu_batch.sh" "$B" build "${VARIANTS[@]}" || [ $? = 3 ]
      if grep -q '^  models)' "$script"; then bash "$script" "$B" models
      else "$REPO/scripts/gpu_batch.sh" "$B" synth 2>&1 | tail -n 3; fi
      POLL_SECONDS=${POLL_SECONDS:-360} "$REPO/scripts/gpu_batch.sh" "$B" wait ;;
    wait)
      POLL_SECONDS=${POLL_SECONDS:-540} "$REPO/scripts/gpu_batch.sh" "$B" wait ;;
    pack)
      session_pack "${3:?output folder}" ;;
    *) echo "fusion_common_step: $step is not a shared step" >&2; return 2 ;;
  esac
}
