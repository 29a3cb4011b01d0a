#!/bin/sh
# The container's entry point: `narratoria serve` on TCP with a token, data in
# $NARRATORIA_DATA. NARRATORIA_TOKEN, when set, becomes the daemon token (the daemon
# reads <data dir>/daemon.token); otherwise the daemon generates one there.
# Extra arguments (the image's CMD, or `docker run IMAGE ...`) go to `narratoria serve`.
set -eu
data="${NARRATORIA_DATA:-/data}"
mkdir -p "$data"
if [ -n "${NARRATORIA_TOKEN:-}" ]; then
    umask 077
    printf '%s\n' "$NARRATORIA_TOKEN" > "$data/daemon.token"
fi
exec narratoria serve --listen "0.0.0.0:${NARRATORIA_PORT:-8765}" --data-dir "$data" "$@"
