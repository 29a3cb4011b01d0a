"""The committed gRPC stubs are exactly what narratoria.proto generates."""

from __future__ import annotations

from pathlib import Path

from narratoria.proto import build


def test_committed_stubs_match_the_proto(tmp_path):
    for fresh in build.generate(tmp_path):
        committed = build.HERE / fresh.name
        assert committed.read_text() == fresh.read_text(), (
            f"{committed} is stale: run `python -m narratoria.proto.build`")


def test_the_stubs_import_as_narratoria_proto():
    from narratoria.proto import narratoria_pb2 as pb
    from narratoria.proto import narratoria_pb2_grpc as rpc

    event = pb.TurnEvent(turn_id="t", seq=1, narration=pb.NarrationToken(text="Hi"))
    assert pb.TurnEvent.FromString(event.SerializeToString()).WhichOneof("event") == "narration"
    assert hasattr(rpc, "NarratoriaStub") and hasattr(rpc, "StoreStub")
    assert Path(build.HERE / "narratoria.proto").is_file()
