"""The `narratoria` commands, one module per command group.

Each module exposes ``register(subparsers) -> None``: it adds its group's parser (and
its actions) and sets each handler as ``func``, a function of the parsed arguments
returning an :class:`~narratoria.clients.output.ExitCode`. ``clients/cli.py`` calls
every ``register`` to build the parser, so a module here imports only argparse and the
standard library at import time: what a handler needs (the runtime, gRPC, DuckDB, Ray,
the model) is imported inside it, which keeps ``narratoria --help`` fast
(``tests/test_imports.py``).
"""
