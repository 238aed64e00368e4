#!/usr/bin/env bash
# Sourced by the GPU-host scripts (gpu_batch.sh, h200_*.sh): one definition of how fusekit runs there.
# Needs REPO (this checkout) and FUSEKIT_HOME; the bundle's setup step fills $FUSEKIT_HOME/site (wheels)
# and $FUSEKIT_HOME/nsys-debs (libdw/libelf for nsys' importer, ccache and its libhiredis).
#
# Every step must see the same ccache: fusekit's build records the compiler launcher in its configure
# stamp, so a step without ccache on PATH would reconfigure and recompile a whole CUDA build.

use_fusekit() {
  local site="$FUSEKIT_HOME/site" debroot="$FUSEKIT_HOME/nsys-debs" libdw
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
