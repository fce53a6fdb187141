"""The LLM/VLM judges (visce2, clair, fleur, ref-fleur, expert) through the OpenAI-compatible
backend: requests/s against a local scripted server at several concurrency levels, and the
cached rerun.

    python benchmarks/bench_judges.py [--items N] [--images K] [--latency SECONDS] [--concurrency 1,4,16]

The server (started here, in a thread, on 127.0.0.1) answers every chat completion after
``--latency`` seconds (a stand-in for the model's generation time): a visual context or a
rating for VisCE2, CLAIR's JSON, and for FLEUR/EXPERT the answer ``0.75`` with per-token
``top_logprobs`` (so the smoothing runs). Rows per judge:
  c=N       empty cache, N requests in flight
  cached    the same call again on the c=N cache: no request, hashing and cache reads only
  new caps  (visce2) new captions of the same images: one rating request per caption, the
            images' visual contexts come from the cache
The client side (JSON, base64 of each padded image, atomic cache writes) is what is measured
beyond ``latency / concurrency``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")


def _tokens(answer: str) -> list[dict]:
    probs = {2: {"7": 0.6, "8": 0.3, "6": 0.1}, 3: {"5": 0.5, "0": 0.5}}
    return [{"token": ch, "logprob": 0.0,
             "top_logprobs": [{"token": t, "logprob": math.log(p)} for t, p in probs.get(k, {ch: 1.0}).items()]}
            for k, ch in enumerate(answer)]


class _Server:
    """Scripted answers after ``latency`` s; counts requests."""

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
                content = body["messages"][-1]["content"]
                text = content if isinstance(content, str) else content[-1]["text"]
                choice: dict = {"index": 0, "message": {"role": "assistant"}}
                if "Candidate set:" in text:
                    choice["message"]["content"] = '{"score": 72, "reason": "same scene"}'
                elif "0.0 to 1.0" in text:
                    choice["message"]["content"] = "0.75"
                    choice["logprobs"] = {"content": _tokens("0.75")}
                elif "Candidate:" in text:
                    choice["message"]["content"] = "Rating: 72"
                else:
                    choice["message"]["content"] = "- Object 1: a square\n- Features: red"
                raw = json.dumps({"choices": [choice]}).encode()
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
    ap.add_argument("--judges", default="visce2,clair,fleur,ref-fleur,expert", help="comma list")
    args = ap.parse_args()

    from PIL import Image

    from capeval.metrics.clair import CLAIR
    from capeval.metrics.fleur import EXPERT, FLEUR
    from capeval.metrics.visce2.scorer import VisCE2

    def build(judge: str, cache: Path, conc: int):
        common = dict(backend="openai", base_url=server.base_url, model="bench", cache=str(cache), concurrency=conc)
        if judge == "visce2":
            return VisCE2(metrics=["visce2"], **common)
        if judge == "clair":
            return CLAIR(**common)
        if judge == "expert":
            return EXPERT(**common)
        return FLEUR(metrics=[judge], **common)

    server = _Server(args.latency)
    rows: list[tuple[str, str, int, float]] = []
    try:
        with tempfile.TemporaryDirectory(prefix="bench-judges-") as tmp:
            folder = Path(tmp) / "images"
            folder.mkdir()
            for k in range(args.images):  # ~ a COCO-sized JPEG
                Image.effect_noise((640, 480), 40 + k).convert("RGB").save(folder / f"im{k}.jpg", quality=85)
            images = {f"c{i}": folder / f"im{i % args.images}.jpg" for i in range(args.items)}
            caps = {f"c{i}": f"caption number {i}" for i in range(args.items)}
            refs = {f"c{i}": [f"reference {i} a", f"reference {i} b"] for i in range(args.items)}
            for judge in args.judges.split(","):
                for conc in [int(c) for c in args.concurrency.split(",")]:
                    scorer = build(judge, Path(tmp) / f"cache-{judge}-{conc}", conc)
                    labels = [f"c={conc}", "cached"] + (["new caps"] if judge == "visce2" else [])
                    for label in labels:
                        before = server.count
                        t0 = time.perf_counter()
                        run_caps = {k: v + " (new)" for k, v in caps.items()} if label == "new caps" else caps
                        if judge == "clair":
                            res = scorer.score(run_caps, refs)[judge]
                        else:
                            res = scorer.score(run_caps, refs if judge == "ref-fleur" else None, images=images)[judge]
                        dt = time.perf_counter() - t0
                        assert len(res.items) == args.items, (judge, res.extras.get("errors"))
                        rows.append((judge, label, server.count - before, dt))
    finally:
        server.close()
    print(f"judges (openai backend), {args.items} items, {args.images} images, server latency "
          f"{args.latency * 1000:.0f} ms")
    print(f"{'judge':<10} {'run':<8} {'requests':>9} {'seconds':>9} {'requests/s':>11} {'items/s':>9}")
    for judge, label, n, dt in rows:
        print(f"{judge:<10} {label:<8} {n:>9} {dt:>9.2f} {n / dt if n else 0:>11.1f} {args.items / dt:>9.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
