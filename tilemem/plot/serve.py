"""``tilemem html --serve``: the page over HTTP on this machine, any tile's map made from the
report when the page asks for it.

A one-file page embeds full maps for a few tiles only (at 16 IPUs, 23,552 tiles and ~50 M
variables, every map would be ~3.5 GB of page); its overview covers every tile. Served, the
page fetches ``tile/N.json`` for a tile it does not hold, and this server answers it with
``tile_entry`` (the same data the file embeds) from the report it keeps open, so a map costs
one tile's work when it is asked for, and the server's memory is the report's (mapped) and
its figures'. Only 127.0.0.1 by default: the report's names are not for the network.
"""
from __future__ import annotations

import json
import re
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

from .pagedata import tile_entry

TILE = re.compile(r"^/tile/(\d+)\.json$")


def tile_server(r, page: Path, built: dict, *, offsets=None, compare=None,
                host: str = "127.0.0.1", port: int = 0) -> HTTPServer:
    """An ``HTTPServer`` (not yet serving: call ``serve_forever``) of ``page`` at ``/`` and
    of tile maps at ``/tile/N.json``; ``built``: ``page_data``'s result for ``r``."""
    page = Path(page)
    fig, fig_b = built["figures"], built["figuresB"]
    diagnosed = {int(k): e.get("oom") for k, e in built["data"]["tiles"].items()}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (http.server's name)
            path = self.path.split("?")[0].split("#")[0]
            m = TILE.match(path)
            if path in ("/", "/" + page.name):
                self._send(200, "text/html; charset=utf-8", page.read_bytes())
            elif m and int(m.group(1)) < r.num_tiles:
                t = int(m.group(1))
                e = tile_entry(r, t, fig, offsets, compare=compare, fig_b=fig_b)
                e["why"] = ["loaded when asked"]
                e["oom"] = diagnosed.get(t)
                body = json.dumps(e, separators=(",", ":")).encode()
                self._send(200, "application/json", body)
            elif path == "/favicon.ico":   # browsers ask; none, but not an error
                self._send(204, "image/x-icon", b"")
            else:
                self._send(404, "text/plain", b"not found\n")

        def _send(self, code: int, kind: str, body: bytes) -> None:
            self.send_response(code)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):     # quiet: the command prints the address once
            pass

    return HTTPServer((host, port), Handler)
