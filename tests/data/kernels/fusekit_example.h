// Example "kernel" file for fusekit's tests: the example fusion places it into the llama.cpp tree
// next to llama-bench, and its patch prints this banner in `llama-bench --help`.
#pragma once

#define FUSEKIT_EXAMPLE_BANNER "fusekit example fusion: this llama-bench was built from a patched tree"
