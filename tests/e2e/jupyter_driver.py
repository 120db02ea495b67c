"""A tenant's Jupyter driven as her browser drives it: a notebook opened through the server's REST
API (a session, whose kernel starts in the notebook's folder), each code cell executed in that
kernel over its WebSocket with the Jupyter messaging protocol, with her token and nothing else.

What a cell prints is kept as it arrives (`Kernel.text`), so a test can watch a long cell (a
training run) and act on it while it runs; `run` returns once the kernel is idle again and
raises `CellFailed` with the kernel's traceback should the cell raise.
"""

from __future__ import annotations

import asyncio
import datetime
import json
import threading
import urllib.parse
import urllib.request
import uuid
from typing import Any

from tornado.httpclient import HTTPRequest
from tornado.websocket import websocket_connect


class CellFailed(AssertionError):
    """A cell raised in the kernel: its error name, value and traceback, with what it printed."""


class Kernel:
    """The kernel of a session of the notebook at `path` (relative to Jupyter's root) on the Jupyter
    server at `url` (`http://host:port/`), opened with `token`."""

    def __init__(self, url: str, token: str, path: str) -> None:
        self.url, self.token = url.rstrip("/") + "/", token
        name = path.rsplit("/", 1)[-1]
        session = self._request(
            "POST", "api/sessions", {"path": path, "name": name, "type": "notebook", "kernel": {"name": "python3"}}
        )
        self.session_id, self.kernel_id = session["id"], session["kernel"]["id"]
        self._text: list[str] = []
        self._lock = threading.Lock()

    def notebook(self, path: str) -> dict[str, Any]:
        """The notebook at `path` as the server holds it (nbformat's JSON)."""
        return self._request("GET", f"api/contents/{urllib.parse.quote(path)}?content=1")["content"]

    def close(self) -> None:
        """Ends the session and its kernel."""
        self._request("DELETE", f"api/sessions/{self.session_id}")

    @property
    def text(self) -> str:
        """Everything the kernel's cells have printed so far."""
        with self._lock:
            return "".join(self._text)

    def run(self, code: str, timeout: float) -> str:
        """Executes `code` as a cell; what it printed. Raises CellFailed if it raised, TimeoutError
        if the kernel is not idle again within `timeout` seconds."""
        return asyncio.run(asyncio.wait_for(self._execute(code), timeout))

    def _request(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.url + path, data=data, method=method, headers=self._headers())
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with opener.open(request, timeout=30) as response:
            answer = response.read()
        return json.loads(answer) if answer else None

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"token {self.token}", "Content-Type": "application/json"}

    async def _execute(self, code: str) -> str:
        ws_url = "ws" + self.url.removeprefix("http") + f"api/kernels/{self.kernel_id}/channels?session_id={self.session_id}"
        connection = await websocket_connect(HTTPRequest(ws_url, headers=self._headers()))
        try:
            msg_id = uuid.uuid4().hex
            await connection.write_message(json.dumps(self._execute_request(msg_id, code)))
            printed: list[str] = []
            error: dict[str, Any] | None = None
            while True:
                raw = await connection.read_message()
                if raw is None:
                    raise CellFailed(f"the kernel's WebSocket closed mid-cell; printed:\n{''.join(printed)[-3000:]}")
                message = json.loads(raw)
                if message.get("parent_header", {}).get("msg_id") != msg_id:
                    continue
                kind, content = message["header"]["msg_type"], message["content"]
                if kind == "stream" or kind in ("execute_result", "display_data"):
                    piece = content.get("text") or content.get("data", {}).get("text/plain", "") + "\n"
                    printed.append(piece)
                    with self._lock:
                        self._text.append(piece)
                elif kind == "error":
                    error = content
                elif kind == "status" and content["execution_state"] == "idle":
                    break
        finally:
            connection.close()
        if error:
            raise CellFailed(
                f"{error['ename']}: {error['evalue']}\n"
                + "\n".join(error["traceback"])
                + f"\nprinted:\n{''.join(printed)[-3000:]}"
            )
        return "".join(printed)

    def _execute_request(self, msg_id: str, code: str) -> dict[str, Any]:
        return {
            "header": {
                "msg_id": msg_id,
                "msg_type": "execute_request",
                "session": self.session_id,
                "username": "tenant",
                "date": datetime.datetime.now(datetime.UTC).isoformat(),
                "version": "5.3",
            },
            "parent_header": {},
            "metadata": {},
            "content": {"code": code, "silent": False, "store_history": True, "user_expressions": {}, "allow_stdin": False},
            "channel": "shell",
        }
