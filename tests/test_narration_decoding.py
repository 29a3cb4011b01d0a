"""Narration's decoding constraints (docs/scene.md, "Narration") with the default model's real
tokenizer: meta words and the narrator's "I" kept out, "I" allowed inside quotes, the
previous turn's n-grams pushed down (runtime/planner/decoding.py)."""

from __future__ import annotations

import numpy as np
import pytest

from narratoria.runtime.planner.decoding import (FORBID, REPEAT_NGRAM_BIAS, NarrationProcessor,
                                                 NarrationVocab, PreviousTurnNgrams, QuoteState)
from narratoria.runtime.planner.model import default_model_path

pytestmark = pytest.mark.model


@pytest.fixture(scope="module")
def llm():
    from llama_cpp import Llama

    return Llama(str(default_model_path()), vocab_only=True, verbose=False)


@pytest.fixture(scope="module")
def vocab(llm) -> NarrationVocab:
    return NarrationVocab.of(llm)


def token(llm, text: str) -> int:
    ids = llm.tokenize(text.encode(), add_bos=False)
    assert len(ids) == 1, (text, ids)
    return ids[0]


def tokens(llm, text: str) -> list[int]:
    return llm.tokenize(text.encode(), add_bos=False)


def test_the_vocabulary_is_sorted_by_what_narration_may_not_say(llm, vocab) -> None:
    first = set(vocab.first_person.tolist())
    meta = set(vocab.meta.tolist())
    for word in (" I", "I", " my", " me", " we", " our", " myself"):
        assert token(llm, word) in first, word
    for word in (" player", " players", " game", " narrator", " scenario", " prompt", " Player"):
        assert token(llm, word) in meta, word
    for word in (" you", " your", " In", " It", " Image", " gamble"):
        ids = tokens(llm, word)
        assert not (set(ids) & first), word
    assert token(llm, " story") in set(vocab.soft_meta.tolist())
    assert token(llm, ":") in set(vocab.forbidden.tolist())


def scores_after(llm, vocab, prompt: str, text: str, **kw) -> tuple[np.ndarray, NarrationProcessor]:
    """The processor's scores for the next token after ``prompt`` + ``text`` (flat logits)."""
    head = tokens(llm, prompt)
    processor = NarrationProcessor(vocab, start=len(head), before=kw.pop("before", ""), **kw)
    ids = head + tokens(llm, text)
    return processor(np.array(ids, dtype=np.intc), np.zeros(vocab.n_vocab, dtype=np.single)), \
        processor


def test_the_narrators_i_is_forbidden_outside_quotes_only(llm, vocab) -> None:
    I, my, you = token(llm, " I"), token(llm, " my"), token(llm, " you")
    scores, p = scores_after(llm, vocab, "You climb the wall.", " The stones are wet and")
    assert scores[I] == FORBID and scores[my] == FORBID and scores[you] == 0
    assert not p.inside_quote
    scores, p = scores_after(llm, vocab, "You climb the wall.", ' Wick shouts, "Hold on,')
    assert p.inside_quote and scores[I] == 0 and scores[my] == 0
    scores, p = scores_after(llm, vocab, "You climb the wall.",
                             ' Wick shouts, "Hold on, I have you." Then')
    assert not p.inside_quote and scores[I] == FORBID
    # curly quotes open and close too
    scores, p = scores_after(llm, vocab, "You wait.", " Orla says, “Stay, and")
    assert p.inside_quote and scores[I] == 0
    scores, p = scores_after(llm, vocab, "You wait.", " Orla says, “Stay.” Then")
    assert not p.inside_quote and scores[I] == FORBID
    # meta words are out everywhere, quotes or not
    scores, _ = scores_after(llm, vocab, "You wait.", ' Orla says, "The')
    assert scores[token(llm, " player")] == FORBID and scores[token(llm, " game")] == FORBID


def test_a_quote_opened_by_the_lead_is_followed(llm, vocab) -> None:
    # The lead is in the prompt: 'You ask Orla, "What is in the satchel?' leaves the
    # quote open when the model starts.
    lead = 'You ask Orla, "What is in the satchel'
    scores, p = scores_after(llm, vocab, lead, "", before=lead)
    assert p.inside_quote and scores[token(llm, " I")] == 0


def test_the_quote_state_follows_bytes_split_across_tokens() -> None:
    state = QuoteState()
    curly = "“".encode()
    state.feed_bytes(b"She says, " + curly[:1])
    assert not state.inside
    state.feed_bytes(curly[1:] + b"Go")
    assert state.inside
    state.feed_bytes("”".encode())
    assert not state.inside


def test_the_previous_turn_is_not_copied(llm, vocab) -> None:
    previous = "The tide bell rings once over the drowned town, and the lights answer."
    grams = PreviousTurnNgrams(tokens(llm, previous))
    head = tokens(llm, "You listen.") + tokens(llm, " The tide bell rings")
    processor = NarrationProcessor(vocab, start=3, previous=grams)
    scores = processor(np.array(head, dtype=np.intc), np.zeros(vocab.n_vocab, dtype=np.single))
    copied = tokens(llm, " The tide bell rings once")[len(tokens(llm, " The tide bell rings")):][0]
    assert scores[copied] == pytest.approx(REPEAT_NGRAM_BIAS)
    # a run the last turn never had is free
    fresh = tokens(llm, "You listen.") + tokens(llm, " The wind drops")
    scores = NarrationProcessor(vocab, start=3, previous=grams)(
        np.array(fresh, dtype=np.intc), np.zeros(vocab.n_vocab, dtype=np.single))
    assert (scores[np.isfinite(scores)] >= -4.0).all()
