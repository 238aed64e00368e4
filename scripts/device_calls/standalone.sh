#!/usr/bin/env bash
# Device call: standalone kernel programs only (kernels/<name>_check.cu), no llama.cpp build, so it fits what is left
# of a session's device time (each compiles in about 15 s and runs in under a minute). PROGRAMS names them (default
# "chunked_gdn reader_quantize"); each runs as the session's kernels step runs it (host_env.sh's standalone_program:
# checked against float64, then under --sabotage, where every check must fail), with clocks recorded between runs,
# never changed. Carry nothing: the programs read only kernels/. $OUT gets one batch-*.tgz as a session packs it:
# results/ (<name>-standalone(-sabotage).json, clocks.csv, sources.sha256: the device's copy of .git need not be this
# checkout's, the sources' own hashes say what ran) and logs/.
# NCU_CHAIN=1 adds one Nsight Compute pass (--once: the first case only, the 35B layer at T = 512) over step 4a's and
# step 4b's chains only (kernels/NOTES-chunked-gdn.md, "Step 4b as measured": where does a chunk's time go?), as
# results/ncu-chunked-gdn*.csv(.xz); at most NCU_TIMEOUT (420) seconds, clocks left alone (--clock-control none).
# NCU_KERNELS (a regex) profiles other kernels instead (session 40: steps 4a and 4c's chains and the prep pass).
# NCU_NAME_BASE=demangled matches NCU_KERNELS against the names with their template arguments.
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
command -v nvcc >/dev/null || export PATH=/usr/local/cuda/bin:$PATH
export FUSEKIT_HOME=${FUSEKIT_HOME:-/tmp/fusekit-standalone}
B=${STANDALONE_BATCH:-/tmp/standalone-batch}  # (a test points it elsewhere)
rm -rf "$B"  # a second call on a warm machine packs only its own results
source "$REPO/scripts/host_env.sh"  # standalone_program, ncu_chunked_gdn, smi, session_pack
mkdir -p "$B/bin" "$B/logs" "$B/results"
(cd "$REPO" && sha256sum kernels/*_check.cu kernels/*.cuh) >"$B/results/sources.sha256"
smi start
for program in ${PROGRAMS:-chunked_gdn reader_quantize}; do
  standalone_program "$program" || continue
  smi "$program"
done
if [[ ${NCU_CHAIN:-0} == 1 && -x $B/bin/chunked_gdn_check ]]; then
  ncu_chunked_gdn "$B/bin/chunked_gdn_check" "${NCU_KERNELS:-chunked_gdn_tc_chain_(regs|pairs)}"
  smi ncu
fi
session_pack "$OUT"
