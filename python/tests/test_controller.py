"""Registering with a controller: register, heartbeats with the load, registering again after
a 404, and clear errors. The controller here is a small recording HTTP server; the Rust test
`agentrl-env/tests/python_sdk.rs` runs the same against the real Rust controller."""

import json
import threading
import time
import unittest
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import support  # noqa: F401 (import paths)
from agentrl_env import ControllerError, Registration
from agentrl_env.controller import register_body


class Recorder(BaseHTTPRequestHandler):
    """Answers register with worker-N and heartbeat with 200, or 404 for a forgotten id."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_POST(self):
        state = self.server.state
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with state["lock"]:
            state["calls"].append((self.path, body, self.headers.get("Authorization")))
            if self.path == "/api/register":
                state["next"] += 1
                status, answer = 200, {"worker_id": f"worker-{state['next']}",
                                       "heartbeat_timeout_secs": 10.0}
            elif body["worker_id"] in state["forgotten"]:
                message = f"unknown worker `{body['worker_id']}`; register again"
                status, answer = 404, {"error": message}
            else:
                status, answer = 200, {"worker_id": body["worker_id"], "sessions": 0}
        data = json.dumps(answer).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class RegistrationTest(unittest.TestCase):
    def setUp(self):
        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
        self.http.state = {"lock": threading.Lock(), "calls": [], "next": 0, "forgotten": set()}
        threading.Thread(target=self.http.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.http.server_address[1]}"

    def tearDown(self):
        self.http.shutdown()
        self.http.server_close()

    def calls(self):
        with self.http.state["lock"]:
            return list(self.http.state["calls"])

    def test_register_heartbeat_and_register_again(self):
        reg = Registration(self.url, "http://127.0.0.1:9", ["guess-number"], capacity=8,
                           token="tok", interval=0.05, load=lambda: 3).register()
        try:
            self.assertEqual(reg.worker_id, "worker-1")
            deadline = time.monotonic() + 10
            while sum(c[0] == "/api/heartbeat" for c in self.calls()) < 2:
                self.assertLess(time.monotonic(), deadline)
                time.sleep(0.02)
            path, body, auth = self.calls()[0]
            self.assertEqual((path, auth), ("/api/register", "Bearer tok"))
            self.assertEqual(body, {"address": "http://127.0.0.1:9", "envs": ["guess-number"],
                                    "capacity": 8})
            beat = next(c for c in self.calls() if c[0] == "/api/heartbeat")
            self.assertEqual(beat[1], {"worker_id": "worker-1", "load": 3})
            with self.http.state["lock"]:
                self.http.state["forgotten"].add("worker-1")
            while reg.worker_id != "worker-2":
                self.assertLess(time.monotonic(), deadline)
                time.sleep(0.02)
        finally:
            reg.stop()

    def test_the_worker_token_goes_in_the_registration_and_the_controller_token_in_the_header(
            self):
        reg = Registration(self.url, "http://127.0.0.1:9", ["guess-number"], token="ctl",
                           worker_token="own").register()
        try:
            path, body, auth = self.calls()[0]
            self.assertEqual((path, auth), ("/api/register", "Bearer ctl"))
            self.assertEqual(body, {"address": "http://127.0.0.1:9", "envs": ["guess-number"],
                                    "worker_token": "own"})
            with self.http.state["lock"]:
                self.http.state["forgotten"].add("worker-1")
            reg.beat()  # 404 -> registers again, with the worker token again
            again = [c for c in self.calls() if c[0] == "/api/register"]
            self.assertEqual([c[1].get("worker_token") for c in again], ["own", "own"])
            beats = [c for c in self.calls() if c[0] == "/api/heartbeat"]
            self.assertTrue(beats and all("worker_token" not in c[1] for c in beats), beats)
        finally:
            reg.stop()

    def test_register_body_leaves_out_unset_fields_and_refuses_a_blank_token(self):
        self.assertEqual(register_body("h:1", ("e",)), {"address": "h:1", "envs": ["e"]})
        self.assertEqual(register_body("h:1", ["e"], capacity=2, worker_token="w"),
                         {"address": "h:1", "envs": ["e"], "capacity": 2, "worker_token": "w"})
        with self.assertRaises(ValueError):
            register_body("h:1", ["e"], worker_token=" ")

    def test_errors_are_clear(self):
        with self.assertRaises(ControllerError) as ctx:
            Registration("127.0.0.1:1", "http://x", ["e"]).register()
        self.assertIn("cannot register with the controller: POST http://127.0.0.1:1/api/register",
                      str(ctx.exception))
        reg = Registration(self.url, "http://x", ["e"])
        reg.register()
        reg.stop()
        with self.http.state["lock"]:
            self.http.state["forgotten"].add("worker-1")
            self.http.state["next"] = 6
        reg.beat()  # 404 -> registers again
        self.assertEqual(reg.worker_id, "worker-7")
        with self.assertRaises(ValueError):
            Registration(self.url, "http://x", ["e"], interval=0)


if __name__ == "__main__":
    unittest.main()
