"""Ray actors of the Narratoria daemon: thin wrappers that each hold one resource
and delegate to `narratoria.runtime`. Each is a plain class (a test builds one without
Ray); `daemon.py` makes them Ray actors (``remote(cls)``, with ``ACTOR_OPTIONS``).

- ``PlannerActor`` (planner.py): the llama.cpp model — plans, narration, choices
- ``EmbedderActor`` (embedder.py): sentence-transformers, batched
- ``StoreActor`` (store.py): the DuckDB file — persistence layer and sessions
- ``SkillSupervisorActor`` (supervisor.py): skill processes under a global cap
- ``CoordinatorActor`` (coordinator.py): sessions' turns, the scene pipeline
- ``server.py``: the gRPC services; ``daemon.py``: `narratoria serve`
"""
