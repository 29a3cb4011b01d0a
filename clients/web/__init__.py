"""The web front-end: a Starlette gateway (a gRPC client of the daemon) and its page."""
