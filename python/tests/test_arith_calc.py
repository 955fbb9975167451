"""The Python port of `arith-calc`: the exact calculator, task checks and step rules (its
equality with the Rust env is checked from Rust, in `agentrl-env/tests/python_sdk.rs`)."""

import unittest
from fractions import Fraction

import support  # noqa: F401 (import paths)
import arith_calc as ac
from agentrl_env import EnvError, ToolCallError, assistant, tool_call


def task(expression, answer):
    return {"env_id": "arith-calc", "id": "t", "split": "test",
            "data": {"expression": expression, "answer": answer, "operands": 2}}


class Calculator(unittest.TestCase):
    def test_exact_values(self):
        self.assertEqual(ac.evaluate("347*29+118"), 10181)
        self.assertEqual(ac.evaluate("(12 + 3) * -4 / 5"), -12)
        self.assertEqual(ac.evaluate("99999999999 * 99999999999"), 99999999999 ** 2)
        self.assertEqual(ac.evaluate("0.1 + 0.2"), Fraction(3, 10))
        self.assertEqual(ac.show(Fraction(7, 2)), "3.5")
        self.assertEqual(ac.show(Fraction(-1, 8)), "-0.125")
        self.assertEqual(ac.show(Fraction(1, 3)), "0.333333333333")
        self.assertEqual(ac.show(Fraction(2, 3)), "0.666666666667")

    def test_errors(self):
        for expression, needle in (("1+", "cannot parse"), ("2**3", "not an arithmetic"),
                                   ("1/0", "division by zero"), ("x", "not an arithmetic"),
                                   ("1e3", "not an arithmetic"), ("0x10", "not an arithmetic")):
            with self.assertRaises(ToolCallError) as ctx:
                ac.evaluate(expression)
            self.assertIn(needle, str(ctx.exception))
            self.assertFalse(ctx.exception.invalid)


class Episodes(unittest.TestCase):
    def test_tasks_are_checked(self):
        env = ac.ArithCalc()
        with self.assertRaisesRegex(EnvError, "custom_task"):
            env.reset(0, "test", None)
        with self.assertRaisesRegex(EnvError, "value 7"):
            env.reset(None, "test", task("3+4", "8"))
        with self.assertRaisesRegex(EnvError, "cannot parse"):
            env.reset(None, "test", task("3+", "3"))
        with self.assertRaisesRegex(EnvError, "expression"):
            env.reset(None, "test", {**task("1", "1"), "data": {}})

    def test_tool_then_answer(self):
        env = ac.ArithCalc()
        self.assertEqual(env.reset(None, "test", task("6*7", "42")), [
            {"role": "user", "content": "Compute 6*7"}])
        step = env.step(assistant(None, [tool_call("c", "calculator", {"expression": "6*7"})]))
        self.assertEqual(step.messages[0]["content"], "42")
        step = env.step(assistant(None, [tool_call("c", "calculator", {"expression": "6/0"})]))
        self.assertEqual((step.messages[0]["content"], step.wire_status()),
                         ("error: division by zero", "running"))
        self.assertEqual(env.step(assistant("")).wire_status(), "agent_invalid_action")
        final = env.step(assistant("The answer is 42.0"))
        self.assertEqual((final.reward, final.terminated), (1.0, True))
        with self.assertRaises(EnvError):
            env.step(assistant("42"))

    def test_wrong_answer(self):
        env = ac.ArithCalc()
        env.reset(None, "test", task("6*7", "42"))
        self.assertEqual(env.step(assistant("41")).reward, 0.0)


if __name__ == "__main__":
    unittest.main()
