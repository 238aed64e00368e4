#!/usr/bin/env bash
# Prepare a bare GPU host (no network) for fusekit: install the carried wheels into a private folder,
# unpack the libraries Nsight Systems' importer needs, and initialise the workspace from the carried
# slim llama.cpp tarball. Source it:  source scripts/device_setup.sh BUNDLE_DIR HOME_DIR
bundle=${1:?bundle folder (wheels in whl/, debs in debs/, llama.cpp-slim.tar.gz)}
home=${2:?fusekit workspace folder}
site=/tmp/fusekit-site
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$site" "$bundle"/whl/*.whl || return 1
export PYTHONPATH="$PWD:$site${PYTHONPATH:+:$PYTHONPATH}"
fusekit() { python3 -m fusekit.cli "$@"; }
export -f fusekit
if [ -d "$bundle/debs" ]; then
  mkdir -p /tmp/nsys-deps
  for deb in "$bundle"/debs/*.deb; do dpkg -x "$deb" /tmp/nsys-deps; done
  export FUSEKIT_NSYS_LIBS=$(dirname "$(find /tmp/nsys-deps -name 'libdw.so.1' | head -n 1)")
fi
export FUSEKIT_HOME="$home"
fusekit init --source "$bundle/llama.cpp-slim.tar.gz"
