"""The env server over real HTTP on 127.0.0.1: episodes, every error answer, cancel, idle
expiry, the session cap, the turn limit, failing envs, the bearer token and concurrency."""

import json
import threading
import time
import unittest

import support
from support import request
import guess_number as gn
from agentrl_env import Env, EnvError, EnvServer, ServerConfig, StepResult, assistant, user


class Fragile(Env):
    """Fails in the ways an env can: by raising, or by returning something malformed."""

    name = "fragile"

    def reset(self, index, split, custom_task):
        if index == 13:
            raise RuntimeError("unlucky task")
        return [user("say something")]

    def step(self, action):
        text = action.get("content") or ""
        if text == "raise":
            raise EnvError("the simulator crashed")
        if text == "none":
            return None
        if text == "nan":
            return StepResult(reward=float("nan"))
        if text == "bad message":
            return StepResult(messages=[{"role": "robot", "content": "x"}])
        if text == "bad metric":
            return StepResult(metrics={"success": "yes"})
        return StepResult.proceed([user(f"echo {text}")], {"note": text})


def start(port, body, headers=None):
    status, answer, head = request(port, "POST", "/api/start_sample", body, headers)
    assert status == 200, (status, answer)
    return head["session_id"], answer


def interact(port, sid, message, headers=None):
    return request(port, "POST", "/api/interact", {"messages": [message]},
                   {"session_id": sid, **(headers or {})})


def wait_until(cond, seconds=10.0):
    deadline = time.monotonic() + seconds
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not reached within {seconds} s")
        time.sleep(0.02)


class ServerTest(unittest.TestCase):
    config = ServerConfig()
    token = None

    def setUp(self):
        self.server = EnvServer([gn.GuessNumber, Fragile], self.config, token=self.token).start()
        self.port = self.server.port

    def tearDown(self):
        self.server.shutdown()

    def assertError(self, answer, status, needle):
        self.assertEqual(answer[0], status, answer)
        self.assertIn(needle, answer[1]["error"])

    def solve(self, index, split="test"):
        sid, first = start(self.port, {"name": "guess-number", "index": index, "split": split})
        history = []
        while True:
            status, answer, _ = interact(self.port, sid, gn.solve(first["messages"][0]["content"],
                                                                  history))
            self.assertEqual(status, 200, answer)
            history.extend(answer["messages"])
            if answer["finish"]:
                return sid, answer


class Protocol(ServerTest):
    def test_reference_solver_episodes(self):
        for index in range(20):
            sid, last = self.solve(index)
            self.assertEqual((last["status"], last["reward"]), ("completed", 1.0))
            self.assertEqual(last["metrics"]["success"], True)
            self.assertIn("guesses", last["metrics"]["extra"])
            self.assertError(interact(self.port, sid, assistant("1")), 409,
                             "already finished (completed)")
        self.assertEqual(request(self.port, "GET", "/api/list_sessions")[:2], (200, []))

    def test_malformed_requests(self):
        p = self.port
        post = lambda route, raw=None, headers=None: request(p, "POST", route, raw=raw,
                                                             headers=headers)
        self.assertEqual(request(p, "GET", "/api/get_indices?name=guess-number")[1],
                         list(range(200)))
        self.assertError(request(p, "GET", "/api/get_indices?name=nope"), 400, "guess-number")
        self.assertError(request(p, "GET", "/api/get_indices"), 400, "name")
        self.assertError(request(p, "GET", "/api/get_indices?name=fragile&split=dev"), 400,
                         "split: unknown variant `dev`")
        self.assertError(post("/api/start_sample", b"{not json"), 400, "invalid start_sample body")
        self.assertError(post("/api/start_sample", b""), 400, "start_sample")
        self.assertError(post("/api/start_sample", b'{"index": 0}'), 422, "name")
        self.assertError(post("/api/start_sample", b'{"name": "fragile", "index": "x"}'), 422,
                         "expected u64")
        self.assertError(post("/api/start_sample", b'{"name": "fragile", "index": -1}'), 422,
                         "expected u64")
        self.assertError(post("/api/start_sample", b'{"name": "fragile"}'), 422, "custom_task")
        self.assertError(post("/api/start_sample", b'{"name": "chess", "index": 0}'), 400,
                         "unknown env `chess`; this server serves: fragile, guess-number")
        task = {"env_id": "other", "id": "t", "split": "test", "data": {"high": 9, "secret": 3}}
        body = json.dumps({"name": "guess-number", "custom_task": task}).encode()
        self.assertError(post("/api/start_sample", body), 400, "belongs to env `other`")
        task["env_id"], task["data"] = "guess-number", {"high": 9}
        body = json.dumps({"name": "guess-number", "custom_task": task}).encode()
        self.assertError(post("/api/start_sample", body), 422, "refused custom_task `t`")
        action = json.dumps({"messages": [{"role": "assistant", "content": "42"}]}).encode()
        self.assertError(post("/api/interact", action), 400, "session_id")
        self.assertError(post("/api/interact", action, {"session_id": "999999"}), 404,
                         "unknown session id 999999")
        self.assertError(post("/api/interact", action, {"session_id": "abc"}), 404,
                         'unknown session id "abc"')
        self.assertError(post("/api/cancel", None, {"session_id": "999999"}), 404,
                         "unknown session")
        self.assertError(post("/api/cancel"), 400, "session_id")
        sid = {"session_id": start(p, {"name": "fragile", "index": 3})[0]}
        self.assertError(post("/api/interact", b"[[", sid), 400, "invalid interact body")
        self.assertError(post("/api/interact", b'{"msgs": []}', sid), 422, "messages")
        self.assertError(post("/api/interact", b'{"messages": []}', sid), 422, "exactly one")
        two = {"messages": [assistant("1"), assistant("2")]}
        self.assertError(post("/api/interact", json.dumps(two).encode(), sid), 422, "exactly one")
        self.assertError(post("/api/interact", b'{"messages": [{"role": "robot"}]}', sid), 422,
                         "robot")
        bad_call = {"messages": [{"role": "assistant", "tool_calls": [{"id": "c", "function": {
            "name": "guess", "arguments": {"number": 1}}}]}]}
        self.assertError(post("/api/interact", json.dumps(bad_call).encode(), sid), 422,
                         "arguments")
        self.assertError(request(p, "GET", "/api/nothing"), 404, "no such route")
        self.assertError(request(p, "GET", "/api/interact"), 405, "POST")
        workers = request(p, "GET", "/api/list_workers")[1]
        self.assertEqual(workers[0]["envs"], ["fragile", "guess-number"])
        self.assertEqual(workers[0]["sessions"], 1)
        [listed] = request(p, "GET", "/api/list_sessions")[1]
        self.assertEqual((listed["session_id"], listed["env"], listed["task_id"], listed["steps"]),
                         (sid["session_id"], "fragile", "test-3", 0))

    def test_chunked_body(self):
        body = json.dumps({"name": "fragile", "index": 1}).encode()
        chunked = b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)
        status, answer, head = request(self.port, "POST", "/api/start_sample", raw=chunked,
                                       headers={"Transfer-Encoding": "chunked"})
        self.assertEqual(status, 200, answer)
        self.assertEqual(answer["messages"][0]["content"], "say something")

    def test_unreadable_body(self):
        self.assertError(request(self.port, "POST", "/api/start_sample",
                                 headers={"Content-Length": "abc"}), 400,
                         "could not read the request body")

    def test_cancel(self):
        sid, _ = start(self.port, {"name": "fragile", "index": 1})
        status, answer, _ = request(self.port, "POST", "/api/cancel", headers={"session_id": sid})
        self.assertEqual((status, answer), (200, {"session_id": sid, "status": "cancelled"}))
        self.assertError(interact(self.port, sid, assistant("hi")), 404, "was cancelled")
        self.assertError(request(self.port, "POST", "/api/cancel", headers={"session_id": sid}),
                         404, "was cancelled")

    def test_failing_envs_are_task_errors(self):
        with self.assertLogs("agentrl_env", "WARNING") as logs:
            self._failing_envs()
        self.assertEqual(len(logs.records), 6, logs.output)
        self.assertIn("failed to start task `test-13`", logs.output[0])

    def _failing_envs(self):
        self.assertError(request(self.port, "POST", "/api/start_sample",
                                 {"name": "fragile", "index": 13}), 500, "unlucky task")
        for text, needle in (("raise", "the simulator crashed"), ("none", "expected StepResult"),
                             ("nan", "finite"), ("bad message", "robot"),
                             ("bad metric", "success")):
            sid, _ = start(self.port, {"name": "fragile", "index": 1})
            self.assertEqual(interact(self.port, sid, assistant("fine"))[1]["metrics"]["extra"],
                             {"note": "fine"})
            status, answer, _ = interact(self.port, sid, assistant(text))
            self.assertEqual((status, answer["status"], answer["finish"]),
                             (200, "task_error", True))
            self.assertIn("environment `fragile`", answer["error"])
            self.assertIn(needle, answer["error"])
            self.assertError(interact(self.port, sid, assistant("x")), 409, "task_error")

    def test_turn_limit(self):
        task = {"env_id": "guess-number", "id": "t", "split": "train",
                "data": {"high": 7, "secret": 2}}
        sid, _ = start(self.port, {"name": "guess-number", "custom_task": task})
        limit = gn.turns_needed(7) + 2
        for turn in range(1, limit + 1):
            status, answer, _ = interact(self.port, sid, assistant(" "))
            self.assertEqual(status, 200)
            expected = "task_limit_reached" if turn == limit else "agent_invalid_action"
            self.assertEqual(answer["status"], expected)
            self.assertEqual(answer["finish"], turn == limit)

    def test_concurrent_sessions_never_mix(self):
        results = []

        def worker(offset):
            for index in range(offset, 100, 10):
                sid, last = self.solve(index, "train")
                results.append(last["reward"])

        threads = [threading.Thread(target=worker, args=(i,)) for i in range(10)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        self.assertEqual(results, [1.0] * 100)


class Limits(ServerTest):
    config = ServerConfig(session_ttl=0.3, max_sessions=2)

    def test_idle_sessions_expire(self):
        sid, _ = start(self.port, {"name": "fragile", "index": 1})
        wait_until(lambda: self.server.table.count() == 0)
        self.assertError(interact(self.port, sid, assistant("hi")), 404,
                         "expired after 0.3 s idle")

    def test_max_sessions(self):
        self.server.table.config.session_ttl = 600.0
        start(self.port, {"name": "fragile", "index": 1})
        sid, _ = start(self.port, {"name": "fragile", "index": 2})
        self.assertError(request(self.port, "POST", "/api/start_sample",
                                 {"name": "fragile", "index": 3}), 503, "maximum of 2 sessions")
        request(self.port, "POST", "/api/cancel", headers={"session_id": sid})
        start(self.port, {"name": "fragile", "index": 3})


class Token(ServerTest):
    token = "s3cret"

    def test_bearer_token(self):
        body = {"name": "fragile", "index": 1}
        status, answer, head = request(self.port, "POST", "/api/start_sample", body)
        self.assertEqual((status, head.get("www-authenticate")), (401, "Bearer"))
        self.assertIn("missing `Authorization: Bearer TOKEN` header", answer["error"])
        wrong = request(self.port, "GET", "/api/list_workers",
                        headers={"Authorization": "Bearer nope"})
        self.assertError(wrong, 401, "wrong bearer token")
        sid, _ = start(self.port, body, {"Authorization": "Bearer s3cret"})
        status, answer, _ = interact(self.port, sid, assistant("hi"),
                                     {"Authorization": "Bearer s3cret"})
        self.assertEqual((status, answer["status"]), (200, "running"))


if __name__ == "__main__":
    unittest.main()
