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

Those barriers are also why llama.cpp should not run on more threads than it has
cores to itself: where other busy processes share them (two model processes, a test
run with several workers), a worker whose core was taken stalls the others a whole
time slice at every barrier. ``NARRATORIA_THREADS`` says how many to use there.
"""

from __future__ import annotations

import os
import sys

from threadpoolctl import threadpool_limits


THREADS_ENV = "NARRATORIA_THREADS"


def llama_threads() -> int:
    """The threads llama.cpp decodes on: ``NARRATORIA_THREADS`` when set, else every
    core. Measured on 2 cores (48 greedy tokens x3): 1.9 s on 2 threads and 2.6 s on 1
    alone; beside one busy process, 5.6 s on 2 threads and 2.5 s on 1."""
    raw = os.environ.get(THREADS_ENV, "").strip()
    if not raw:
        return os.cpu_count() or 1
    if not raw.isdigit() or int(raw) < 1:
        raise ValueError(f"{THREADS_ENV}={raw!r}: expected a whole number of threads, at least 1")
    return int(raw)


def leave_cores_to_llama() -> None:
    """Run this process's BLAS (and torch, when it is loaded) on one thread. The limit
    holds for the process's life; calling again is harmless."""
    threadpool_limits(limits=1, user_api="blas")
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(1)
