"""Narratoria's gRPC contract: ``narratoria.proto`` and the stubs generated from it.

The stubs are committed (``narratoria_pb2*.py``) so that clients and skills need no
build step; ``python -m narratoria.proto.build`` regenerates them after an edit and
a test fails whenever the committed stubs and the .proto disagree.
"""
