"""Which recalled memories the narrator is given beside the last scene."""

from __future__ import annotations

from narratoria.runtime.turn.scene import _beyond, scene_summary


def test_the_last_scenes_own_summary_is_not_told_twice():
    last = "You pull yourself over the wall.\nFishermen mend nets by the lighthouse."
    memories = [scene_summary(3, "I climb the wall", last),
                scene_summary(1, "I enter the town", "A bell rings over the harbour.")]
    assert _beyond(memories, last) == [memories[1]]
    assert _beyond(memories, "") == memories  # the first scene has no last narration
