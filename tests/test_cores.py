"""runtime/cores.py: a process that loads the model leaves the cores to llama.cpp."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

# Run in a fresh interpreter: a pool limited by an earlier test would hide a regression.
_LOAD_AND_REPORT = textwrap.dedent("""
    import json
    from threadpoolctl import threadpool_info
    from narratoria.runtime.planner.model import ModelPlanner

    before = [p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"]
    ModelPlanner()
    after = [p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"]
    print(json.dumps({"before": before, "after": after}))
""")


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="one core: BLAS has one thread anyway")
def test_loading_the_model_leaves_numpys_blas_one_thread() -> None:
    run = subprocess.run([sys.executable, "-c", _LOAD_AND_REPORT], capture_output=True,
                         text=True, timeout=300, check=True)
    pools = json.loads(run.stdout.strip().splitlines()[-1])
    assert pools["after"], "numpy's BLAS pool was not found"
    # Before the load the pool has a thread per core; after it, one.
    assert max(pools["before"]) > 1
    assert pools["after"] == [1] * len(pools["after"])


def test_leave_cores_to_llama_limits_torch_only_where_it_is_loaded() -> None:
    code = ("import sys\nfrom narratoria.runtime.cores import leave_cores_to_llama\n"
            "leave_cores_to_llama()\nprint('torch' in sys.modules)")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, check=True)
    assert run.stdout.strip() == "False"  # importing torch costs ~2 s and ~300 MB
