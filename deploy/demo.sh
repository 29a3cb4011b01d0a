#!/usr/bin/env bash
# The main job: start the daemon (unless one is already running), play three turns
# of the built-in campaign "The Long Ebb" with the terminal front-end choosing
# option 1 each time, then stop the daemon it started. Data (sessions, memories) lives in $NARRATORIA_DATA_DIR or
# ${XDG_DATA_HOME:-~/.local/share}/narratoria, so a later `narratoria play` resumes.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bin="$root/.venv/bin/narratoria"
turns="${1:-3}"
campaign="${NARRATORIA_DEMO_CAMPAIGN:-long_ebb}"

if "$bin" status >/dev/null 2>&1; then
    exec "$bin" play --auto --turns "$turns" --campaign "$campaign"
fi

log="$(mktemp -t narratoria-daemon.XXXXXX.log)"
"$bin" serve >"$log.out" 2>"$log" &
daemon=$!
trap 'kill -TERM $daemon 2>/dev/null; wait $daemon 2>/dev/null || true; rm -f "$log" "$log.out"' EXIT
echo "starting the daemon (Ray, the model, the embedder; ~20 s)..." >&2
for _ in $(seq 1 240); do
    if grep -q "ready" "$log.out" 2>/dev/null; then break; fi
    if ! kill -0 $daemon 2>/dev/null; then cat "$log" >&2; echo "the daemon failed to start" >&2; exit 1; fi
    sleep 0.5
done
cat "$log.out" >&2
"$bin" play --auto --turns "$turns" --campaign "$campaign"
