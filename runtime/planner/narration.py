"""Narration (docs/scene.md, "Narration"): the turn's prose, streamed as it is generated.

It shares the planner's model, a request of its batch beside other sessions' (pass the
:class:`~.model.ModelPlanner`, or call ``planner.narrate(context)``).

Two modes (the planner's ``narration_mode``; ``serve --narration-mode``):

- **story** (``auto`` for small or base models): the scene as prose and the action as
  "You …" (.story), continued by the model as a raw completion after the engine's lead,
  sentence by sentence, each the best of N candidates by the eval's scorers (.best_of).
  The lead is yielded at once; each chosen sentence as its round ends.
- **chat**: the system/user messages below, for instruct models that do better with a
  chat request; the reply is begun with "You".

Both decode under the same constraints (.decoding): no meta words, no narrator's "I"
outside quotes, no 4-gram of the previous turn, no prompt markup.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from narratoria.runtime.planner.model import ModelPlanner
from narratoria.runtime.sentences import sentence_starts

if TYPE_CHECKING:
    from narratoria.runtime.planner.batching import Lease, Program

NARRATION_MAX_TOKENS = 170  # a hard stop; each token ~11 ms on 2 cores
# Past this many pieces the narration ends at the next sentence end, not mid-word
# at the hard stop: 2-3 short paragraphs.
NARRATION_SOFT_TOKENS = 110
_SENTENCE_END = (".", "!", "?", '."', '!"', '?"', ".'", "…")
# The reply starts with "You": SmolLM2-135M, told to write in the second person,
# still wrote "I was standing at the edge of the harbour wall" in most turns.
NARRATION_PREFILL = "You"
# Prose has no labels or markup: with these characters allowed the model wrote
# "You: Ah, …", echoed the prompt's "Player action:" and "Scene:", and "**bold**".
NARRATION_FORBIDDEN = ":*#"
FACTS_HEADING = ("Campaign facts (true in this story: use their details as written, "
                 "never contradict them):")
PARAGRAPH_SENTENCES, PARAGRAPH_WORDS, MAX_PARAGRAPHS = 2, 30, 3
SCENE_BUDGET = 250
# Story mode's continuation after the lead, in tokens: (soft, hard) as above, by style.
STORY_TOKENS = {"": (70, 120), "terse": (40, 80), "vivid": (80, 130), "poetic": (80, 130)}
# The storyteller's styles, told to the model after the action: the system
# prompt stays the same, so its KV state is shared across styles.
NARRATION_STYLES = {"": "", "terse": "terse: short, plain sentences, no adjectives to spare.",
                    "vivid": "vivid: concrete sights, sounds and smells.",
                    "poetic": "poetic: rhythm and imagery, a lyrical voice."}  # the end of the last narration: what just happened, not all of it
CONTEXT_BUDGET = 400  # characters per context part: the model writes better from less

NARRATOR_ROLE = (
    "You are the narrator of an interactive story. Write 2-3 short paragraphs in the "
    "second person (\"you\") telling what happens after the player's action, using the "
    "outcomes given. Never speak, think or decide for the player character, and never "
    "list choices: stop when it is the player's turn to act."
)


@dataclass(frozen=True)
class NarrationContext:
    """What the narrator is told about the turn; every part is optional but the action."""

    player_input: str
    scene: str = ""                                  # where we are, what just happened
    outcomes: Sequence[str] = ()                     # tool summaries: "You rolled 9 (2d6)."
    memories: Sequence[str] = ()                     # relevant earlier events
    state: Mapping[str, Any] = field(default_factory=dict)
    npc_knowledge: Sequence[str] = ()                # per present NPC: "Mara knows: ..." (its own only)
    facts: str = ""                                  # campaign facts, assembled (grounding.py)
    # For the choices (choices.py): present NPCs' perception of the player by name, and
    # the player's numeric stats by name ("charisma": 6).
    npc_perception: Mapping[str, float] = field(default_factory=dict)
    player_stats: Mapping[str, float] = field(default_factory=dict)
    style: str = ""                                  # "", terse, vivid, poetic (NARRATION_STYLES)
    # The campaign's asks for this scene: plot beats due now, stats' prompts that apply.
    guidance: Sequence[str] = ()
    # The engine's decisions (runtime/turn/scene.py; docs/scene.md, "The engine decides"):
    # ``lead`` is the narration's first sentence(s), the engine's — a risky action's
    # outcome and cost, a plot beat told — which the narration begins with verbatim and
    # the model continues ("": none);
    # ``outcome`` is that check's (success | partial | failure, "" without one);
    # ``names`` the canonical names of the present NPCs, the place and the items;
    # ``rating`` the campaign's content rating; ``forbid_new_names`` whether the campaign
    # forbids invented people (the scene's name relay then removes any it finds).
    lead: str = ""
    outcome: str = ""
    names: Sequence[str] = ()
    rating: str = ""
    forbid_new_names: bool = False
    session: str = ""   # whose turn: the model serves sessions in turn (.batching)
    # The item ids the player holds once the turn's skills ran and its handover was
    # taken (None: not known): the menu, built from the scene before the turn, offers
    # nothing given away in it.
    carried: Sequence[str] | None = None
    # The place the action took the player to (runtime/turn/movement.py; "": stayed):
    # the menu is then the new place's.
    moved_to: str = ""
    # Whether the action may be told back as the story's sentence: the engine's
    # judgement, which knows the campaign's names ("the prompt book" is a theatre's);
    # None: the narrator judges by the action's words alone (story.out_of_fiction).
    told_back: bool | None = None


def narration_messages(context: NarrationContext) -> list[dict[str, str]]:
    parts: list[str] = []
    if context.facts.strip():
        # Grounding: the campaign's words win over invention.
        parts.append(f"{FACTS_HEADING}\n{context.facts.strip()}")
    if context.guidance:
        parts.append("Campaign guidance: " + _clip(" ".join(context.guidance)))
    if context.scene.strip():
        parts.append(f"Scene: {_tail(context.scene)}")
    if context.memories:
        parts.append("Earlier: " + _clip(" ".join(context.memories)))
    if context.npc_knowledge:
        parts.append("Characters (each knows only this): " + _clip(" ".join(context.npc_knowledge)))
    if context.state:
        state = json.dumps(dict(context.state), separators=(",", ":"), default=str)
        parts.append(f"State: {_clip(state)}")
    parts.append(f"Player action: {_clip(' '.join(context.player_input.split()))}")
    if context.outcomes:
        parts.append("Outcomes: " + _clip(" ".join(context.outcomes)))
    if context.style:
        parts.append(f"Style: {NARRATION_STYLES[context.style]}")
    return [{"role": "system", "content": NARRATOR_ROLE},
            {"role": "user", "content": "\n".join(parts)}]


def stream_narration(source: ModelPlanner, context: NarrationContext | str, *,
                     max_tokens: int = NARRATION_MAX_TOKENS, temperature: float = 0.7,
                     cancel: threading.Event | None = None,
                     then: Callable[[Lease, str], Program] | None = None) -> Iterator[str]:
    """Narration pieces as the model generates them.

    With a ModelPlanner the narration is a request of its batch, queued on the first
    ``next()`` and cancelled when the iterator is closed early; ``then`` follows it on
    the same sequence (see :meth:`~.model.ModelPlanner.stream`).
    """
    if isinstance(context, str):
        context = NarrationContext(player_input=context)
    if source.narration_mode == "story":
        return paragraphed(_story(source, context, max_tokens=max_tokens, cancel=cancel,
                                  then=then))
    messages = narration_messages(context)
    # Small models loop on a phrase; a mild repeat penalty keeps prose moving.
    options: dict[str, Any] = {"max_tokens": max_tokens, "temperature": temperature,
                               "top_p": 0.9, "repeat_penalty": 1.15}
    return paragraphed(source.stream(
        messages, "narration", cancel=cancel, prefill=NARRATION_PREFILL,
        stop_when=sentence_end_after(NARRATION_SOFT_TOKENS), then=then,
        session=context.session, logits_processor=_constraints(source, context.scene),
        **options))


def _story(planner: ModelPlanner, context: NarrationContext, *, max_tokens: int,
           cancel: threading.Event | None,
           then: Callable[[Lease, str], Program] | None) -> Iterator[str]:
    """Story mode: the lead at once (it is the engine's; the model may still be busy
    with another session's turn), then the model's continuation, sentence by
    sentence, each the best of ``planner.narration_candidates`` (.best_of)."""
    from narratoria.runtime.planner.best_of import Judge, StoryTeller
    from narratoria.runtime.planner.story import story_prompt

    prompt = story_prompt(context)
    judge = Judge.of(context.player_input, context.rating, context.scene, context.names)
    soft, hard = STORY_TOKENS.get(context.style, STORY_TOKENS[""])
    soft, hard = min(soft, max_tokens), min(hard, max_tokens)

    def produce(lease: Lease) -> Program:
        teller = StoryTeller(lease, planner.narration_vocab(), n=planner.narration_candidates,
                             seed=planner.seed,
                             width=lambda: planner.candidates_now(lease.running("narration")))
        return teller.tell(prompt.text, prompt.lead, judge, soft_tokens=soft, max_tokens=hard,
                           cancel=cancel)

    def follow(lease: Lease, text: str) -> Program:
        if then is not None:
            yield from then(lease, prompt.lead + text)

    if prompt.lead:
        yield prompt.lead
    yield from planner.run("narration", produce, cancel=cancel, then=follow,
                           session=context.session)


def _constraints(planner: ModelPlanner, previous: str) -> Any:
    """The chat path's decoding constraints (.decoding), as llama-cpp-python takes them."""
    from narratoria.runtime.planner.decoding import NarrationProcessor, PreviousTurnNgrams

    grams = PreviousTurnNgrams(planner.llm.tokenize(previous.encode(), add_bos=False)
                               if previous.strip() else [])
    return [NarrationProcessor(planner.narration_vocab(), previous=grams)]


def paragraphed(pieces: Iterator[str]) -> Iterator[str]:
    """``pieces`` laid out in at most three paragraphs (2-3 is the aim).

    The 135M model mostly writes one block, or breaks after every sentence. Here a
    paragraph ends at a sentence end once it holds PARAGRAPH_SENTENCES sentences and
    PARAGRAPH_WORDS words; the model's own line breaks count as paragraph breaks while
    fewer than MAX_PARAGRAPHS have begun, and become spaces after. Only the layout
    changes: the words are the model's (its follow-up reads its own text).
    """
    paragraphs, sentences, words, breaking = 1, 0, 0, False
    try:
        for piece in pieces:
            if "\n" in piece:
                head, _, tail = piece.partition("\n")
                room = paragraphs < MAX_PARAGRAPHS and (head.strip() or words)
                piece = head.rstrip() + ("\n\n" if room else " ") + tail.lstrip("\n ")
                if room:
                    paragraphs, sentences, words, breaking = paragraphs + 1, 0, 0, False
            elif breaking and piece.strip():
                piece = "\n\n" + piece.lstrip()
                paragraphs, sentences, words, breaking = paragraphs + 1, 0, 0, False
            words += len(piece.split())
            if piece.rstrip().endswith(_SENTENCE_END):
                sentences += 1
                breaking = (sentences >= PARAGRAPH_SENTENCES and words >= PARAGRAPH_WORDS
                            and paragraphs < MAX_PARAGRAPHS)
            yield piece
    finally:
        close = getattr(pieces, "close", None)
        if close is not None:
            close()  # a consumer that leaves early stops the model


def sentence_end_after(soft_limit: int) -> Callable[[int, str], bool]:
    """A ``stop_when``: true at the first sentence end once ``soft_limit`` pieces are out."""
    return lambda count, piece: count >= soft_limit and piece.rstrip().endswith(_SENTENCE_END)


def _clip(text: str, budget: int = CONTEXT_BUDGET) -> str:
    text = text.strip()
    return text if len(text) <= budget else text[:budget - 1].rstrip() + "…"


def _tail(text: str, budget: int = SCENE_BUDGET) -> str:
    """The last whole sentences of ``text`` that fit ``budget`` characters."""
    text = " ".join(text.split())
    if len(text) <= budget:
        return text
    cut = text[-budget:]
    starts = sentence_starts(cut)
    return cut[starts[0]:] if starts and starts[0] < len(cut) else "…" + cut.lstrip()
