#!/usr/bin/env bash
# A model file larger than one device call may carry (64 MiB with everything else), sent in parts over several
# calls of one warm host, then joined and checked there.
#
#   scripts/carry_model.sh split MODEL DIR [PART_MIB]   DIR/NAME.part-1 ... and DIR/NAME.sha256 (PART_MIB: 30)
#   scripts/carry_model.sh join DIR NAME OUT            concatenates DIR/NAME.part-*, checks the sha256, writes OUT
#
# What one call sends (the tracked tree, about 20 MB, plus what it carries) may be 64 MiB: with .bundle (12 MB) the
# first call has room for one 30 MiB part, a later call for two. Carry DIR/NAME.sha256 and DIR/NAME.part-1 with
# .bundle first and the other parts in later calls (the host keeps what earlier calls carried while it stays warm);
# join once all are there. DIR is git-ignored (/.carry/). join writes OUT only when the parts are complete and match,
# and exits 1 with one line otherwise.
set -euo pipefail

die() { echo "carry_model: $*" >&2; exit 1; }

case "${1:-}" in
  split)
    model=${2:?model file} dir=${3:?output folder} mib=${4:-30}
    [[ -f "$model" ]] || die "no model file $model"
    name=$(basename "$model")
    mkdir -p "$dir"
    rm -f "$dir/$name".part-* "$dir/$name.sha256"
    split -b "${mib}M" -d -a 1 --numeric-suffixes=1 "$model" "$dir/$name.part-"
    (cd "$(dirname "$model")" && sha256sum "$name") >"$dir/$name.sha256"
    ls -l "$dir/$name".part-* "$dir/$name.sha256"
    ;;
  join)
    dir=${2:?parts folder} name=${3:?model name} out=${4:?output file}
    [[ -f "$dir/$name.sha256" ]] || die "no $dir/$name.sha256 (carried with the first part)"
    mapfile -t parts < <(ls "$dir/$name".part-* 2>/dev/null | sort -V)
    ((${#parts[@]} > 0)) || die "no parts $dir/$name.part-*"
    want=$(cut -d' ' -f1 "$dir/$name.sha256")
    tmp="$out.partial"
    cat "${parts[@]}" >"$tmp"
    got=$(sha256sum "$tmp" | cut -d' ' -f1)
    if [[ "$got" != "$want" ]]; then
      rm -f "$tmp"
      die "$name: ${#parts[@]} parts give sha256 ${got:0:12}, not ${want:0:12} (a part missing or damaged)"
    fi
    mv "$tmp" "$out"
    echo "carry_model: $out from ${#parts[@]} parts, sha256 ${want:0:12} checked"
    ;;
  *)
    die "usage: carry_model.sh split MODEL DIR [PART_MIB] | join DIR NAME OUT"
    ;;
esac
