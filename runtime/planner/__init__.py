"""Planners: turn player input into Plan JSON."""

from .base import PlanRequest, Planner
from .grammar import model_plan_to_plan, plan_schema, to_grammar
from .model import FairLock, ModelError, ModelPlanner, default_model_path
from .narration import NarrationContext, stream_narration
from .pattern import PatternPlanner

__all__ = [
    "FairLock",
    "ModelError",
    "ModelPlanner",
    "NarrationContext",
    "PatternPlanner",
    "PlanRequest",
    "Planner",
    "default_model_path",
    "model_plan_to_plan",
    "plan_schema",
    "stream_narration",
    "to_grammar",
]
