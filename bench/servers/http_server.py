"""HTTP servers for the ``http`` benchmark: uvicorn (httptools) and aiohttp ``web``.

Both serve the same three routes with keep-alive:

``/``      ``Hello, world!`` as text/plain;
``/json``  a 10 KiB JSON document, serialised with ``json.dumps`` per request;
``/file``  the file ``--file`` names (the benchmark's is 1 MiB), as each framework's
           users serve one: aiohttp's ``web.FileResponse`` (``loop.sendfile`` where
           the loop has it, else reads in a thread and writes), Starlette's
           ``FileResponse`` under uvicorn (reads in a thread through anyio, writes
           in 64 KiB chunks). Without ``--file``, or under uvicorn without
           Starlette, ``/file`` answers 404.

``--framework uvicorn|aiohttp``; ``--loop-factory module:callable`` picks the
event loop (``asyncio:new_event_loop``, ``uvloop:new_event_loop``,
``rloop:new_event_loop``, ``ringio:new_event_loop``) — what uvicorn's own
``--loop module:function`` (0.36+) and aiohttp's ``web.run_app(loop=...)`` do. The
server binds 127.0.0.1 on port 0, prints the port alone on the first line of
stdout once it is serving, and runs until killed or for ``--duration`` seconds.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import os
import socket
import sys
from collections.abc import Callable
from typing import Any

HELLO = b"Hello, world!"
# About 10 KiB once serialised: 80 records of a few fields.
DOCUMENT = {
    "items": [
        {"id": i, "name": f"item-{i:04d}", "tags": ["alpha", "beta", "gamma"],
         "price": i * 1.25, "available": i % 3 != 0, "description": "x" * 40}
        for i in range(80)
    ]
}  # fmt: skip


# The file ``/file`` serves (``--file``), or None.
FILE: str | None = None


def loop_factory(spec: str) -> Callable[[], asyncio.AbstractEventLoop]:
    module_name, _, attr = spec.partition(":")
    obj: Any = importlib.import_module(module_name)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj  # type: ignore[no-any-return]


async def asgi_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    if scope["path"] == "/file":
        try:
            from starlette.responses import FileResponse
        except ImportError:
            FileResponse = None
        if FILE is not None and FileResponse is not None:
            return await FileResponse(FILE)(scope, receive, send)
        await send({"type": "http.response.start", "status": 404, "headers": []})
        await send({"type": "http.response.body", "body": b""})
        return
    if scope["path"] == "/json":
        body, kind = json.dumps(DOCUMENT).encode(), b"application/json"
    else:
        body, kind = HELLO, b"text/plain"
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", kind),
                            (b"content-length", str(len(body)).encode())]})  # fmt: skip
    await send({"type": "http.response.body", "body": body})


async def serve_uvicorn(sock: socket.socket, ready: Callable[[], None]) -> None:
    import uvicorn

    config = uvicorn.Config(asgi_app, http="httptools", lifespan="on", log_level="error",
                            access_log=False)  # fmt: skip
    server = uvicorn.Server(config)
    task = asyncio.ensure_future(server.serve(sockets=[sock]))
    while not server.started:
        if task.done():
            return await task
        await asyncio.sleep(0.01)
    ready()
    await task


async def serve_aiohttp(sock: socket.socket, ready: Callable[[], None]) -> None:
    from aiohttp import web

    async def hello(request: web.Request) -> web.Response:
        return web.Response(body=HELLO, content_type="text/plain")

    async def document(request: web.Request) -> web.Response:
        return web.json_response(DOCUMENT)

    app = web.Application()
    app.router.add_get("/", hello)
    app.router.add_get("/json", document)
    if FILE is not None:
        path = FILE

        async def file(request: web.Request) -> web.FileResponse:
            return web.FileResponse(path)

        app.router.add_get("/file", file)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.SockSite(runner, sock).start()
    ready()
    await asyncio.Event().wait()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--framework", choices=("uvicorn", "aiohttp"), required=True)
    parser.add_argument("--loop-factory", default="asyncio:new_event_loop")
    parser.add_argument("--duration", type=float, default=600.0)
    parser.add_argument("--file", help="the file /file serves")
    args = parser.parse_args(argv)
    global FILE
    FILE = args.file
    factory = loop_factory(args.loop_factory)
    # proto=IPPROTO_TCP, as create_server's getaddrinfo gives it: asyncio's loop sets
    # TCP_NODELAY only on sockets that say TCP (proto 0 left Nagle on: 44 ms a request).
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(4096)

    port = sock.getsockname()[1]  # some loops (rloop) take the socket over

    def ready() -> None:
        print(port, flush=True)

    serve = serve_uvicorn if args.framework == "uvicorn" else serve_aiohttp

    async def run() -> None:
        # A safety net: the benchmark stops the server with SIGTERM.
        asyncio.get_running_loop().call_later(args.duration, os._exit, 0)
        await serve(sock, ready)

    with asyncio.Runner(loop_factory=factory) as runner:
        runner.run(run())
    return 0


if __name__ == "__main__":
    sys.exit(main())
