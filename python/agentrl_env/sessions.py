"""The session table of the env server: starting, stepping, cancelling and expiring env
sessions, with the Rust server's statuses, error codes and messages (HTTP-free)."""

from __future__ import annotations

import json
import logging
import math
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from . import wire
from .env import Env, EnvError, StepResult

log = logging.getLogger("agentrl_env")

#: How many ended session ids the table remembers, to say why a late request fails.
ENDED_MEMORY = 65_536


class ApiError(Exception):
    """An error answer: an HTTP status and a message, sent as `{"error": message}`."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass
class ServerConfig:
    """Server settings (the Rust `ServerConfig`)."""

    worker_id: str = "env-server"
    session_ttl: float = 600.0
    max_sessions: int = 4096
    task_count: int = 200


@dataclass
class Session:
    """One live session: its env instance behind its own lock."""

    env_name: str
    task_id: str
    env: Env
    max_turns: int | None
    steps: int = 0
    last_used: float = field(default_factory=time.monotonic)
    lock: threading.Lock = field(default_factory=threading.Lock)
    #: Why the session ended, once it left the table (`("finished", status)`, `("cancelled",)`
    #: or `("expired",)`), so that a request that waited for the lock does not step it.
    ended: tuple | None = None

    def touch(self) -> None:
        """Marks the session as used now."""
        self.last_used = time.monotonic()

    def idle(self) -> float:
        """Seconds since the session was last used."""
        return time.monotonic() - self.last_used


def _describe(e: BaseException) -> str:
    """An exception as text; the type name is kept unless it is an `EnvError`/`ValueError`."""
    if isinstance(e, (EnvError, ValueError)) and str(e):
        return str(e)
    return f"{type(e).__name__}: {e}" if str(e) else type(e).__name__


class SessionTable:
    """Live sessions of a set of env classes (one instance per session)."""

    def __init__(self, envs: list[type[Env]], config: ServerConfig):
        if not envs:
            raise ValueError("an env server needs at least one env")
        if config.max_sessions < 1:
            raise ValueError("max_sessions must be at least 1")
        if not config.session_ttl > 0:
            raise ValueError("session_ttl must be positive")
        self.envs: dict[str, type[Env]] = {}
        for cls in envs:
            name = getattr(cls, "name", "")
            if not isinstance(name, str) or not name:
                raise ValueError(f"env class {cls.__name__} has no `name`")
            if name in self.envs:
                raise ValueError(f"env `{name}` is listed twice")
            self.envs[name] = cls
        self.config = config
        self._lock = threading.Lock()
        self._sessions: dict[int, Session] = {}
        self._ended: OrderedDict[int, tuple] = OrderedDict()
        self._next_id = 1

    def known_ids(self) -> str:
        """The served env ids, sorted and comma-separated."""
        return ", ".join(sorted(self.envs))

    def env_class(self, name: str) -> type[Env]:
        """The class serving env `name`, or a 400 listing the known ids."""
        cls = self.envs.get(name)
        if cls is None:
            raise ApiError(400, f"unknown env `{name}`; this server serves: {self.known_ids()}")
        return cls

    def count(self) -> int:
        """Number of live sessions."""
        with self._lock:
            return len(self._sessions)

    def gone(self, sid: int) -> ApiError:
        """The error for a request on session `sid`, which is not live."""
        with self._lock:
            why = self._ended.get(sid)
        if why is None:
            return ApiError(404, f"unknown session id {sid}")
        if why[0] == "finished":
            return ApiError(409, f"session {sid} already finished ({why[1]}); start a new sample")
        if why[0] == "cancelled":
            return ApiError(404, f"session {sid} was cancelled")
        return ApiError(404, f"session {sid} expired after {self.config.session_ttl:.1f} s idle")

    def _remove(self, sid: int, why: tuple) -> Session | None:
        with self._lock:
            session = self._sessions.pop(sid, None)
            if session is not None:
                self._ended[sid] = why
                while len(self._ended) > ENDED_MEMORY:
                    self._ended.popitem(last=False)
        return session

    def _full(self) -> ApiError:
        return ApiError(
            503,
            f"the env server holds its maximum of {self.config.max_sessions} sessions; "
            "finish or cancel some first",
        )

    def start(self, body: Any) -> tuple[int, dict]:
        """`start_sample`: a new session; returns its id and `{messages, tools}`."""
        try:
            req = wire.expect_object(body, "")
            name = wire.string(wire.field(req, "name", ""), "name")
            index = wire.u64(req.get("index"), "index", optional=True)
            split = wire.split(req.get("split"), "split", optional=True) or "test"
            custom = req.get("custom_task")
            custom = None if custom is None else wire.task(custom)
        except wire.WireError as e:
            raise ApiError(422, f"invalid start_sample body: {e}") from None
        cls = self.env_class(name)
        if custom is not None:
            if custom["env_id"] != name:
                raise ApiError(
                    400, f"custom_task belongs to env `{custom['env_id']}`, not `{name}`"
                )
            task_id, split = custom["id"], custom["split"]
        elif index is not None:
            task_id = cls.task_id(split, index)
        else:
            raise ApiError(422, "start_sample needs `index` or `custom_task`")
        if self.count() >= self.config.max_sessions:
            self.sweep()
        if self.count() >= self.config.max_sessions:
            raise self._full()
        try:
            env = cls()
            initial = wire.messages(env.reset(None if custom else index, split, custom),
                                    "reset's messages")
            tools = [wire.tool_spec(t, f"tools[{i}]") for i, t in enumerate(env.tools())]
            json.dumps({"messages": initial, "tools": tools}, allow_nan=False)
        except Exception as e:
            if custom is not None:
                raise ApiError(422, f"the env refused custom_task `{task_id}`: {_describe(e)}")
            log.warning("env `%s` failed to start task `%s`", name, task_id, exc_info=True)
            raise ApiError(500, f"the env could not start task `{task_id}`: {_describe(e)}")
        session = Session(name, task_id, env, getattr(env, "max_turns", None))
        with self._lock:
            if len(self._sessions) >= self.config.max_sessions:
                raise self._full()
            sid = self._next_id
            self._next_id += 1
            self._sessions[sid] = session
        return sid, {"messages": initial, "tools": tools}

    def interact(self, sid: int, body: Any) -> dict:
        """`interact`: applies the one assistant message of `body` in session `sid`."""
        try:
            req = wire.expect_object(body, "")
            actions = wire.messages(wire.field(req, "messages", ""))
        except wire.WireError as e:
            raise ApiError(422, f"invalid interact body: {e}") from None
        if len(actions) != 1:
            raise ApiError(
                422, f"`messages` must hold exactly one (assistant) message, got {len(actions)}"
            )
        with self._lock:
            session = self._sessions.get(sid)
        if session is None:
            raise self.gone(sid)
        session.touch()
        with session.lock:
            with self._lock:
                live = sid in self._sessions
            if session.ended is not None or not live:
                raise self.gone(sid)
            answer = self._step(session, actions[0])
            if answer["finish"]:
                session.ended = ("finished", answer["status"])
                self._remove(sid, session.ended)
        return answer

    def _step(self, session: Session, action: dict) -> dict:
        """Steps the env once; an exception (or a malformed result) is a `task_error`."""
        try:
            result = session.env.step(action)
            if not isinstance(result, StepResult):
                raise EnvError(f"step returned {type(result).__name__}, expected StepResult")
            status = result.wire_status()
            reward = result.reward
            number = isinstance(reward, (int, float)) and not isinstance(reward, bool)
            if not number or not math.isfinite(reward):
                raise EnvError(f"step reward must be a finite number, got {reward!r}")
            answer = {
                "finish": False,
                "reward": float(reward),
                "status": status,
                "messages": wire.messages(result.messages, "step's messages"),
                "metrics": result.wire_metrics(),
            }
            json.dumps(answer, allow_nan=False)
        except Exception as e:
            log.warning("env `%s` failed to step", session.env_name, exc_info=True)
            answer = {
                "finish": True,
                "reward": 0.0,
                "status": "task_error",
                "messages": [],
                "metrics": {"tool_calls": 0, "tool_errors": 0},
                "error": f"environment `{session.env_name}`: {_describe(e)}",
            }
        session.steps += 1
        session.touch()
        limit = session.max_turns
        if limit is not None and session.steps >= limit and answer["status"] in wire.UNFINISHED:
            answer["status"] = "task_limit_reached"
        answer["finish"] = answer["status"] not in wire.UNFINISHED
        return answer

    def cancel(self, sid: int) -> dict:
        """`cancel`: ends session `sid`; a step in progress finishes and is answered."""
        session = self._remove(sid, ("cancelled",))
        if session is None:
            raise self.gone(sid)
        if session.ended is None:
            session.ended = ("cancelled",)
        return {"session_id": str(sid), "status": "cancelled"}

    def sweep(self) -> int:
        """Removes the sessions idle for longer than the TTL and not in use; returns how many."""
        ttl = self.config.session_ttl
        with self._lock:
            stale = [(sid, s) for sid, s in self._sessions.items() if s.idle() > ttl]
        removed = 0
        for sid, session in stale:
            if not session.lock.acquire(blocking=False):
                continue  # in use right now: not idle
            try:
                if session.idle() <= ttl or session.ended is not None:
                    continue
                session.ended = ("expired",)
                if self._remove(sid, session.ended) is not None:
                    removed += 1
            finally:
                session.lock.release()
        return removed

    def list_workers(self) -> list[dict]:
        """`list_workers`: this server as one worker."""
        return [{
            "id": self.config.worker_id,
            "envs": sorted(self.envs),
            "sessions": self.count(),
            "max_sessions": self.config.max_sessions,
            "session_ttl_secs": float(self.config.session_ttl),
        }]

    def list_sessions(self) -> list[dict]:
        """`list_sessions`: the live sessions, by id."""
        with self._lock:
            items = sorted(self._sessions.items())
        return [{
            "session_id": str(sid),
            "env": s.env_name,
            "task_id": s.task_id,
            "steps": s.steps,
            "idle_secs": s.idle(),
        } for sid, s in items]
