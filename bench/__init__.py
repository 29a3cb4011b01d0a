"""Benchmarks and the load tester (``narratoria bench SUITE``, ``narratoria loadtest``).

One module per suite, each with a ``run…`` function returning a JSON-ready report whose
``summary`` is a list of lines, and ``write_markdown(path, report, command)`` appending
it to BENCHMARKS.md: ``protocol`` (skill invocation against a bare spawn), ``store``,
``turn``, ``skills``, ``ingest``, ``ingest_load``, ``crash``, ``loadtest``. What they
share: ``report`` (the machine, progress lines, percentiles) and ``daemon`` (a real
``narratoria serve`` in a folder of its own, which the tests start too).

Clients only: they drive the runtime through its public API or the daemon through
gRPC, and import nothing of Ray (a daemon is a child process).
"""
