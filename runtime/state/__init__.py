"""Session state: deep merge of state patches, dot paths, stat clamping (docs/state.md)."""

from narratoria.runtime.state.merge import deep_merge, json_copy, merged
from narratoria.runtime.state.paths import (
    StatePathError,
    delete_path,
    get_path,
    iter_matching,
    path_matches,
    set_path,
    split_path,
)
from narratoria.runtime.state.session import SessionState, StatRange, check_json

__all__ = [
    "SessionState",
    "StatePathError",
    "StatRange",
    "check_json",
    "deep_merge",
    "delete_path",
    "get_path",
    "iter_matching",
    "json_copy",
    "merged",
    "path_matches",
    "set_path",
    "split_path",
]
