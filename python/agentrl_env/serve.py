"""`python3 -m agentrl_env.serve`: serves Python env classes on the env HTTP protocol until
SIGINT/SIGTERM, optionally registered with a central controller."""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import logging
import os
import signal
import sys
import threading
from pathlib import Path

from .controller import ControllerError, Registration
from .env import Env
from .server import EnvServer
from .sessions import ServerConfig


class UsageError(Exception):
    """A command-line value that cannot be used; the message says which and why."""


def load_env_class(spec: str) -> type[Env]:
    """The `Env` subclass named by `MODULE:CLASS` (or `path/to/file.py:CLASS`)."""
    module_name, sep, class_name = spec.rpartition(":")
    if not sep or not module_name or not class_name:
        raise UsageError(f"--env {spec!r}: expected MODULE:CLASS, e.g. guess_number:GuessNumber")
    try:
        if module_name.endswith(".py"):
            path = Path(module_name)
            loader = importlib.util.spec_from_file_location(path.stem, path)
            if loader is None or loader.loader is None or not path.is_file():
                raise UsageError(f"--env {spec!r}: no Python file {module_name}")
            module = importlib.util.module_from_spec(loader)
            sys.modules[path.stem] = module
            loader.loader.exec_module(module)
        else:
            module = importlib.import_module(module_name)
    except ImportError as e:
        raise UsageError(f"--env {spec!r}: cannot import {module_name}: {e}") from None
    except UsageError:
        raise
    except Exception as e:  # the module itself failed (syntax error, an exception at import)
        raise UsageError(f"--env {spec!r}: loading {module_name} failed: "
                         f"{type(e).__name__}: {e}") from None
    cls = getattr(module, class_name, None)
    if cls is None:
        raise UsageError(f"--env {spec!r}: module {module_name} has no {class_name}")
    if not (isinstance(cls, type) and issubclass(cls, Env)):
        raise UsageError(f"--env {spec!r}: {class_name} is not a subclass of agentrl_env.Env")
    if not isinstance(cls.name, str) or not cls.name:
        raise UsageError(f"--env {spec!r}: {class_name} sets no `name` (the env id)")
    return cls


def parser() -> argparse.ArgumentParser:
    """The command-line parser."""
    p = argparse.ArgumentParser(
        prog="python3 -m agentrl_env.serve",
        description="Serve Python envs on the AgentRL env HTTP protocol.",
    )
    p.add_argument("--env", action="append", required=True, metavar="MODULE:CLASS",
                   help="env class to serve (repeatable)")
    p.add_argument("--path", action="append", default=[], metavar="DIR",
                   help="directory to import env modules from (repeatable)")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on")
    p.add_argument("--port", type=int, default=8000, help="port; 0 picks a free one")
    p.add_argument("--print-port", action="store_true",
                   help="print the bound port alone on the first line of stdout")
    p.add_argument("--session-ttl-secs", type=float, default=600.0)
    p.add_argument("--max-sessions", type=int, default=4096)
    p.add_argument("--task-count", type=int, default=200,
                   help="task indices listed by /api/get_indices per split")
    p.add_argument("--token", default=os.environ.get("AGENTRL_ENV_TOKEN"),
                   help="bearer token clients must send (default: $AGENTRL_ENV_TOKEN); with "
                   "--controller it is sent in the registration so the controller can reach "
                   "this server")
    p.add_argument("--controller", help="controller to register with")
    p.add_argument("--controller-token",
                   help="bearer token of the controller (sent with registration and heartbeats)")
    p.add_argument("--advertise", help="address the controller reaches this server at "
                   "(default: http://HOST:PORT as bound)")
    p.add_argument("--heartbeat-secs", type=float, default=2.0)
    p.add_argument("--log-level", default="WARNING")
    return p


def main(argv: list[str] | None = None) -> int:
    """Runs the server; returns the exit status."""
    args = parser().parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), stream=sys.stderr,
                        format="%(levelname)s %(name)s: %(message)s")
    try:
        if args.session_ttl_secs <= 0:
            raise UsageError("--session-ttl-secs must be positive")
        if args.max_sessions < 1:
            raise UsageError("--max-sessions must be at least 1")
        if args.task_count < 0:
            raise UsageError("--task-count must not be negative")
        if args.controller_token and not args.controller:
            raise UsageError("--controller-token needs --controller")
        sys.path[:0] = [str(Path(p).resolve()) for p in args.path]
        envs = [load_env_class(spec.strip()) for spec in args.env]
        config = ServerConfig(worker_id=f"env-server@{args.host}:{args.port}",
                              session_ttl=args.session_ttl_secs,
                              max_sessions=args.max_sessions, task_count=args.task_count)
        server = EnvServer(envs, config, host=args.host, port=args.port, token=args.token)
    except (UsageError, ValueError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    server.table.config.worker_id = f"env-server@{server.host}:{server.port}"
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    server.start()
    names = ", ".join(sorted(server.table.envs))
    registration = None
    if args.controller:
        try:
            registration = Registration(
                args.controller, args.advertise or f"http://{server.host}:{server.port}",
                sorted(server.table.envs), capacity=args.max_sessions,
                token=args.controller_token, interval=args.heartbeat_secs,
                load=server.table.count, worker_token=args.token,
            ).register()
        except (ControllerError, ValueError) as e:
            print(f"error: {e}", file=sys.stderr)
            server.shutdown()
            return 1
        print(f"registered with the controller at {args.controller} as "
              f"{registration.worker_id}", file=sys.stderr, flush=True)
    if args.print_port:
        print(server.port, flush=True)
    print(f"env server listening on http://{server.host}:{server.port} (envs: {names}; "
          f"session ttl {args.session_ttl_secs:g} s; Ctrl-C stops it)",
          file=sys.stderr, flush=True)
    stop.wait()
    if registration is not None:
        registration.stop()
    server.shutdown()
    print("env server stopped", file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
