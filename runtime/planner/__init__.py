"""Planners: turn player input into Plan JSON."""

from .base import PlanRequest, Planner
from .pattern import PatternPlanner

__all__ = ["PatternPlanner", "PlanRequest", "Planner"]
