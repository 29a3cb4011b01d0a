"""The runtime's one sentence splitter: where sentences end, and that no text is lost."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from narratoria.runtime.sentences import (ends_sentence, first_sentence, sentence_ends,
                                          sentence_starts, sentences)


def test_sentences_end_at_terminal_marks_with_their_closing_quotes():
    text = 'He said "Go." Then he left... Why?! Wait\u2026 the door (ajar.) creaks'
    assert sentences(text) == ['He said "Go."', "Then he left...", "Why?!", "Wait\u2026",
                               "the door (ajar.)", "creaks"]


def test_a_point_without_space_after_it_ends_nothing_and_line_breaks_are_spaces():
    assert sentences("It costs 3.5 coins, e.g.x or\nmore. Done.") == [
        "It costs 3.5 coins, e.g.x or\nmore.", "Done."]
    assert sentences("") == [] and sentences("  \n ") == []


def test_offsets_and_the_first_sentence():
    text = "One. Two!  Three"
    assert sentence_ends(text) == [4, 9]
    assert sentence_starts(text) == [5, 11]
    assert first_sentence("  One. Two.") == "One."
    assert first_sentence("no end at all") == "no end at all"
    assert first_sentence("") == ""
    assert ends_sentence('"Go."') and ends_sentence("Why?! ") and not ends_sentence("Go")


@given(st.text(alphabet=st.sampled_from(list("ab .!?\u2026\"')\n"))))
def test_nothing_but_the_whitespace_between_sentences_is_lost(text):
    found = sentences(text)
    assert "".join("".join(found).split()) == "".join(text.split())
    assert all(s == s.strip() and s for s in found)
