"""`/retry` and `/rewind N` in `narratoria play`: each is the daemon's
Branch, so a retry is a new take of the last scene (its input played again) and a rewind
a new take from scene N; the old sessions keep their scenes and are named, with the way
back to them."""

from __future__ import annotations

from narratoria.clients.play import parse_action
from support.daemon import cli


def test_retry_and_rewind_make_new_takes_and_keep_the_old_ones(pattern_daemon, tmp_path):
    with pattern_daemon.client() as client:
        first = client.create_session(title="retry").id
    script = tmp_path / "retry.txt"
    script.write_text("/help\n/retry\nI look around\nI open the door\n/retry\n"
                      "/rewind 9\n/rewind two\n/rewind 1\nI wave\n", "utf-8")
    out = cli(pattern_daemon, "play", "--session", first, "--script", str(script))
    said = out.stdout + out.stderr
    assert out.returncode == 0, said
    assert "/retry" in out.stdout.split("> /help")[1] and "/rewind N" in out.stdout
    assert "nothing to retry yet" in out.stdout
    assert "unknown command" not in said and "Traceback" not in said

    with pattern_daemon.client() as client:
        old = client.resume_session(first)
        assert old.turns == 2 and old.last_narration  # the first take is untouched
        takes = [s for s in client.list_sessions() if s.parent_session_id]
        retried = next(s for s in takes if s.parent_session_id == first)
        rewound = next(s for s in takes if s.parent_session_id == retried.id)
    # The retry replayed "I open the door" as scene 2 of a new take.
    assert retried.branched_at_scene == 2 and retried.turns == 2
    assert out.stdout.count("> I open the door") == 2
    assert f"retrying scene 2 as a new take: session {retried.id}" in out.stdout
    assert f"`narratoria play --session {first}` goes back to it" in out.stdout
    # A scene the take does not have names the range; a word is no scene number.
    assert "no scene 9 to rewind to: pick 1..2" in out.stdout
    assert "/rewind takes one scene number" in out.stdout
    # The rewind started a take at scene 1 and "I wave" played it; the retry is kept.
    assert rewound.branched_at_scene == 1 and rewound.turns == 1
    assert f"rewound to scene 1 as a new take: session {rewound.id}" in out.stdout
    assert f"`narratoria play --session {retried.id}` goes back to it" in out.stdout
    with pattern_daemon.client() as client:
        assert client.resume_session(retried.id).turns == 2
    assert f"session {rewound.id} · 4 turn(s) played" in out.stdout


def test_parse_retry_and_rewind():
    assert parse_action("/retry", []).kind == "retry"
    assert parse_action("/rewind 3", ["a"]).scene == 3
    assert parse_action("/rewind", []).kind == "invalid"
    assert parse_action("/rewind 0", []).kind == "invalid"
