"""The daemon's host side: where it listens, who may talk to it, where its data lives, and what it accepts."""
