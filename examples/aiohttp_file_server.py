"""An aiohttp file server on ringio's event loop.

    python examples/aiohttp_file_server.py ROOT [PORT]

GET /NAME sends ROOT/NAME with aiohttp's FileResponse (loop.sendfile on ringio's
loop); GET /head/NAME?n=N reads the first N bytes with ringio.open.
"""

from __future__ import annotations

import sys
from pathlib import Path

from aiohttp import web

import ringio


def make_app(root: Path) -> web.Application:
    def resolve(name: str) -> Path:
        path = (root / name).resolve()
        if root.resolve() not in path.parents or not path.is_file():
            raise web.HTTPNotFound()
        return path

    async def send_file(request: web.Request) -> web.StreamResponse:
        return web.FileResponse(resolve(request.match_info["name"]))

    async def head(request: web.Request) -> web.Response:
        n = int(request.query.get("n", "64"))
        async with ringio.open(resolve(request.match_info["name"]), "rb") as f:
            return web.Response(body=await f.read(n))

    app = web.Application()
    app.router.add_get("/head/{name}", head)
    app.router.add_get("/{name}", send_file)
    return app


if __name__ == "__main__":
    root = Path(sys.argv[1])
    port = int(sys.argv[2]) if len(sys.argv) > 2 else 8080
    web.run_app(make_app(root), host="127.0.0.1", port=port,
                loop=ringio.new_event_loop(), print=None)  # fmt: skip
