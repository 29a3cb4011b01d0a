#!/usr/bin/env bash
# Creates .venv/ at the repo root and installs Narratoria with every pinned
# dependency, including the model packages. Idempotent: when pyproject.toml has
# not changed since the last successful install, it only verifies the command.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
python="${PYTHON:-python3}"
stamp=".venv/.narratoria-installed"
# Some virtual machines list AMX in cpuinfo without letting a process use it;
# llama.cpp's native build then dies with SIGILL on the first matrix multiply.
# Building without AMX costs nothing where it is absent and little where it works.
if [ "$(uname -m)" = "x86_64" ] && [ -z "${CMAKE_ARGS:-}" ]; then
    noamx="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
    export CMAKE_ARGS="-DCMAKE_C_FLAGS='$noamx' -DCMAKE_CXX_FLAGS='$noamx'"
fi
want="$( (cat pyproject.toml; echo "${CMAKE_ARGS:-}") | sha256sum | cut -d' ' -f1)"
llama="$(grep -o 'llama-cpp-python==[0-9.]*' pyproject.toml)"

if [ ! -x .venv/bin/python ]; then
    echo "setup: creating .venv with $($python --version 2>&1)"
    "$python" -m venv .venv
fi
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -x .venv/bin/narratoria ]; then
    echo "setup: .venv is up to date"
else
    # llama-cpp-python builds from source (about 7 minutes on 2 cores); pip caches
    # the wheel, so only the first install on a machine pays for it.
    echo "setup: installing narratoria and its pinned dependencies into .venv (first time: ~10 min)"
    # The machine's pip configuration names index folders that may not exist;
    # pip warns once per package about them, which drowns the real progress.
    set +e
    if [ -n "$llama" ] && [ "$(cat .venv/.llama-cmake-args 2>/dev/null)" != "${CMAKE_ARGS:-}" ] \
        && .venv/bin/python -c "import llama_cpp" 2>/dev/null; then
        # An installed build from other compiler flags would be kept as "satisfied".
        echo "setup: rebuilding $llama with CMAKE_ARGS=${CMAKE_ARGS:-}"
        .venv/bin/python -m pip install --progress-bar off --no-cache-dir --force-reinstall --no-deps "$llama" 2>&1 \
            | grep -v -e "is ignored: it is neither a file nor a directory"
    fi
    .venv/bin/python -m pip install --progress-bar off -e ".[test]" 2>&1 \
        | grep -v -e "is ignored: it is neither a file nor a directory" \
                  -e "^Requirement already satisfied"
    status=${PIPESTATUS[0]}
    set -e
    if [ "$status" -ne 0 ]; then
        echo "setup: pip install failed (exit $status); see the messages above" >&2
        exit "$status"
    fi
    # Venvs set up before the package was a real one linked it by hand.
    rm -rf .venv/narratoria-src "$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/narratoria.pth"
    echo "${CMAKE_ARGS:-}" > .venv/.llama-cmake-args
    echo "$want" > "$stamp"
fi
.venv/bin/narratoria --version
