"""Play sessions: persisted sessions, their takes and scenes, and the view a front-end draws."""
