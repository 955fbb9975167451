"""Joining a central controller: `POST /api/register`, then `POST /api/heartbeat` every few
seconds from a background thread, registering again when the controller forgot this worker
(the Rust `register_worker`)."""

from __future__ import annotations

import json
import logging
import threading
import urllib.error
import urllib.request
from typing import Any, Callable

log = logging.getLogger("agentrl_env")


class ControllerError(Exception):
    """A controller request failed; `status` is the HTTP status when one came back."""

    def __init__(self, message: str, status: int | None = None):
        super().__init__(message)
        self.status = status


def _normalize(address: str) -> str:
    """`http://HOST:PORT` for `address`, without a trailing slash."""
    trimmed = address.strip().rstrip("/")
    return trimmed if "://" in trimmed else f"http://{trimmed}"


#: An opener that ignores proxy settings: controllers are reached directly, as in Rust.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def post_json(controller: str, route: str, body: Any, token: str | None,
              timeout: float = 10.0) -> Any:
    """One JSON POST to the controller; an error answer or a transport failure raises
    `ControllerError` with the URL, the status and the controller's message."""
    url = f"{_normalize(controller)}{route}"
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), method="POST",
        headers={"Content-Type": "application/json"},
    )
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with _OPENER.open(request, timeout=timeout) as response:
            raw = response.read()
    except urllib.error.HTTPError as e:
        text = e.read().decode("utf-8", "replace")
        try:
            text = json.loads(text)["error"]
        except (ValueError, KeyError, TypeError):
            pass
        raise ControllerError(f"POST {url}: HTTP {e.code}: {text}", e.code) from None
    except (urllib.error.URLError, OSError) as e:
        reason = getattr(e, "reason", e)
        raise ControllerError(f"POST {url}: {reason}") from None
    try:
        return json.loads(raw)
    except ValueError as e:
        raise ControllerError(f"POST {url}: the answer is not JSON: {e}") from None


def register_body(address: str, envs: list[str], capacity: int | None = None,
                  worker_token: str | None = None) -> dict[str, Any]:
    """The body of `POST /api/register` (the Rust `RegisterRequest`): `capacity` and
    `worker_token` (the bearer token this worker's server requires, which the controller then
    sends on every request to it) only when set."""
    body: dict[str, Any] = {"address": address, "envs": list(envs)}
    if capacity is not None:
        body["capacity"] = capacity
    if worker_token is not None:
        if not worker_token.strip():
            raise ValueError("the worker token must not be empty")
        body["worker_token"] = worker_token
    return body


class Registration:
    """This worker's registration with a controller, kept alive by a heartbeat thread.

    `token` is the controller's bearer token; `worker_token` is this worker's own (the one its
    server requires), sent in the registration so the controller can reach the worker.
    `register()` raises `ControllerError` when the first registration fails; `stop()` ends
    the heartbeats (the controller then drops the worker after its timeout)."""

    def __init__(self, controller: str, address: str, envs: list[str],
                 capacity: int | None = None, token: str | None = None,
                 interval: float = 2.0, load: Callable[[], int] | None = None,
                 worker_token: str | None = None):
        if not interval > 0:
            raise ValueError("the heartbeat interval must be positive")
        self.controller = controller
        self.token = token
        self.interval = interval
        self.load = load
        self.request = register_body(address, envs, capacity, worker_token)
        self._worker_id = ""
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def worker_id(self) -> str:
        """The id the controller gave (changes if the worker had to register again)."""
        with self._lock:
            return self._worker_id

    def _register(self) -> str:
        answer = post_json(self.controller, "/api/register", self.request, self.token)
        worker_id = answer.get("worker_id") if isinstance(answer, dict) else None
        if not isinstance(worker_id, str) or not worker_id:
            raise ControllerError(
                f"the controller answered register without a worker_id: {answer}"
            )
        with self._lock:
            self._worker_id = worker_id
        return worker_id

    def register(self) -> Registration:
        """Registers, then starts heartbeating; returns self."""
        try:
            self._register()
        except ControllerError as e:
            raise ControllerError(f"cannot register with the controller: {e}", e.status) from None
        self._thread = threading.Thread(target=self._beat_loop, daemon=True)
        self._thread.start()
        return self

    def beat(self) -> None:
        """Sends one heartbeat; registers again when the controller answers 404."""
        body: dict[str, Any] = {"worker_id": self.worker_id}
        if self.load is not None:
            body["load"] = self.load()
        try:
            post_json(self.controller, "/api/heartbeat", body, self.token)
        except ControllerError as e:
            if e.status != 404:
                raise
            log.info("the controller forgot worker %s; registering again", body["worker_id"])
            self._register()

    def _beat_loop(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.beat()
            except Exception as e:
                log.warning("heartbeat failed: %s", e)

    def stop(self) -> None:
        """Stops heartbeating."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.interval + 15)
