"""The cores belong to llama.cpp: math libraries in its process run on one thread.

llama.cpp decodes on every core with OpenMP workers that meet at several barriers a
token. A math library with a pool of its own takes those cores from under them:
numpy's OpenBLAS wakes a worker per core for any matrix product (the router's and
the deed sense's, a few per plan) and those workers spin for a while after it,
so on 2 cores a step of 8 rows took 74 ms instead of 38 with one matrix-vector
product between steps, and 85 ms with a product every 50 ms on another thread
(BENCHMARKS.md, "OpenBLAS"). One BLAS thread costs those products microseconds.
torch, when a process hosts it beside llama.cpp, is the same (libgomp: once it has
a team of its own the process holds more threads than cores and libgomp stops
spinning at barriers).
"""

from __future__ import annotations

import sys

from threadpoolctl import threadpool_limits


def leave_cores_to_llama() -> None:
    """Run this process's BLAS (and torch, when it is loaded) on one thread. The limit
    holds for the process's life; calling again is harmless."""
    threadpool_limits(limits=1, user_api="blas")
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(1)
