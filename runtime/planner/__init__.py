"""Planners: turn player input into Plan JSON."""

from narratoria.runtime.planner.base import PlanRequest, Planner
from narratoria.runtime.planner.grammar import model_plan_to_plan, plan_schema, to_grammar
from narratoria.runtime.planner.model import ModelError, ModelPlanner, default_model_path
from narratoria.runtime.planner.narration import NarrationContext, stream_narration
from narratoria.runtime.planner.pattern import PatternPlanner

__all__ = [
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
