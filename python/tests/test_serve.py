"""The `python3 -m agentrl_env.serve` command: serving a class from a module or a file,
printing the port, stopping cleanly on SIGTERM, and clear errors for unusable arguments."""

import os
import signal
import subprocess
import sys
import tempfile
import unittest

from support import ROOT, request

ECHO_FILE = '''
from agentrl_env import Env, StepResult, user

class Echo(Env):
    name = "echo"

    def reset(self, index, split, custom_task):
        return [user(f"task {split} {index}")]

    def step(self, action):
        return StepResult.final([], success=action.get("content") == "echo")

class NotAnEnv:
    name = "nope"
'''

BROKEN_FILE = "raise RuntimeError('broken at import')\n"


def serve(*args, timeout=60):
    """Runs the command to completion; returns (exit status, stdout, stderr)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONDONTWRITEBYTECODE": "1"}
    done = subprocess.run([sys.executable, "-m", "agentrl_env.serve", *args], env=env,
                          capture_output=True, text=True, timeout=timeout)
    return done.returncode, done.stdout, done.stderr


class Command(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.file = os.path.join(cls.tmp.name, "echo_env.py")
        with open(cls.file, "w") as f:
            f.write(ECHO_FILE)
        cls.broken = os.path.join(cls.tmp.name, "broken_env.py")
        with open(cls.broken, "w") as f:
            f.write(BROKEN_FILE)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_serves_a_file_and_stops_on_sigterm(self):
        env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONDONTWRITEBYTECODE": "1"}
        child = subprocess.Popen(
            [sys.executable, "-m", "agentrl_env.serve", "--env", f"{self.file}:Echo",
             "--port", "0", "--print-port"],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            port = int(child.stdout.readline())
            status, answer, head = request(port, "POST", "/api/start_sample",
                                           {"name": "echo", "index": 4, "split": "train"})
            self.assertEqual((status, answer["messages"][0]["content"]), (200, "task train 4"))
            status, answer, _ = request(port, "POST", "/api/interact",
                                        {"messages": [{"role": "assistant", "content": "echo"}]},
                                        {"session_id": head["session_id"]})
            self.assertEqual((answer["status"], answer["reward"]), ("completed", 1.0))
            child.send_signal(signal.SIGTERM)
            _, err = child.communicate(timeout=30)
            self.assertEqual(child.returncode, 0, err)
            self.assertIn("env server stopped", err)
        finally:
            if child.poll() is None:
                child.kill()
                child.communicate()

    def test_unusable_arguments_are_clear_errors(self):
        cases = [
            (["--env", "echo_env"], "expected MODULE:CLASS"),
            (["--env", "no_such_module:Echo"], "cannot import no_such_module"),
            (["--env", f"{self.file}:Missing"], "has no Missing"),
            (["--env", f"{self.file}:NotAnEnv"], "is not a subclass of agentrl_env.Env"),
            (["--env", "/nowhere/x.py:Echo"], "no Python file"),
            (["--env", f"{self.broken}:Echo"], "RuntimeError: broken at import"),
            (["--env", f"{self.file}:Echo", "--controller-token", "t"],
             "--controller-token needs --controller"),
            (["--env", f"{self.file}:Echo", "--session-ttl-secs", "0"], "must be positive"),
        ]
        for args, needle in cases:
            code, _, err = serve(*args, "--port", "0")
            self.assertEqual(code, 2, (args, err))
            self.assertIn(needle, err, args)

    def test_unreachable_controller_fails_to_start(self):
        code, out, err = serve("--env", f"{self.file}:Echo", "--port", "0", "--print-port",
                               "--controller", "http://127.0.0.1:1")
        self.assertEqual(code, 1, err)
        self.assertIn("cannot register with the controller", err)
        self.assertEqual(out, "", "no port is printed when registration fails")


if __name__ == "__main__":
    unittest.main()
