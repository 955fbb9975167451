"""The environment contract for Python envs: an `Env` subclass per env (one instance per
session) and the `StepResult` its `step` returns, with the same meaning as the Rust `Env`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from . import wire
from .messages import user

#: Keys of the Rust `StepInfo`; any other metric key goes to its `extra` map.
STEP_INFO_KEYS = ("invalid_action", "tool_calls", "tool_errors", "success", "score")


class EnvError(Exception):
    """The env failed (not a bad action: those are observations). From `reset` it refuses the
    task; from `step` it ends the sample with status `task_error`."""


@dataclass
class StepResult:
    """What one step produced.

    `status` is normally left `None` and derived as the Rust server does: `terminated` →
    `completed`, `truncated` → `task_limit_reached`, `metrics["invalid_action"]` set →
    `agent_invalid_action` (the episode goes on), otherwise `running`. Set it to report another
    status of `wire.STATUSES` explicitly."""

    messages: list[dict] = field(default_factory=list)
    reward: float = 0.0
    terminated: bool = False
    truncated: bool = False
    status: str | None = None
    metrics: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def invalid(cls, reason: str, hint: str) -> StepResult:
        """Answers an unusable action with an `error: REASON; HINT` user message; the episode
        goes on (status `agent_invalid_action`)."""
        return cls(messages=[user(f"error: {reason}; {hint}")], metrics={"invalid_action": reason})

    @classmethod
    def proceed(cls, messages: list[dict], metrics: dict[str, Any] | None = None) -> StepResult:
        """A step that goes on with `messages` and no reward."""
        return cls(messages=list(messages), metrics=dict(metrics or {}))

    @classmethod
    def final(
        cls, messages: list[dict], success: bool, metrics: dict[str, Any] | None = None
    ) -> StepResult:
        """The terminal step of an episode: reward 1 on success, 0 otherwise."""
        info = dict(metrics or {})
        info["success"] = bool(success)
        return cls(messages=list(messages), reward=1.0 if success else 0.0, terminated=True,
                   metrics=info)

    def wire_status(self) -> str:
        """The status this step reports."""
        if self.status is not None:
            if self.status not in wire.STATUSES:
                raise EnvError(
                    f"step status `{self.status}` is not one of {', '.join(wire.STATUSES)}"
                )
            return self.status
        if self.terminated:
            return "completed"
        if self.truncated:
            return "task_limit_reached"
        if self.metrics.get("invalid_action") is not None:
            return "agent_invalid_action"
        return "running"

    def wire_metrics(self) -> dict[str, Any]:
        """The metrics in the Rust `StepInfo` shape (unknown keys under `extra`)."""
        out: dict[str, Any] = {"tool_calls": 0, "tool_errors": 0}
        extra: dict[str, Any] = {}
        for key, value in self.metrics.items():
            if key in STEP_INFO_KEYS:
                out[key] = value
            elif key == "extra" and isinstance(value, dict):
                extra.update(value)
            else:
                extra[key] = value
        if out.get("invalid_action") is None:
            out.pop("invalid_action", None)
        elif not isinstance(out["invalid_action"], str):
            raise EnvError("metrics `invalid_action` must be a string")
        for key in ("tool_calls", "tool_errors"):
            if isinstance(out[key], bool) or not isinstance(out[key], int) or out[key] < 0:
                raise EnvError(f"metrics `{key}` must be a non-negative integer")
        if out.get("success") is not None and not isinstance(out["success"], bool):
            raise EnvError("metrics `success` must be a boolean")
        if out.get("score") is not None and (
            isinstance(out["score"], bool) or not isinstance(out["score"], (int, float))
        ):
            raise EnvError("metrics `score` must be a number")
        for key in ("success", "score"):
            if out.get(key) is None:
                out.pop(key, None)
        if extra:
            out["extra"] = extra
        return out


class Env:
    """Base class of a Python env; the server makes one instance per session.

    Subclasses set `name` (the env id clients ask for) and implement `tools`, `reset` and
    `step`. `max_turns` (when set, on the class or by `reset` on the instance) truncates an
    episode after that many steps, as the Rust `TurnLimit` wrapper does."""

    #: Env id, as clients name it in `start_sample`.
    name: str = ""
    #: One line on what the env is about.
    description: str = ""
    #: Steps allowed per episode (`None`: no limit).
    max_turns: int | None = None

    def tools(self) -> list[dict]:
        """Tools the agent may call in this episode (specs, see `tools.tool_spec`)."""
        return []

    def reset(self, index: int | None, split: str, custom_task: dict | None) -> list[dict]:
        """Starts an episode on task `index` of `split` (`"train"` or `"test"`), or on
        `custom_task` (`{env_id, id, split, data}`) when given; returns the initial messages.
        Raise `EnvError` (or `ValueError`) to refuse a task."""
        raise NotImplementedError(f"{type(self).__name__}.reset")

    def step(self, action: dict) -> StepResult:
        """Applies the agent's action (one assistant message, possibly with `tool_calls`)."""
        raise NotImplementedError(f"{type(self).__name__}.step")

    @classmethod
    def task_id(cls, split: str, index: int) -> str:
        """Id of task `index` of `split` (the Rust envs' `SPLIT-INDEX`)."""
        return f"{split}-{index}"
