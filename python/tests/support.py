"""Test helpers: import paths for the SDK and the examples, and a small JSON HTTP client."""

from __future__ import annotations

import http.client
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
for sub in (ROOT, ROOT / "examples"):
    if str(sub) not in sys.path:
        sys.path.insert(0, str(sub))


def request(port: int, method: str, path: str, body: Any = None, headers: dict | None = None,
            raw: bytes | None = None) -> tuple[int, Any, dict]:
    """One HTTP request to 127.0.0.1:`port`; returns the status, the JSON answer and the
    answer's headers (lower-case names)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
        conn.request(method, path, body=data, headers=headers or {})
        response = conn.getresponse()
        text = response.read()
        answer = json.loads(text) if text else None
        return response.status, answer, {k.lower(): v for k, v in response.getheaders()}
    finally:
        conn.close()
