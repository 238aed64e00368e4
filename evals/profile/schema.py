"""Facts about Nsight Systems SQLite exports: table names, column names, enum values (one place).

Names follow the schema `nsys export --type sqlite` writes (nsys 2023.x-2025.x); the copy-kind labels
are the ones nsys's own report scripts print (``MEM_OPER_STRS_CTE`` in ``reports/nsysstats.py``).
The synthetic exports in the tests are built from these same names, and the real fixtures under
``tests/fixtures/nsys`` check them against exports made by nsys itself.
"""

from __future__ import annotations

SQLITE_MAGIC = b"SQLite format 3\x00"

STRING_IDS = "StringIds"  # id INTEGER PRIMARY KEY, value TEXT
KERNEL = "CUPTI_ACTIVITY_KIND_KERNEL"
RUNTIME = "CUPTI_ACTIVITY_KIND_RUNTIME"
MEMCPY = "CUPTI_ACTIVITY_KIND_MEMCPY"
MEMSET = "CUPTI_ACTIVITY_KIND_MEMSET"
GRAPH_TRACE = "CUPTI_ACTIVITY_KIND_GRAPH_TRACE"  # whole-graph rows: written when graphs are traced as a unit
NVTX_EVENTS = "NVTX_EVENTS"
MEMCPY_OPER_ENUM = "ENUM_CUDA_MEMCPY_OPER"  # id, name, label (newer exports)

# Columns of CUPTI_ACTIVITY_KIND_KERNEL that the parser reads.
K_START = "start"
K_END = "end"
K_DEMANGLED = "demangledName"  # StringIds id; what cuda_gpu_kern_sum groups by (its default, templated name)
K_SHORT = "shortName"  # StringIds id; the base name (cuda_gpu_kern_sum:base)
K_CORRELATION = "correlationId"
K_GRAPH_NODE = "graphNodeId"  # set on kernels recorded with --cuda-graph-trace=node
K_DEVICE = "deviceId"

# CUPTI_ACTIVITY_KIND_RUNTIME: nameId -> StringIds ("cudaLaunchKernel_v7000", "cudaGraphLaunch_v10000", ...)
R_NAME = "nameId"
GRAPH_LAUNCH_PREFIX = "cudaGraphLaunch"
KERNEL_LAUNCH_PREFIXES = ("cudaLaunchKernel", "cudaLaunchKernelExC", "cudaLaunchCooperativeKernel", "cuLaunchKernel")

# CUPTI_ACTIVITY_KIND_MEMCPY.copyKind labels (nsysstats.py MEM_OPER_STRS_CTE), used without the enum table.
MEMCPY_KINDS = {
    0: "[CUDA memcpy Unknown]",
    1: "[CUDA memcpy HtoD]",
    2: "[CUDA memcpy DtoH]",
    3: "[CUDA memcpy HtoA]",
    4: "[CUDA memcpy AtoH]",
    5: "[CUDA memcpy AtoA]",
    6: "[CUDA memcpy AtoD]",
    7: "[CUDA memcpy DtoA]",
    8: "[CUDA memcpy DtoD]",
    9: "[CUDA memcpy HtoH]",
    10: "[CUDA memcpy PtoP]",
    11: "[CUDA Unified Memory memcpy HtoD]",
    12: "[CUDA Unified Memory memcpy DtoH]",
    13: "[CUDA Unified Memory memcpy DtoD]",
}
MEMSET_NAME = "[CUDA memset]"

# NVTX_EVENTS.eventType values of ranges (nsysstats.py _FIND_NVTX_RANGE_QUERY: push/pop and start/end).
NVTX_RANGE_TYPES = (59, 60, 70, 71)

# Columns of the CSV `nsys stats --report cuda_gpu_kern_sum --format csv` writes.
KERN_SUM_COLUMNS = (
    "Time (%)",
    "Total Time (ns)",
    "Instances",
    "Avg (ns)",
    "Med (ns)",
    "Min (ns)",
    "Max (ns)",
    "StdDev (ns)",
    "Name",
)
