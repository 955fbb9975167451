"""`guess-number`: find a secret integer in 1..HIGH with a `guess` tool that says "too low",
"too high" or "correct", then give it as the final answer. Tasks are procedurally seeded by
(seed, split, index); train and test never share a task. A binary-search reference solver
(`solve`) finds every secret within the turn limit.

Serve it:  python3 -m agentrl_env.serve --path python/examples --env guess_number:GuessNumber
"""

from __future__ import annotations

import hashlib
import math
import random
import re

from agentrl_env import (
    Env, EnvError, StepResult, ToolCallError, assistant, run_tool_calls, text_of, tool_call,
    tool_spec, user,
)

#: Smallest and largest upper bound of a task.
HIGH_RANGE = (16, 1000)

#: Largest upper bound a custom task may use.
HIGH_MAX = 1_000_000

GUESS_TOOL = tool_spec(
    "guess",
    "Guess the secret number; answers whether it is too low, too high or correct.",
    {
        "type": "object",
        "properties": {"number": {"type": "integer", "description": "your guess"}},
        "required": ["number"],
        "additionalProperties": False,
    },
)

HINT = "call `guess` or give the final answer as `answer: N`"


def split_of(high: int, secret: int) -> str:
    """The split a task belongs to: test iff a stable hash of it is divisible by 5."""
    digest = hashlib.sha256(f"{high}:{secret}".encode()).digest()
    return "test" if int.from_bytes(digest[:8], "big") % 5 == 0 else "train"


def generate(seed: int, split: str, index: int) -> dict:
    """Task data `{high, secret}` of task `index` of `split` (deterministic)."""
    rng = random.Random(f"guess-number:{seed}:{split}:{index}")
    while True:
        high = rng.randint(*HIGH_RANGE)
        secret = rng.randint(1, high)
        if split_of(high, secret) == split:
            return {"high": high, "secret": secret}


def turns_needed(high: int) -> int:
    """Guesses a binary search needs at most for 1..high, plus the final answer."""
    return math.ceil(math.log2(high + 1)) + 1


def last_integer(text: str) -> int | None:
    """The last integer written in `text` (`-` counts as a sign unless it follows a digit)."""
    found = re.findall(r"(?:(?<![0-9])-)?[0-9]+", text)
    return int(found[-1]) if found else None


class GuessNumber(Env):
    """One guess-number session (the server makes one per episode)."""

    name = "guess-number"
    description = "find a secret integer with a too-low/too-high guess tool"
    #: Seed of the task generator.
    seed = 0

    def __init__(self) -> None:
        self.high = 0
        self.secret = 0
        self.guesses = 0
        self.done = False

    def tools(self) -> list[dict]:
        """The one tool of the env."""
        return [GUESS_TOOL]

    def reset(self, index: int | None, split: str, custom_task: dict | None) -> list[dict]:
        """Checks the task and states it."""
        if custom_task is not None:
            data = custom_task["data"]
        else:
            data = generate(self.seed, split, index)
        if not isinstance(data, dict):
            raise EnvError("task data must be an object {high, secret}")
        high, secret = data.get("high"), data.get("secret")
        for key, value in (("high", high), ("secret", secret)):
            if isinstance(value, bool) or not isinstance(value, int):
                raise EnvError(f"task data `{key}` must be an integer, got {value!r}")
        if not 1 <= high <= HIGH_MAX or not 1 <= secret <= high:
            raise EnvError(f"task data needs 1 <= secret <= high <= {HIGH_MAX}, "
                           f"got high={high}, secret={secret}")
        self.high, self.secret, self.guesses, self.done = high, secret, 0, False
        self.max_turns = turns_needed(high) + 2  # two spare turns for slips
        return [user(
            f"I am thinking of an integer between 1 and {high}. Call `guess` with a number to "
            "learn whether it is too low or too high; when you know it, reply `answer: N` "
            "without a tool call."
        )]

    def _guess(self, args: dict) -> str:
        number = int(args["number"])
        if not 1 <= number <= self.high:
            raise ToolCallError(f"{number} is outside 1..{self.high}", invalid=False)
        self.guesses += 1
        if number < self.secret:
            return f"{number} is too low"
        if number > self.secret:
            return f"{number} is too high"
        return f"{number} is correct"

    def step(self, action: dict) -> StepResult:
        """Answers tool calls; a message without them is the final answer."""
        if self.done:
            raise EnvError("step called after the final answer; start a new sample")
        if action.get("role") != "assistant":
            return StepResult.invalid(f"message role is {action.get('role')}, expected assistant",
                                      HINT)
        if action.get("tool_calls"):
            messages, metrics = run_tool_calls(action, self.tools(), {"guess": self._guess})
            return StepResult.proceed(messages, metrics)
        text = text_of(action)
        if not text.strip():
            return StepResult.invalid("empty message", HINT)
        self.done = True
        success = last_integer(text) == self.secret
        return StepResult.final([], success, {"guesses": self.guesses})


def solve(observation_text: str, history: list[dict]) -> dict:
    """The binary-search reference solver: the next assistant message, given the task text
    and the tool answers so far."""
    high = int(re.search(r"between 1 and (\d+)", observation_text).group(1))
    low = 1
    for msg in history:
        answer = text_of(msg)
        number = last_integer(answer.split(" is ")[0]) if " is " in answer else None
        if number is None:
            continue
        if answer.endswith("too low"):
            low = max(low, number + 1)
        elif answer.endswith("too high"):
            high = min(high, number - 1)
        elif answer.endswith("correct"):
            return assistant(f"answer: {number}")
    if low == high:
        return assistant(f"answer: {low}")
    middle = (low + high) // 2
    return assistant(None, [tool_call(f"call_{len(history)}", "guess", {"number": middle})])
