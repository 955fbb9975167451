"""The env HTTP server: the Rust env server's `/api` routes over a `SessionTable`, on a
standard-library `ThreadingHTTPServer`, with idle-session expiry and an optional bearer token."""

from __future__ import annotations

import hmac
import json
import logging
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from . import wire
from .env import Env
from .sessions import ApiError, ServerConfig, SessionTable

log = logging.getLogger("agentrl_env")

#: The header that carries the session id.
SESSION_HEADER = "session_id"

#: Largest request body accepted, in bytes.
MAX_BODY_BYTES = 64 * 1024 * 1024

ROUTES = {
    "/api/get_indices": "GET",
    "/api/start_sample": "POST",
    "/api/interact": "POST",
    "/api/cancel": "POST",
    "/api/list_workers": "GET",
    "/api/list_sessions": "GET",
}

NO_ROUTE = (
    "no such route; the env protocol serves /api/get_indices, /api/start_sample, "
    "/api/interact, /api/cancel, /api/list_workers and /api/list_sessions"
)


class _Handler(BaseHTTPRequestHandler):
    """One HTTP connection (keep-alive); `server.env_server` holds the state."""

    protocol_version = "HTTP/1.1"
    server_version = "agentrl-env-python"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (stdlib name)
        """Request lines go to the debug log, not stderr."""
        log.debug("%s - %s", self.address_string(), format % args)

    def do_GET(self) -> None:
        """Serves a GET request."""
        self._serve("GET")

    def do_POST(self) -> None:
        """Serves a POST request."""
        self._serve("POST")

    def do_PUT(self) -> None:
        """Serves a PUT request."""
        self._serve("PUT")

    def do_DELETE(self) -> None:
        """Serves a DELETE request."""
        self._serve("DELETE")

    def _send(self, status: int, value: Any, headers: dict[str, str] | None = None) -> None:
        body = json.dumps(value, allow_nan=False).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for key, val in (headers or {}).items():
            self.send_header(key, val)
        self.end_headers()
        self.wfile.write(body)

    def _read_body(self) -> bytes:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            chunks = []
            total = 0
            while True:
                line = self.rfile.readline(1024).split(b";")[0].strip()
                size = int(line, 16)
                if size == 0:
                    while self.rfile.readline(1024).strip():
                        pass
                    return b"".join(chunks)
                total += size
                if total > MAX_BODY_BYTES:
                    self.close_connection = True
                    raise ApiError(413, f"request body is larger than {MAX_BODY_BYTES} bytes")
                chunks.append(self.rfile.read(size))
                self.rfile.readline(1024)
        length = int(self.headers.get("Content-Length") or 0)
        if length < 0:
            raise ValueError("negative Content-Length")
        if length > MAX_BODY_BYTES:
            self.close_connection = True
            raise ApiError(413, f"request body is larger than {MAX_BODY_BYTES} bytes")
        return self.rfile.read(length)

    def _serve(self, method: str) -> None:
        state: EnvServer = self.server.env_server  # type: ignore[attr-defined]
        try:
            try:
                raw = self._read_body()
            except ValueError as e:
                self.close_connection = True
                raise ApiError(400, f"could not read the request body: {e}") from None
            state.check_token(self.headers.get("Authorization"))
            url = urlsplit(self.path)
            route = url.path
            if route not in ROUTES:
                raise ApiError(404, NO_ROUTE)
            if ROUTES[route] != method:
                raise ApiError(405, f"{route} takes {ROUTES[route]}, not {method}")
            status, value, headers = state.handle(route, url.query, self.headers, raw)
            self._send(status, value, headers)
        except ApiError as e:
            headers = {"WWW-Authenticate": "Bearer"} if e.status == 401 else None
            if e.status == 405:
                headers = {"Allow": ROUTES.get(urlsplit(self.path).path, "GET")}
            self._send(e.status, {"error": e.message}, headers)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the client hung up; nobody to answer
        except Exception as e:  # a server bug: answer 500 rather than drop the connection
            log.exception("request %s %s failed", method, self.path)
            self._send(500, {"error": f"internal error: {type(e).__name__}: {e}"})


class _HttpServer(ThreadingHTTPServer):
    """The listener; a connection that fails (a client hanging up mid-answer) is logged, not
    printed."""

    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Logs a failed connection at debug level."""
        log.debug("connection from %s failed", client_address, exc_info=True)


def _parse_json(raw: bytes, what: str) -> Any:
    """A JSON body: 400 when it is not JSON."""
    try:
        return json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ApiError(400, f"invalid {what} body: {e}") from None


def _session_id(headers: Any) -> int:
    """The id in the `session_id` header: 400 when missing, 404 when it is not an id."""
    value = headers.get(SESSION_HEADER)
    if value is None:
        raise ApiError(400, f"missing `{SESSION_HEADER}` header")
    text = value.strip()
    if text.isdigit() and text.isascii() and int(text) <= wire.U64_MAX:
        return int(text)
    raise ApiError(404, f"unknown session id {json.dumps(value)}")


class EnvServer:
    """An env server: its sessions, its HTTP listener and its idle-session sweeper."""

    def __init__(
        self,
        envs: list[type[Env]],
        config: ServerConfig | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        token: str | None = None,
    ):
        self.table = SessionTable(envs, config or ServerConfig())
        self.token = token or None
        self.http = _HttpServer((host, port), _Handler)
        self.http.env_server = self  # type: ignore[attr-defined]
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._serving = False

    @property
    def port(self) -> int:
        """The bound port (useful after binding port 0)."""
        return self.http.server_address[1]

    @property
    def host(self) -> str:
        """The bound host."""
        return str(self.http.server_address[0])

    def check_token(self, authorization: str | None) -> None:
        """401 unless the request carries `Authorization: Bearer TOKEN` (when a token is set)."""
        if self.token is None:
            return
        given = None
        if authorization is not None and authorization.startswith("Bearer "):
            given = authorization[len("Bearer "):].strip()
        if given is None:
            raise ApiError(401, "missing `Authorization: Bearer TOKEN` header")
        if not hmac.compare_digest(given.encode(), self.token.encode()):
            raise ApiError(401, "wrong bearer token")

    def handle(self, route: str, query: str, headers: Any, raw: bytes) -> tuple[int, Any, dict]:
        """Answers one request on `route`: status, JSON value and extra headers."""
        table = self.table
        if route == "/api/get_indices":
            params = parse_qs(query, keep_blank_values=True)
            names, splits = params.get("name"), params.get("split", ["test"])
            problem = None
            if not names:
                problem = "missing field `name`"
            elif splits[0] not in wire.SPLITS:
                problem = f"split: unknown variant `{splits[0]}`, expected `train` or `test`"
            if problem:
                raise ApiError(
                    400, f"invalid query ({problem}); expected ?name=ENV[&split=train|test]"
                )
            table.env_class(names[0])
            return 200, list(range(table.config.task_count)), {}
        if route == "/api/start_sample":
            sid, answer = table.start(_parse_json(raw, "start_sample"))
            return 200, answer, {SESSION_HEADER: str(sid)}
        if route == "/api/interact":
            sid = _session_id(headers)
            return 200, table.interact(sid, _parse_json(raw, "interact")), {}
        if route == "/api/cancel":
            return 200, table.cancel(_session_id(headers)), {}
        if route == "/api/list_workers":
            return 200, table.list_workers(), {}
        return 200, table.list_sessions(), {}

    def _sweep_loop(self) -> None:
        period = min(max(self.table.config.session_ttl / 2, 0.01), 1.0)
        while not self._stop.wait(period):
            try:
                self.table.sweep()
            except Exception:  # never let the sweeper die
                log.exception("sweeping idle sessions failed")

    def _serve_http(self) -> None:
        self.http.serve_forever(poll_interval=0.1)

    def start(self) -> EnvServer:
        """Serves in background threads; returns self."""
        self._serving = True
        for target in (self._serve_http, self._sweep_loop):
            thread = threading.Thread(target=target, daemon=True)
            thread.start()
            self._threads.append(thread)
        return self

    def serve_forever(self) -> None:
        """Serves in this thread until `shutdown` (sweeping in a background thread)."""
        sweeper = threading.Thread(target=self._sweep_loop, daemon=True)
        sweeper.start()
        self._threads.append(sweeper)
        self._serving = True
        self._serve_http()

    def shutdown(self) -> None:
        """Stops serving and closes the listener."""
        self._stop.set()
        if self._serving:
            self._serving = False
            self.http.shutdown()
        self.http.server_close()
        for thread in self._threads:
            thread.join(timeout=5)

    def __enter__(self) -> EnvServer:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.shutdown()
