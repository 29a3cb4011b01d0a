"""One turn of play: the scene pipeline, the bounded replan loop, the engine's resolution of risky actions, and what grounds the narration."""
