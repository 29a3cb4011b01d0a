"""A plan given by the caller instead of generated (``narratoria turn --plan``, load tests).

A skill developer runs a plan of their own through a real session — the executor,
the supervisor's limits, the Store service, the state — without the planner
deciding anything. A retry (replan) runs the same plan again under a new id.
"""

from __future__ import annotations

import msgspec

from narratoria.runtime.planner.base import PlanRequest
from narratoria.runtime.skillrun.plan import Plan, new_plan_id


class FixedPlanner:
    name = "fixed"

    def __init__(self, plan: Plan) -> None:
        self.plan = plan

    async def generate(self, request: PlanRequest) -> Plan:
        if request.attempt == 1:
            return self.plan
        return msgspec.structs.replace(self.plan, requestId=new_plan_id())
