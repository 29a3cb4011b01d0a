"""What a light import pulls in: reading a session's state, or starting the CLI for
`--help`, never loads DuckDB, numpy, torch, Ray or the model bindings (so that
the CLI starts fast; `narratoria --help` is measured in BENCHMARKS.md, not timed here)."""

from __future__ import annotations

import subprocess
import sys

import pytest

HEAVY = ("duckdb", "numpy", "torch", "ray", "llama_cpp", "sentence_transformers")


def loaded_after(statement: str) -> list[str]:
    probe = (f"import sys\n{statement}\n"
             f"print(' '.join(m for m in {HEAVY!r} if m in sys.modules))")
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout.split()


@pytest.mark.parametrize("statement", [
    "from narratoria.runtime.state import SessionState",
    "import narratoria.clients.cli",
])
def test_a_light_import_loads_nothing_heavy(statement):
    assert loaded_after(statement) == []


def test_the_engine_is_still_there_when_asked_for():
    from narratoria.runtime.narrative import NarrativeStateEngine
    from narratoria.runtime.narrative.engine import NarrativeStateEngine as direct

    assert NarrativeStateEngine is direct
    with pytest.raises(AttributeError, match="no attribute 'Nothing'"):
        from narratoria.runtime import narrative

        narrative.Nothing  # noqa: B018
