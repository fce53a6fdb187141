"""VisCE2 through the OpenAI-compatible backend: requests/s against a local stand-in server at
several concurrency levels, and what the on-disk cache saves on a rerun.

    python benchmarks/bench_visce2.py [--items N] [--images K] [--latency SECONDS] [--concurrency 1,4,16]

The server (started here, in a thread) answers every chat completion after ``--latency``
seconds (a stand-in for the model's generation time), with a fixed visual context or a fixed
rating. Rows:
  cold c=N   ``visce2`` on N items over K images, empty cache: K context + N rating requests
  warm       the same call again on the same cache: no request, only hashing and cache reads
  new caps   new captions of the same images: N rating requests, the K contexts come from the cache
The client side (JSON, base64 of the image, atomic cache writes) is what is measured beyond
``latency / concurrency``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")


class _Server:
    """Answers ``/v1/chat/completions`` after ``latency`` s; counts requests."""

    def __init__(self, latency: float):
        self.count = 0
        lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with lock:
                    outer.count += 1
                time.sleep(latency)
                text = body["messages"][0]["content"][1]["text"]
                answer = "Rating: 72" if "Candidate:" in text else "- Object 1: a square\n- Features: red"
                data = json.dumps({"choices": [{"index": 0, "message": {"role": "assistant", "content": answer}}]})
                raw = data.encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--items", type=int, default=200, help="captions to score (default 200)")
    ap.add_argument("--images", type=int, default=20, help="distinct images (default 20)")
    ap.add_argument("--latency", type=float, default=0.02, help="server seconds per answer (default 0.02)")
    ap.add_argument("--concurrency", default="1,4,16", help="comma list (default 1,4,16)")
    args = ap.parse_args()

    from PIL import Image

    from capeval.metrics.visce2.scorer import VisCE2

    server = _Server(args.latency)
    rows: list[tuple[str, int, float]] = []
    try:
        with tempfile.TemporaryDirectory(prefix="bench-visce2-") as tmp:
            folder = Path(tmp) / "images"
            folder.mkdir()
            for k in range(args.images):  # ~ a COCO-sized JPEG
                Image.effect_noise((640, 480), 40 + k).convert("RGB").save(folder / f"im{k}.jpg", quality=85)
            images = {f"c{i}": folder / f"im{i % args.images}.jpg" for i in range(args.items)}
            caps = {f"c{i}": f"caption number {i}" for i in range(args.items)}
            for conc in [int(c) for c in args.concurrency.split(",")]:
                cache = Path(tmp) / f"cache-{conc}"
                scorer = VisCE2(metrics=["visce2"], backend="openai", base_url=server.base_url, model="bench",
                                cache=str(cache), concurrency=conc)
                for label, captions in ((f"cold c={conc}", caps), ("warm", caps),
                                        ("new caps", {k: v + " (new)" for k, v in caps.items()})):
                    before = server.count
                    t0 = time.perf_counter()
                    res = scorer.score(captions, images=images)["visce2"]
                    dt = time.perf_counter() - t0
                    assert len(res.items) == args.items
                    rows.append((label, server.count - before, dt))
    finally:
        server.close()
    print(f"visce2 (openai backend), {args.items} items, {args.images} images, server latency {args.latency * 1000:.0f} ms")
    print(f"{'run':<12} {'requests':>9} {'seconds':>9} {'requests/s':>11} {'items/s':>9}")
    for label, n, dt in rows:
        print(f"{label:<12} {n:>9} {dt:>9.2f} {n / dt if n else 0:>11.1f} {args.items / dt:>9.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
