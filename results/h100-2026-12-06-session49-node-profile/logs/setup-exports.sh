export PYTHONPATH="/tmp/fusekit-gpu/site"
export PATH="/tmp/fusekit-gpu/site/bin:/usr/local/cuda/bin:/opt/torch/.venv/bin:/usr/local/nvidia/bin:/usr/local/cuda/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:/opt/gcc/bin"
# then: fusekit init --source /work/main/.bundle/llama.cpp-slim.tar.gz
