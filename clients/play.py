"""``narratoria play``: an interactive terminal front-end over the daemon.

Creates a session (or resumes one with ``--session``) and shows where the story
stands — a new session's campaign opening and first choices, or a resumed one's last
scene — then loops: read a line, play it as a turn, stream the story as it arrives. A number picks one of the offered
choices, anything else is free text; ``/state``, ``/help``, ``/quit``; ``/retry`` plays the
last scene again and ``/rewind N`` goes back to scene N, each as a new take (the daemon's
branch: the old session is kept and named, so the player can go back to it). Input comes
from the terminal, from a pipe (scripts and tests), from ``--script FILE``, or from
nobody at all with ``--auto`` (always the first choice), so a demo can run unattended.

A ``--session`` that has ended is looked up before any prompt opens (the daemon would
refuse every turn): play says so in one line and what to do instead (branch it, or
start anew), exiting ``FAILED``; at a terminal it offers that choice first.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence, TextIO

from narratoria.proto import narratoria_pb2 as pb

from narratoria.clients.client import ClientError, NarratoriaClient, campaign_ref, event_to_dict, message_to_dict
from narratoria.clients.output import ExitCode, err
from narratoria.clients.render import TurnRenderer, format_choices, format_session, format_state

__all__ = ["Action", "auto_action", "cmd_play", "ended_choice", "ended_message",
           "parse_action"]

HELP = """\
  a number      pick that choice
  any text      say or do something (free text)
  /state        show the session state
  /choices      show the choices again
  /retry        play the last scene again as a new take (the old take is kept)
  /rewind N     go back to scene N and play on from there as a new take
  /help         this help
  /quit         leave (EOF or Ctrl-D too); the session stays, resume it with --session
"""
FIRST_AUTO_TEXT = "look around"
# Errors after which the next line may well work; anything else ends the game.
RECOVERABLE = frozenset({"INVALID_ARGUMENT", "FAILED_PRECONDITION", "RESOURCE_EXHAUSTED"})


@dataclass(frozen=True)
class Action:
    """What one input line asks for."""

    kind: str                   # turn | quit | state | help | choices | retry | rewind | none | invalid
    text: str | None = None     # a turn's free text
    choice: int | None = None   # a turn's 1-based choice
    message: str = ""           # why an input is invalid
    scene: int | None = None    # /rewind's scene (1-based)


def parse_action(line: str, choices: Sequence[str]) -> Action:
    """Interpret one line typed by the player, given the choices on offer."""
    line = line.strip()
    if not line:
        return Action("none")
    if line.startswith("/"):
        command = line[1:].split()[0].lower() if len(line) > 1 else ""
        if command in ("quit", "exit", "q"):
            return Action("quit")
        if command in ("state", "help", "choices", "retry"):
            return Action(command)
        if command == "rewind":
            return _rewind_action(line.split()[1:])
        return Action("invalid", message=f"unknown command {line.split()[0]}; /help lists them")
    # A number picks a choice only when there are choices: with none on offer, "42"
    # may be an answer to a riddle.
    if line.isdigit() and choices:
        n = int(line)
        if not 1 <= n <= len(choices):
            return Action("invalid", message=f"no choice {n}: pick 1..{len(choices)}")
        return Action("turn", choice=n)
    return Action("turn", text=line)


def _rewind_action(words: Sequence[str]) -> Action:
    """``/rewind N``: N is checked against the session's scenes when it is played."""
    if len(words) != 1 or not words[0].isdigit() or int(words[0]) < 1:
        shown = " ".join(words) or "nothing"
        return Action("invalid", message=f"/rewind takes one scene number (1 or more), "
                                         f"not {shown}: /rewind N")
    return Action("rewind", scene=int(words[0]))


def auto_action(choices: Sequence[str]) -> Action:
    """``--auto``: the first choice, or a look around when none is offered (a session
    without a campaign has no opening choices)."""
    return Action("turn", choice=1) if choices else Action("turn", text=FIRST_AUTO_TEXT)


# -- input ---------------------------------------------------------------------------------

def _script_lines(path: Path) -> Iterator[str]:
    for line in path.read_text("utf-8").splitlines():
        if not line.lstrip().startswith("#"):  # a script may carry comments
            yield line


def _stream_lines(stream: TextIO) -> Iterator[str]:
    while True:
        line = stream.readline()
        if not line:
            return
        yield line.rstrip("\n")


def _terminal_lines(prompt_to: TextIO) -> Iterator[str]:
    while True:
        try:
            if prompt_to is sys.stdout:
                line = input("> ")  # line editing when stdout is the terminal too
            else:
                prompt_to.write("> ")
                prompt_to.flush()
                line = sys.stdin.readline()
                if not line:
                    raise EOFError
        except EOFError:
            prompt_to.write("\n")
            return
        yield line.rstrip("\n")


# -- output --------------------------------------------------------------------------------

@dataclass
class _Screen:
    """Where play writes: text for people, or one JSON object a line with ``--json``."""

    json: bool

    def text(self, text: str) -> None:
        if text and not self.json:
            sys.stdout.write(text)
            sys.stdout.flush()

    def doc(self, doc: dict[str, Any]) -> None:
        if self.json:
            sys.stdout.write(json.dumps(doc, ensure_ascii=False) + "\n")
            sys.stdout.flush()

    def note(self, text: str) -> None:
        """Help and errors: stdout for people, stderr under --json (stdout is data)."""
        stream = sys.stderr if self.json else sys.stdout
        stream.write(text)
        stream.flush()


# -- an ended session ----------------------------------------------------------------------

ENDED = "ended"


def ended_message(session: pb.Session) -> str:
    """One line: the session has ended, and what to do instead. A session with no
    scene played has nothing to branch from."""
    title = f" “{session.title}”" if session.title else ""
    branch = (f"branch it from its last scene with `narratoria session branch --session "
              f"{session.id}`, or " if session.turns else "")
    return (f"session {session.id}{title} has ended and cannot be played: "
            f"{branch}start anew with `narratoria play`")


def ended_choice(line: str, can_branch: bool) -> str | None:
    """The answer to the ended-session prompt: "branch", "new" or "quit" (a word or
    its first letters), or None for anything else (ask again)."""
    word = line.strip().lower()
    options = ("branch", "new", "quit") if can_branch else ("new", "quit")
    return next((o for o in options if word and o.startswith(word)), None)


def _ask_ended(session: pb.Session, ask_to: TextIO) -> str:
    """At a terminal: branch, new or quit; the end of input quits."""
    can_branch = session.turns > 0
    offer = ("[b]ranch from its last scene, " if can_branch else "") + "[n]ew session, [q]uit"
    while True:
        ask_to.write(f"{offer}? ")
        ask_to.flush()
        line = sys.stdin.readline()
        if not line:
            ask_to.write("\n")
            return "quit"
        choice = ended_choice(line, can_branch)
        if choice is not None:
            return choice


def _replace_ended(client: NarratoriaClient, args: argparse.Namespace, session: pb.Session,
                   screen: _Screen) -> pb.Session | None:
    """What to play instead of an ended session: None (leave, the reason said) without
    a terminal to ask at, else the player's pick of a branch or a new session."""
    err(ended_message(session))
    if args.auto or args.script or not sys.stdin.isatty():
        return None
    choice = _ask_ended(session, sys.stderr if args.json else sys.stdout)
    if choice == "branch":
        branched = client.branch(session.id)
        screen.text(format_session(branched))
        return branched
    if choice == "new":
        return _new_session(client, session.campaign, session.title, "", screen)
    return None


# -- the game ------------------------------------------------------------------------------

def _new_session(client: NarratoriaClient, campaign: str, title: str, character: str,
                 screen: _Screen) -> pb.Session:
    session = client.create_session(campaign=campaign, title=title, character_id=character)
    shown = f" · campaign {session.campaign}" if session.campaign else ""
    screen.text(f"new session {session.id}{shown}\n")
    # The campaign's opening (scene 0): the story is on screen before the first line.
    if session.last_narration:
        screen.text("\n" + session.last_narration.rstrip("\n") + "\n")
    if session.choices:
        screen.text("\n" + format_choices(session.choices))
    return session


def _open_session(client: NarratoriaClient, args: argparse.Namespace,
                  screen: _Screen) -> pb.Session | None:
    """The session to play, or None: an ended one with nothing chosen instead."""
    if args.session:
        session = client.resume_session(args.session)
        if session.status == ENDED:
            replaced = _replace_ended(client, args, session, screen)
            if replaced is None:
                return None
            session = replaced
        else:
            screen.text(format_session(session))
    else:
        session = _new_session(client, campaign_ref(args.campaign or ""), args.title or "",
                               args.character or "", screen)
    screen.doc({"kind": "session", "session": message_to_dict(session)})
    return session


def _play_turn(client: NarratoriaClient, session_id: str, action: Action, screen: _Screen,
               verbose: bool) -> TurnRenderer:
    """Stream one turn to the screen; the renderer keeps its choices and result."""
    # Faint wait lines only where a person reads a terminal: a pipe gets plain text.
    renderer = TurnRenderer(verbose=verbose, dim=not screen.json and sys.stdout.isatty())
    for ev in client.turn(session_id, text=action.text, choice=action.choice):
        text = renderer.feed(ev)  # fed under --json too: it tracks the choices
        screen.text(text)
        screen.doc(event_to_dict(ev))
    return renderer


def _next_action_source(args: argparse.Namespace, screen: _Screen
                        ) -> Callable[[Sequence[str]], Action | None]:
    """A function from the choices on offer to the next action (None: input is over)."""
    if args.auto:
        def auto(choices: Sequence[str]) -> Action:
            action = auto_action(choices)
            screen.text(f"> {action.choice if action.choice else action.text}\n")
            return action
        return auto
    if args.script:
        lines, echo = _script_lines(Path(args.script)), True
    elif sys.stdin.isatty():
        lines, echo = _terminal_lines(sys.stderr if args.json else sys.stdout), False
    else:
        lines, echo = _stream_lines(sys.stdin), True

    def typed(choices: Sequence[str]) -> Action | None:
        line = next(lines, None)
        if line is None:
            return None
        if echo:  # a transcript of piped input reads like a session at the terminal
            screen.text(f"> {line}\n")
        return parse_action(line, choices)
    return typed


# -- retry and rewind ----------------------------------------------------------------------
# Both are the daemon's Branch: a new session (a take) as the old one was before a scene,
# the old one untouched. Play keeps no history of its own.

def _kept(old: pb.Session) -> str:
    return (f"the old take, session {old.id}, is kept: "
            f"`narratoria play --session {old.id}` goes back to it")


def _take_again(client: NarratoriaClient, session: pb.Session, turns: int, action: Action,
                last_turn: Action | None, screen: _Screen) -> tuple[pb.Session, Action] | None:
    """``/retry`` or ``/rewind N``: the new take to play on and what to do first in it (the
    last scene's input again for a retry this loop saw played, else nothing), or None
    (nothing branched, the reason said)."""
    if turns < 1:
        screen.note(f"  nothing to {action.kind} yet: no scene has been played\n")
        return None
    scene = turns if action.kind == "retry" else action.scene or 0
    if not 1 <= scene <= turns:
        screen.note(f"  no scene {scene} to rewind to: pick 1..{turns} "
                    f"(session {session.id} has played {turns} scene(s))\n")
        return None
    try:
        branched = client.branch(session.id, at_scene=scene)
    except ClientError as exc:
        if exc.code not in RECOVERABLE:
            raise
        err(str(exc))
        return None
    screen.doc({"kind": "branch", "session": message_to_dict(branched), "parent": session.id,
                "at_scene": scene})
    if action.kind == "retry":
        screen.note(f"  retrying scene {scene} as a new take: session {branched.id} "
                    f"({_kept(session)})\n")
        if last_turn is None:  # resumed: the last scene's input was typed elsewhere
            screen.note(f"  scene {scene} is next: say or pick what to do\n")
            screen.text(format_session(branched))
            return branched, Action("none")
        shown = last_turn.choice if last_turn.choice else last_turn.text
        screen.text(f"> {shown}\n")
        return branched, last_turn
    screen.note(f"  rewound to scene {scene} as a new take: session {branched.id}; "
                f"scene {scene} is next ({_kept(session)})\n")
    screen.text(format_session(branched))
    return branched, Action("none")


def cmd_play(args: argparse.Namespace) -> int:
    """Run the game loop on arguments ``commands/play.py`` has checked. Raises ClientError
    for errors that end it (the CLI reports them)."""
    limit = args.turns  # None: until the input ends
    screen = _Screen(json=args.json)
    with NarratoriaClient() as client:
        session = _open_session(client, args, screen)
        if session is None:
            return ExitCode.FAILED
        choices: list[str] = list(session.choices)
        next_action = _next_action_source(args, screen)
        played = 0
        turns = session.turns
        last_turn: Action | None = None  # what played the last scene, if this loop played it
        while limit is None or played < limit:
            action = next_action(choices)
            if action is None or action.kind == "quit":
                break
            if action.kind in ("retry", "rewind"):
                again = _take_again(client, session, turns, action, last_turn, screen)
                if again is None:
                    continue
                session, action = again
                turns, choices = session.turns, list(session.choices)
                last_turn = action if action.kind == "turn" else None
            if action.kind == "help":
                screen.note(HELP)
            elif action.kind == "choices":
                screen.note(format_choices(choices) if choices else "  no choices on offer\n")
            elif action.kind == "invalid":
                screen.note(f"  {action.message}\n")
            elif action.kind == "state":
                state = client.get_state(session.id)
                screen.text(format_state(state))
                screen.doc({"kind": "state", **message_to_dict(state)})
            elif action.kind == "turn":
                try:
                    renderer = _play_turn(client, session.id, action, screen, args.verbose)
                except ClientError as exc:
                    if args.auto or exc.code not in RECOVERABLE:
                        raise
                    err(str(exc))
                    continue
                except KeyboardInterrupt:
                    print(f"\n(interrupted: the daemon still finishes this turn; "
                          f"`narratoria play --session {session.id}` shows it)", file=sys.stderr)
                    return ExitCode.INTERRUPTED
                if renderer.done is None:
                    raise ClientError("UNKNOWN", "the turn's stream ended before the turn did")
                played += 1
                turns += 1
                last_turn = action
                choices = renderer.choices
        if args.end:
            client.end_session(session.id)
        ended = "ended" if args.end else f"resume with `narratoria play --session {session.id}`"
        screen.text(f"\nsession {session.id} · {played} turn(s) played · {ended}\n")
    return ExitCode.SUCCESS
