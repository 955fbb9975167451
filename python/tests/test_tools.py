"""Tool-call helpers: argument parsing errors, schema checks and `run_tool_calls`."""

import unittest

import support  # noqa: F401 (import paths)
from agentrl_env import (
    ToolCallError, assistant, parse_arguments, run_tool_calls, schema_violations, tool_call,
    tool_spec,
)

ADD = tool_spec("add", "adds two integers", {
    "type": "object",
    "properties": {"a": {"type": "integer"}, "b": {"type": "integer", "minimum": 0}},
    "required": ["a", "b"],
    "additionalProperties": False,
})


def add(args):
    return str(args["a"] + args["b"])


class ParseArguments(unittest.TestCase):
    def test_object_and_empty(self):
        self.assertEqual(parse_arguments(tool_call("c", "add", '{"a": 1}')), {"a": 1})
        self.assertEqual(parse_arguments(tool_call("c", "add", "  ")), {})

    def test_bad_json_names_the_problem_and_quotes_the_text(self):
        with self.assertRaises(ToolCallError) as ctx:
            parse_arguments(tool_call("c", "add", '{"a": '))
        message = str(ctx.exception)
        self.assertIn("not valid JSON", message)
        self.assertIn('{\\"a\\":', message)
        self.assertTrue(ctx.exception.invalid)

    def test_non_object_and_non_string(self):
        with self.assertRaisesRegex(ToolCallError, "must be a JSON object"):
            parse_arguments(tool_call("c", "add", "[1, 2]"))
        call = {"id": "c", "function": {"name": "add", "arguments": {"a": 1}}}
        with self.assertRaisesRegex(ToolCallError, "must be a JSON string"):
            parse_arguments(call)


class Schema(unittest.TestCase):
    def test_violations(self):
        params = ADD["function"]["parameters"]
        self.assertEqual(schema_violations(params, {"a": 1, "b": 2}), [])
        problems = schema_violations(params, {"a": "x", "b": -1, "c": 0})
        self.assertEqual(len(problems), 3, problems)
        self.assertTrue(any("a: expected integer" in p for p in problems), problems)
        self.assertTrue(any("minimum" in p for p in problems), problems)
        self.assertTrue(any("unknown property `c`" in p for p in problems), problems)
        self.assertIn("missing required property `b`", schema_violations(params, {"a": 1})[0])
        self.assertEqual(schema_violations({"type": "boolean"}, 1),
                         ["arguments: expected boolean, got 1"])


class RunToolCalls(unittest.TestCase):
    def test_good_bad_and_unknown_calls_in_one_message(self):
        action = assistant(None, [
            tool_call("c1", "add", {"a": 2, "b": 3}),
            tool_call("c2", "add", '{"a": 2'),
            tool_call("c3", "mul", {}),
            tool_call("c4", "add", {"a": 1}),
        ])
        messages, metrics = run_tool_calls(action, [ADD], {"add": add})
        self.assertEqual([m["tool_call_id"] for m in messages], ["c1", "c2", "c3", "c4"])
        self.assertEqual(messages[0]["content"], "5")
        self.assertTrue(messages[1]["content"].startswith("error: invalid arguments"))
        self.assertEqual(messages[2]["content"],
                         "error: unknown tool `mul` (available tools: add)")
        self.assertIn("missing required property `b`", messages[3]["content"])
        self.assertEqual((metrics["tool_calls"], metrics["tool_errors"]), (4, 3))
        self.assertEqual(metrics["invalid_action"].count(";"), 2, metrics)

    def test_tool_failures_are_errors_but_not_invalid_actions(self):
        def fail(_args):
            raise ToolCallError("division by zero", invalid=False)

        def crash(_args):
            raise RuntimeError("boom")

        specs = [tool_spec("fail", "", {}), tool_spec("crash", "", {})]
        action = assistant(None, [tool_call("c1", "fail", {}), tool_call("c2", "crash", {})])
        messages, metrics = run_tool_calls(action, specs, {"fail": fail, "crash": crash})
        self.assertEqual(messages[0]["content"], "error: division by zero")
        self.assertIn("boom", messages[1]["content"])
        self.assertEqual(metrics, {"tool_calls": 2, "tool_errors": 2})


if __name__ == "__main__":
    unittest.main()
