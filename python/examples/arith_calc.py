"""`arith-calc` in Python: a port of the Rust env of the same id (compute an integer expression,
with an exact `calculator` tool), for the tasks the Rust `arith-calc` factory generates.

Because it keeps the id, the observation, the tool spec and the step rules, the Rust side plays
it through `RemoteEnvFactory` (tasks, turn limit and reference solver from the local factory,
sessions on this server) exactly as the in-process env: what the trainer does with remote envs.
Tasks arrive as `custom_task` (`{expression, answer, operands}`); the Rust task generator is not
ported, so starting a sample by index is refused.

Serve it:  python3 -m agentrl_env.serve --path python/examples --env arith_calc:ArithCalc
"""

from __future__ import annotations

import ast
import re
from decimal import ROUND_HALF_UP, Context, Decimal
from fractions import Fraction

from agentrl_env import (
    Env, EnvError, StepResult, ToolCallError, run_tool_calls, text_of, tool_spec, user,
)

CALCULATOR = tool_spec(
    "calculator",
    "Evaluates an arithmetic expression exactly (+ - * / and parentheses).",
    {
        "type": "object",
        "properties": {
            "expression": {
                "type": "string",
                "description": "The expression to evaluate, e.g. \"(12 + 3) * -4 / 5\".",
            }
        },
        "required": ["expression"],
        "additionalProperties": False,
    },
)

HINT = "call a tool or give the answer"

_OPS = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b,
        ast.Mult: lambda a, b: a * b, ast.Div: lambda a, b: a / b}


def evaluate(expression: str) -> Fraction:
    """The exact value of an expression of decimal numbers, `+ - * /`, unary minus and
    parentheses."""
    source = expression.strip()
    try:
        tree = ast.parse(source, mode="eval")
    except SyntaxError:
        raise ToolCallError(f"cannot parse `{expression}`", invalid=False) from None

    def value(node: ast.AST) -> Fraction:
        if isinstance(node, ast.Constant) and type(node.value) in (int, float):
            literal = ast.get_source_segment(source, node) or ""
            if re.fullmatch(r"[0-9]+(\.[0-9]+)?", literal):
                return Fraction(literal)  # exact, from the text (not the float)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            inner = value(node.operand)
            return -inner if isinstance(node.op, ast.USub) else inner
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            left, right = value(node.left), value(node.right)
            if isinstance(node.op, ast.Div) and right == 0:
                raise ToolCallError("division by zero", invalid=False)
            return _OPS[type(node.op)](left, right)
        raise ToolCallError(f"`{expression}` is not an arithmetic expression of numbers "
                            "with + - * / and parentheses", invalid=False)

    return value(tree.body)


def show(number: Fraction) -> str:
    """An integer as is, a terminating fraction as its exact decimal, others to 12 significant
    digits (like the Rust calculator; its exponent notation for huge or tiny values differs)."""
    if number.denominator == 1:
        return str(number.numerator)
    d = number.denominator
    while d % 2 == 0:
        d //= 2
    while d % 5 == 0:
        d //= 5
    context = Context(prec=12 if d != 1 else 400, rounding=ROUND_HALF_UP)
    quotient = context.divide(Decimal(number.numerator), Decimal(number.denominator))
    return format(quotient.normalize(context), "f" if d == 1 else "")


def last_number(text: str) -> str | None:
    """The last number in `text` (optional sign, digits, optional `.digits`)."""
    found = re.findall(r"(?:(?<![0-9])-)?[0-9]+(?:\.[0-9]+)?", text)
    return found[-1] if found else None


class ArithCalc(Env):
    """One arith-calc session."""

    name = "arith-calc"
    description = "compute a short integer expression with a calculator tool (Python port)"
    max_turns = 4

    def __init__(self) -> None:
        self.answer: int | None = None

    def tools(self) -> list[dict]:
        """The one tool of the env."""
        return [CALCULATOR]

    def reset(self, index: int | None, split: str, custom_task: dict | None) -> list[dict]:
        """Checks the task and states it."""
        if custom_task is None:
            raise EnvError("the Python arith-calc runs the tasks of the Rust factory: start "
                           "samples with `custom_task` (RemoteEnvFactory does)")
        data = custom_task["data"] if isinstance(custom_task["data"], dict) else {}
        expression = data.get("expression")
        if not isinstance(expression, str):
            raise EnvError(f"task `{custom_task['id']}`: data has no string field `expression`")
        try:
            value = evaluate(expression)
        except ToolCallError as e:
            raise EnvError(f"task `{custom_task['id']}`: {e}") from None
        stored = data.get("answer")
        if value.denominator != 1 or str(stored).strip() != str(value.numerator):
            raise EnvError(f"task `{custom_task['id']}`: data field `answer` must be the "
                           f"expression's value {show(value)}")
        self.answer = value.numerator
        return [user(f"Compute {expression}")]

    def _calculator(self, args: dict) -> str:
        return show(evaluate(args["expression"]))

    def step(self, action: dict) -> StepResult:
        """Answers tool calls; a message without them is the final answer."""
        if self.answer is None:
            raise EnvError("step called after the final answer; start a new sample")
        if action.get("role") != "assistant":
            return StepResult.invalid(f"message role is {action.get('role')}, expected assistant",
                                      HINT)
        if action.get("tool_calls"):
            messages, metrics = run_tool_calls(action, self.tools(),
                                               {"calculator": self._calculator})
            return StepResult.proceed(messages, metrics)
        text = text_of(action)
        if not text.strip():
            return StepResult.invalid("empty message", HINT)
        number = last_number(text)
        success = number is not None and Fraction(number) == self.answer
        self.answer = None
        return StepResult.final([], success)
