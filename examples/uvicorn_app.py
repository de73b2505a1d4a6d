"""An ASGI app served by uvicorn on ringio's event loop.

    python examples/uvicorn_app.py [PORT]
    # or: uvicorn examples.uvicorn_app:app --loop ringio:new_event_loop

GET / answers "hello, world"; GET /file streams this file back (read with
ringio.open on the same ring as the sockets).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import ringio

HERE = Path(__file__)


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    if scope["path"] == "/file":
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"text/plain")]})  # fmt: skip
        async with ringio.open(HERE, "rb") as f:
            while chunk := await f.read(64 * 1024):
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b""})
        return
    body = b"hello, world"
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"text/plain"),
                            (b"content-length", str(len(body)).encode())]})  # fmt: skip
    await send({"type": "http.response.body", "body": body})


if __name__ == "__main__":
    import uvicorn

    port = int(sys.argv[1]) if len(sys.argv) > 1 else 8000
    # uvicorn 0.36+ takes a loop factory by name.
    uvicorn.run(app, host="127.0.0.1", port=port, loop="ringio:new_event_loop",
                log_level="warning")  # fmt: skip
