"""Choices offered after a turn: cleaned, de-duplicated, topped up to three."""

from __future__ import annotations

from narratoria.runtime.planner.choices import (FALLBACK_CHOICES, MAX_CHOICES, MIN_CHOICES,
                                                 clean_choices, fallback_choices)


def test_the_models_own_numbering_and_empty_options_are_dropped():
    raw = ["1. Unlock the door", "2) Run", "- Hide", "...", "  ", "unlock   the door", "Go 2 ways"]
    assert clean_choices(raw) == ["Unlock the door", "Run", "Hide", "Go 2 ways"]


def test_at_most_four_and_at_least_three_with_stock_actions():
    assert len(clean_choices([f"Option {c}" for c in "abcdef"])) == MAX_CHOICES
    topped = fallback_choices(["...", "Press on ahead"])
    assert len(topped) == MIN_CHOICES and topped[0] == "Press on ahead"
    assert len(set(topped)) == len(topped) and set(topped) <= {"Press on ahead", *FALLBACK_CHOICES}
    assert fallback_choices([]) == list(FALLBACK_CHOICES[:MIN_CHOICES])
