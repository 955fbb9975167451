"""The example env in-process: seeded tasks, disjoint splits, the reference solver, and
malformed actions answered with error observations."""

import unittest

import support  # noqa: F401 (import paths)
import guess_number as gn
from agentrl_env import EnvError, assistant, tool_call, user


def play(env, first, solver=gn.solve):
    """Runs `solver` until the episode ends; returns the last StepResult and the step count."""
    history = []
    for steps in range(1, 100):
        result = env.step(solver(first, history))
        history.extend(result.messages)
        if result.terminated or steps >= env.max_turns:
            return result, steps
    raise AssertionError("episode never ended")


class Tasks(unittest.TestCase):
    def test_seeded_and_split_disjoint(self):
        self.assertEqual(gn.generate(0, "test", 5), gn.generate(0, "test", 5))
        self.assertNotEqual([gn.generate(0, "test", i) for i in range(20)],
                            [gn.generate(1, "test", i) for i in range(20)])
        train = {tuple(gn.generate(0, "train", i).values()) for i in range(300)}
        test = {tuple(gn.generate(0, "test", i).values()) for i in range(300)}
        self.assertFalse(train & test)
        for high, secret in train | test:
            self.assertTrue(gn.HIGH_RANGE[0] <= high <= gn.HIGH_RANGE[1] and 1 <= secret <= high)

    def test_custom_tasks_are_checked(self):
        env = gn.GuessNumber()
        for data in ({"high": 10}, {"high": 10, "secret": 11}, {"high": "10", "secret": 1}, [1]):
            with self.assertRaises(EnvError):
                env.reset(None, "test", {"env_id": "guess-number", "id": "x", "split": "test",
                                         "data": data})


class Episodes(unittest.TestCase):
    def test_reference_solver_solves_every_task(self):
        solved = 0
        for split in ("train", "test"):
            for index in range(50):
                env = gn.GuessNumber()
                first = env.reset(index, split, None)[0]["content"]
                result, steps = play(env, first)
                solved += result.reward == 1.0 and result.metrics["success"]
                self.assertLessEqual(steps, env.max_turns)
        self.assertEqual(solved, 100)

    def test_wrong_answer_fails(self):
        env = gn.GuessNumber()
        env.reset(None, "test", {"env_id": "guess-number", "id": "t", "split": "test",
                                 "data": {"high": 100, "secret": 42}})
        result = env.step(assistant("answer: 41"))
        self.assertTrue(result.terminated)
        self.assertEqual((result.reward, result.metrics["success"]), (0.0, False))
        with self.assertRaises(EnvError):
            env.step(assistant("answer: 42"))

    def test_malformed_actions_are_observations(self):
        env = gn.GuessNumber()
        env.reset(None, "test", {"env_id": "guess-number", "id": "t", "split": "test",
                                 "data": {"high": 100, "secret": 42}})
        for action in (assistant(None, [tool_call("c", "guess", '{"number": ')]),
                       assistant(None, [tool_call("c", "teleport", {})]),
                       assistant(None, [tool_call("c", "guess", {"number": "ten"})]),
                       assistant("   "), user("hi")):
            result = env.step(action)
            self.assertFalse(result.terminated)
            self.assertEqual(result.wire_status(), "agent_invalid_action", result)
            self.assertTrue(result.messages[0]["content"].startswith("error: "), result)
        out_of_range = env.step(assistant(None, [tool_call("c", "guess", {"number": 101})]))
        self.assertEqual(out_of_range.wire_status(), "running")
        self.assertEqual(out_of_range.messages[0]["content"], "error: 101 is outside 1..100")
        self.assertEqual(env.step(assistant(None, [tool_call("c", "guess", {"number": 42})]))
                         .messages[0]["content"], "42 is correct")
        self.assertEqual(env.step(assistant("It is 42.")).reward, 1.0)

    def test_last_integer(self):
        self.assertEqual(gn.last_integer("5-3 is 2"), 2)
        self.assertEqual(gn.last_integer("answer: -7"), -7)
        self.assertEqual(gn.last_integer("10-3"), 3)
        self.assertIsNone(gn.last_integer("no digits"))


if __name__ == "__main__":
    unittest.main()
