"""Story-mode narration with the real SmolLM2 model (docs/scene.md, "Narration"): best of N by the
eval's own scorers, the unsafe fallback, and prose that begins with the engine's lead.
"""

from __future__ import annotations

from collections import Counter

import pytest

from narratoria.runtime.planner.best_of import Candidate, Judge, Sampling, StoryTeller, choose
from narratoria.runtime.planner.decoding import NarrationProcessor, NarrationVocab
from narratoria.runtime.planner.model import ModelPlanner, resolve_narration_mode
from narratoria.runtime.planner.narration import NarrationContext
from narratoria.runtime.planner.narration_scores import meta_talk, narrator_first_person, unsafe

pytestmark = pytest.mark.model


@pytest.fixture(scope="module")
def planner() -> ModelPlanner:
    return ModelPlanner(narration_mode="story", narration_candidates=3, seed=7)


def candidate(vocab: NarrationVocab, seq: int, text: str, logprob: float = -1.0) -> Candidate:
    return Candidate(seq, NarrationProcessor(vocab, start=0), tokens=[1, 2, 3],
                     logprob=logprob * 3, done=True, text=text)


def test_the_candidate_with_fewest_problems_is_kept(planner) -> None:
    vocab = planner.narration_vocab()
    judge = Judge.of("I light the tide lantern", rating="Teen",
                     previous="The flats are dark and the water is coming back in fast.")
    meta = candidate(vocab, 0, " The player lights the lantern and the game goes on.", -0.1)
    voice = candidate(vocab, 1, " I think you should light it slowly.", -0.2)
    repeat = candidate(vocab, 2, " The flats are dark and the water is coming back in fast.", -0.1)
    clean = candidate(vocab, 3, " The lantern catches, and green light spills across the mud.",
                      -2.5)
    assert choose([meta, voice, repeat, clean], "You light the tide lantern.", judge) is clean
    # among equally clean candidates the model's own likelier one wins
    likely = candidate(vocab, 4, " The lantern flares, and its light is green on the stones.", -0.5)
    assert choose([clean, likely], "You light the tide lantern.", judge) is likely


def test_an_unsafe_candidate_is_never_kept(planner) -> None:
    vocab = planner.narration_vocab()
    judge = Judge.of("I wait", rating="Everyone")
    gun = candidate(vocab, 0, " A man raises a gun and shoots the guard dead.", -0.01)
    meta = candidate(vocab, 1, " The player waits while the story moves on.", -3.0)
    assert choose([gun, meta], "You wait.", judge) is meta
    assert choose([gun], "You wait.", judge) is None
    # the same words are allowed where the campaign's rating allows them
    assert choose([gun], "You wait.", Judge.of("I wait", rating="Teen")) is gun


def test_story_mode_continues_the_lead_in_the_second_person(planner) -> None:
    lead = "You haul yourself onto the sea wall, and the wet stone scrapes your palms."
    context = NarrationContext(
        player_input="I climb the sea wall", lead=lead, rating="Teen",
        scene="The tide is coming back. Wick points at the sea wall and tells you to hurry.",
        facts="description: Brinehollow is a harbour town whose old quarter drowned a century "
              "ago and rises from the mud each Ebb.")
    pieces = list(planner.narrate(context))
    text = "".join(pieces)
    assert pieces[0] == lead  # the lead at once, before the model's first sentence
    assert text.startswith(lead)
    rest = text[len(lead):].strip()
    assert len(rest.split()) >= 5, text
    assert not narrator_first_person(text) and not meta_talk(text), text
    assert not unsafe(text, "Teen")
    stats = planner.last_stats
    assert stats is not None and stats.kind == "narration" and not planner.batcher.busy


def test_every_candidate_unsafe_leaves_the_engines_sentence_alone(planner) -> None:
    # Violence is unsafe in an "Everyone" campaign. Greedy decoding of a scene of
    # nothing else makes every candidate of the first round say some of it (checked
    # below, so the test cannot pass without the fallback being exercised).
    prompt = ("Blood on the stones. Blood on the walls. Blood on the quay. Blood on the "
              "boats. Blood on the steps. Blood on the")
    greedy = Sampling(temperature=0.0, repeat_penalty=1.0)

    def run(rating: str) -> tuple[list[str], StoryTeller]:
        tellers: list[StoryTeller] = []
        judge = Judge.of("I watch", rating=rating)

        def produce(lease):
            tellers.append(StoryTeller(lease, planner.narration_vocab(), n=3, seed=1,
                                       sampling=greedy))
            return tellers[0].tell(prompt, "Blood on the", judge, soft_tokens=20, max_tokens=40)

        told = list(planner.run("test", produce, need=3))
        return told, tellers[0]

    told, teller = run("Everyone")
    assert teller.rounds == 1 and len(teller.last_round) == 3
    assert all(unsafe(t, "Everyone") for t in teller.last_round), teller.last_round
    assert told == []  # nothing after the lead
    told, _ = run("Teen")  # the same words where the rating allows them
    assert told and unsafe("".join(told), "Everyone")

    # through the narrator, nothing unsafe is ever shown after the engine's lead
    context = NarrationContext(player_input="I watch the soldiers", lead="You watch.",
                               scene=prompt, rating="Everyone")
    text = "".join(planner.narrate(context))
    assert text.startswith("You watch.")
    assert not unsafe(text, "Everyone"), text


def test_after_story_narration_only_its_first_sequence_holds_cells(planner) -> None:
    from llama_cpp import llama_cpp

    used: list[list[int]] = []
    real = planner.batcher.submit

    def recording(start, **options):
        def program(lease):
            used.append(list(lease.seqs))
            return (yield from start(lease))
        return real(program, **options)

    cells = planner.batcher.cells
    before = Counter(tuple(held) for held in cells if held)
    planner.batcher.submit = recording
    try:
        list(planner.narrate(NarrationContext(player_input="I open the gate")))
    finally:
        del planner.batcher.submit
    # one sequence leased; the candidates' branches were borrowed and handed back empty
    assert len(used) == 1 and len(used[0]) == 1
    home = used[0][0]
    assert len(cells[home]) > 10
    # besides home, only prompt caches held before (a cache may move out of the way)
    assert not Counter(tuple(held) for s, held in enumerate(cells) if held and s != home) - before
    assert planner.status()["sequences"]["used"] == 0
    # the batch's record of every sequence is what llama.cpp holds
    memory = llama_cpp.llama_get_memory(planner.llm.ctx)
    for seq, held in enumerate(cells):
        assert llama_cpp.llama_memory_seq_pos_max(memory, seq) == len(held) - 1, seq
    # and the model still plans afterwards (the planning path shares this context)
    text, stats = planner.complete([{"role": "user", "content": "Say hello."}], "complete",
                                   max_tokens=8)
    assert text and stats.finish_reason in ("length", "stop")


def test_auto_mode_narrates_the_small_default_model_in_story_mode(planner) -> None:
    assert resolve_narration_mode(planner.llm, "auto") == "story"
    assert resolve_narration_mode(planner.llm, "chat") == "chat"
    assert planner.status()["narrationMode"] == "story"
