"""KernelEnv: the typed OpenEnv client of a kernel_env server.

    env = KernelEnv(base_url="http://host:8000", message_timeout_s=900).sync()
    obs = env.reset(task_id="level1/19_ReLU", split="train").observation
    r = env.step(KernelAction(code=src)); r.observation.speedup, r.reward, r.done
    env.state().history; env.close()

The auth token comes from `token=` or $KERNEL_ENV_TOKEN and travels as `Authorization: Bearer`.
"""
from __future__ import annotations

import os
from typing import Any, Dict, Optional

from openenv.core.client_types import StepResult
from openenv.core.env_client import EnvClient

from .models import KernelAction, KernelObservation, KernelState

TOKEN_ENV = "KERNEL_ENV_TOKEN"


class KernelEnv(EnvClient[KernelAction, KernelObservation, KernelState]):
    def __init__(self, base_url: Optional[str] = None, token: Optional[str] = None,
                 headers: Optional[Dict[str, str]] = None, **kwargs: Any):
        token = token if token is not None else os.environ.get(TOKEN_ENV) or None
        hdrs = dict(headers or {})
        if token:
            hdrs["Authorization"] = f"Bearer {token}"
        super().__init__(base_url=base_url, headers=hdrs or None, **kwargs)

    def _step_payload(self, action: KernelAction) -> Dict[str, Any]:
        return {"code": action.code}

    def _parse_result(self, payload: Dict[str, Any]) -> StepResult[KernelObservation]:
        obs = dict(payload.get("observation") or {})
        # tolerate a newer server that sends more fields: KernelObservation forbids extras
        known = {k: v for k, v in obs.items() if k in KernelObservation.model_fields}
        known.update(done=payload.get("done", False), reward=payload.get("reward"),
                     metadata=payload.get("metadata", obs.get("metadata") or {}))
        observation = KernelObservation.model_validate(known)
        return StepResult(observation=observation, reward=payload.get("reward"),
                          done=payload.get("done", False), metadata=payload.get("metadata"))

    def _parse_state(self, payload: Dict[str, Any]) -> KernelState:
        return KernelState.model_validate(payload)
