"""A queue you can see, without a daemon: what a waiting turn emits (turn/queueing.py),
how the server puts it and the planner's status on the wire, and how the terminal shows
them (``narratoria play``'s wait line, ``narratoria status``'s slots and queue)."""

from __future__ import annotations

from narratoria.actors.server import model_slots, model_waits_pb, turn_event_pb
from narratoria.clients.client import event_to_dict, message_to_dict
from narratoria.clients.render import DIM, RESET, TurnRenderer, format_status, queued_line
from narratoria.proto import narratoria_pb2 as pb
from narratoria.runtime.turn.events import TurnEventKind
from narratoria.runtime.turn.queueing import QueueWatch, queued_payload


def place(position: int, wait_s: float = 0.5, kind: str = "plan") -> dict:
    return {"position": position, "waitS": wait_s, "kind": kind}


def test_a_wait_is_told_when_it_starts_and_when_its_place_changes_only():
    watch = QueueWatch()
    assert watch.observe(None) is None  # not waiting: nothing to say
    assert watch.observe(place(2, 0.31)) == {"position": 2, "wait_s": 0.31, "call": "plan"}
    assert watch.observe(place(2, 0.62)) is None  # same place, a later poll: no spam
    assert watch.observe(place(1, 0.93)) == {"position": 1, "wait_s": 0.93, "call": "plan"}
    assert watch.observe(place(1, 1.24)) is None
    assert watch.observe(None) is None  # admitted
    # The narration's wait, later in the same turn, is news again at the same place.
    assert watch.observe(place(1, 0.3, "narration")) == {"position": 1, "wait_s": 0.3,
                                                         "call": "narration"}


def test_a_change_of_call_at_the_same_place_is_told():
    watch = QueueWatch()
    assert watch.observe(place(1, kind="narration")) is not None
    assert watch.observe(place(1, kind="choices"))["call"] == "choices"


def test_answers_that_name_no_place_are_not_told():
    for answer in ({}, {"position": 0}, {"position": -3}, {"position": "two"},
                   {"position": None}, {"position": 1, "waitS": "long"}):
        assert queued_payload(answer) is None, answer
    watch = QueueWatch()
    assert watch.observe({"position": "x"}) is None and watch.told is None
    assert queued_payload({"position": 3}) == {"position": 3, "wait_s": 0.0, "call": ""}
    assert queued_payload({"position": 1, "waitS": -0.2})["wait_s"] == 0.0


def test_the_queued_event_goes_on_the_wire_as_the_proto_says():
    payload = QueueWatch().observe(place(2, 1.5, "narration"))
    event = {"kind": TurnEventKind.QUEUED, "seq": 4, "at_ms": 900, **payload}
    message = turn_event_pb("t1", event)
    assert message.WhichOneof("event") == "queued"
    assert (message.queued.position, message.queued.wait_s, message.queued.call) == (
        2, 1.5, "narration")
    doc = event_to_dict(message)  # what `turn --json`, `play --json` and the web page get
    assert doc["kind"] == "queued" and doc["queued"] == {"position": 2, "wait_s": 1.5,
                                                         "call": "narration"}


def test_the_planners_slots_and_waits_become_the_status_fields():
    planner = {"queueDepth": 2, "slots": {"used": 3, "max": 8},
               "waiting": [{"session": "bbbbbbbbbbbb", "kind": "narration", "position": 2,
                            "waitS": 0.4},
                           {"session": "aaaaaaaaaaaa", "kind": "plan", "position": 1,
                            "waitS": 1.2345},
                           "not an entry", {"session": "c", "position": "first"}]}
    assert model_slots(planner) == (3, 8)
    waits = model_waits_pb(planner)
    assert [(w.position, w.session_id, w.kind, w.wait_s) for w in waits] == [
        (1, "aaaaaaaaaaaa", "plan", 1.234), (2, "bbbbbbbbbbbb", "narration", 0.4)]
    # A planner that reports no slots (older, or none loaded) costs the status nothing.
    assert model_slots({}) == (0, 0) and model_slots({"slots": "eight"}) == (0, 0)
    assert model_slots({"slots": {"used": "x"}}) == (0, 0)
    assert model_waits_pb({}) == [] and model_waits_pb({"waiting": None}) == []


def test_play_shows_each_change_of_place_as_one_dim_line():
    def queued(seq: int, position: int, wait_s: float) -> pb.TurnEvent:
        return pb.TurnEvent(turn_id="t", seq=seq, queued=pb.Queued(position=position,
                                                                   wait_s=wait_s, call="plan"))

    assert queued_line(pb.Queued(position=2, wait_s=0.3)) == (
        "  … waiting for the model: position 2")
    assert queued_line(pb.Queued(position=1, wait_s=4.6)) == (
        "  … waiting for the model: position 1 (5 s)")
    plain = TurnRenderer()
    assert plain.feed(queued(1, 2, 0.3)) == "  … waiting for the model: position 2\n"
    terminal = TurnRenderer(dim=True)
    assert terminal.feed(queued(1, 2, 0.3)) == (
        f"{DIM}  … waiting for the model: position 2{RESET}\n")
    # Mid-narration (the player's words retold before the model takes the turn) it
    # starts a line of its own, and the narration goes on at the next line's start.
    terminal.feed(pb.TurnEvent(turn_id="t", seq=2, narration=pb.NarrationToken(text="You wait.")))
    assert terminal.feed(queued(3, 1, 1.0)).startswith(f"\n{DIM}")
    assert terminal.feed(pb.TurnEvent(turn_id="t", seq=4, narration=pb.NarrationToken(
        text=" The tide"))) == "The tide"
    assert terminal.feed(pb.TurnEvent(turn_id="t", seq=5, narration=pb.NarrationToken(
        text=" turns."))) == " turns."


def test_status_shows_model_slots_the_queue_and_each_waiting_request():
    status = pb.StatusResponse(
        version="0.1.0", model_path="m.gguf", model_queue_depth=2, model_slots_used=3,
        model_slots_max=8,
        model_waiting=[pb.ModelWait(session_id="3f2a9c1b77aa", kind="plan", position=1,
                                    wait_s=2.41),
                       pb.ModelWait(session_id="", kind="narration", position=2, wait_s=0.4)])
    text = format_status(status)
    assert "model slots 3/8 · queue 2\n" in text
    assert "  #1 3f2a9c1b plan      waiting 2.4 s\n" in text
    assert "  #2 -        narration waiting 0.4 s\n" in text  # a session not the caller's
    assert text.index("model slots") < text.index("#1") < text.index("#2") < text.index(
        "skill processes")
    doc = message_to_dict(status)  # `narratoria status --json`
    assert doc["model_slots_used"] == 3 and doc["model_slots_max"] == 8
    assert doc["model_waiting"][0] == {"session_id": "3f2a9c1b77aa", "kind": "plan",
                                       "position": 1, "wait_s": 2.41}
    # A daemon whose planner reports no slots: the model line keeps its queue.
    old = format_status(pb.StatusResponse(model_path="m.gguf", model_queue_depth=1))
    assert "· queue 1\n" in old and "model slots" not in old
