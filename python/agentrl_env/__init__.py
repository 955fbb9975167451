"""AgentRL env SDK: write an environment as a Python class and serve it on the AgentRL env
HTTP protocol, so that the Rust trainer, eval and controller use it like a Rust env."""

from .controller import ControllerError, Registration
from .env import Env, EnvError, StepResult
from .messages import assistant, system, text_of, tool_call, tool_message, user
from .server import EnvServer
from .sessions import ServerConfig, SessionTable
from .tools import (
    ToolCallError, parse_arguments, run_tool_calls, schema_violations, tool_calls, tool_spec,
)

__all__ = [
    "ControllerError", "Env", "EnvError", "EnvServer", "Registration", "ServerConfig",
    "SessionTable", "StepResult", "ToolCallError", "assistant", "parse_arguments",
    "run_tool_calls", "schema_violations", "system", "text_of", "tool_call", "tool_calls",
    "tool_message", "tool_spec", "user",
]
