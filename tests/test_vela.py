"""The ``vela`` metric drives the VELA authors' package (github.com/Ka2ukiMatsuda/VELA) the way
their group's kit CaptionEvalKit-for-VLMs does. The package and its weights cannot be installed
here, so these tests put a stand-in package with the same entry points on ``sys.path``
(``vela.load_pretrained_model``, ``dataloader.vela_collate_fn.VELACollateFn``) and check what
capeval hands it (samples, order, batches, perspective, working directory) and what it makes of
the outputs (clamping, NaN kept, errors). They cannot check VELA's numbers: that needs the
package and its checkpoint (docs/metrics/vela.md)."""

from __future__ import annotations

import json
import math
import sys
import textwrap
from pathlib import Path

import pytest

from capeval.errors import CapevalError

pytest.importorskip("torch")
PIL = pytest.importorskip("PIL.Image")

STUB_VELA = '''
import os
import torch

CALLS = []


class Model:
    def __init__(self, cfg_path, device):
        self.cfg = {"cfg_path": cfg_path, "cwd": os.getcwd()}
        self.device = device

    def move_batch_to_device(self, batch, device):
        CALLS.append(("move", device))
        return batch

    def __call__(self, values):
        # stands for the regressor: one output per sample, some outside [0, 1]
        return torch.tensor(values, dtype=torch.float16)


def load_pretrained_model(cfg_path, device):
    CALLS.append(("load", cfg_path, device, os.getcwd()))
    return Model(cfg_path, device)
'''

STUB_COLLATE = '''
import math
import os
import vela


class VELACollateFn:
    def __init__(self, cfg, device):
        self.cfg, self.device = cfg, device

    def __call__(self, samples):
        vela.CALLS.append(("collate", [dict(s, img=(s["img"].mode, s["img"].size)) for s in samples], os.getcwd()))
        # an output that depends on every field: length of the candidate, references, mode
        values = []
        for s in samples:
            if s["cand"] == "nan":
                values.append(math.nan)
                continue
            v = (len(s["cand"]) % 23) / 10 - 0.5 + 0.01 * len(s["refs"]) + {"desc": 0.0, "rel": 0.1, "flu": 0.2}[s["mode"]]
            values.append(v)
        return {"values": values}, [s["score"] for s in samples]
'''


@pytest.fixture
def package(tmp_path: Path, monkeypatch):
    repo = tmp_path / "VELA"
    (repo / "vela").mkdir(parents=True)
    (repo / "dataloader").mkdir()
    (repo / "configs").mkdir()
    (repo / "vela" / "__init__.py").write_text(textwrap.dedent(STUB_VELA))
    (repo / "dataloader" / "__init__.py").write_text("")
    (repo / "dataloader" / "vela_collate_fn.py").write_text(textwrap.dedent(STUB_COLLATE))
    (repo / "configs" / "config.yaml").write_text("model_name: Qwen/Qwen2.5-3B-Instruct\n")
    for name in ("vela", "dataloader", "dataloader.vela_collate_fn"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    monkeypatch.setattr(sys, "path", list(sys.path))
    yield repo
    for name in ("vela", "dataloader", "dataloader.vela_collate_fn"):
        sys.modules.pop(name, None)


def _expected(cand: str, refs: list[str], mode: str, clamp: bool = True) -> float:
    """The stand-in's output for one sample (the same formula, through float16 as it returns it)."""
    import torch

    v = (len(cand) % 23) / 10 - 0.5 + 0.01 * len(refs) + {"desc": 0.0, "rel": 0.1, "flu": 0.2}[mode]
    v = float(torch.tensor(v, dtype=torch.float16).float())
    return min(1.0, max(0.0, v)) if clamp else v


def _images(folder: Path, n: int) -> dict[str, str]:
    folder.mkdir(parents=True, exist_ok=True)
    out = {}
    for k in range(n):
        p = folder / f"sa_{k}.png"
        PIL.new("L" if k % 2 else "RGB", (8 + k, 6)).save(p)  # a grey image too: VELA gets RGB
        out[str(k)] = str(p)
    return out


def test_samples_batches_and_outputs(package: Path, tmp_path: Path) -> None:
    from capeval.metrics.vela import VelaScore

    cands = {str(k): "word " * (k + 1) for k in range(7)}
    refs = {str(k): ["a reference"] * (1 + k % 2) for k in range(7)}
    images = _images(tmp_path / "img", 7)
    scorer = VelaScore(perspective="rel", repo=package, batch_size=3)
    res = scorer.score(cands, refs, images=images)["vela"]
    import vela

    load = [c for c in vela.CALLS if c[0] == "load"]
    assert load == [("load", str(package / "configs" / "config.yaml"), "cpu", str(package))]
    collates = [c for c in vela.CALLS if c[0] == "collate"]
    assert [len(c[1]) for c in collates] == [3, 3, 1]  # batches of batch_size, in input order
    assert all(c[2] == str(package) for c in collates)  # the package's relative paths resolve
    samples = [s for c in collates for s in c[1]]
    assert [s["cand"] for s in samples] == list(cands.values())
    assert samples[1] == {"imgid": "sa_1.png", "img": ("RGB", (9, 6)), "refs": refs["1"], "cand": cands["1"],
                          "mode": "rel", "score": 0.0}
    raw = {k: _expected(cands[k], refs[k], "rel", clamp=False) for k in cands}
    assert dict(res.items) == {k: _expected(cands[k], refs[k], "rel") for k in cands}
    assert min(raw.values()) < 0 < 1 < max(raw.values())  # both clamps exercised
    assert res.extras["clamped"] == sum(not 0 <= v <= 1 for v in raw.values())
    assert res.system == pytest.approx(sum(res.items.values()) / 7)
    assert res.signature.fields["perspective"] == "rel" and "Ka2ukiMatsuda/VELA" in res.signature.fields["source"]
    unclamped = VelaScore(perspective="rel", repo=package, batch_size=3, clamp=False).score(cands, refs, images=images)
    assert dict(unclamped["vela"].items) == raw


def test_a_nan_output_stays_nan(package: Path, tmp_path: Path) -> None:
    from capeval.metrics.vela import VelaScore

    res = VelaScore(perspective="desc", repo=package).score({"a": "nan", "b": "fine caption"},
                                                           {"a": ["r"], "b": ["r"]},
                                                           images=_images(tmp_path / "i", 2) and
                                                           {"a": str(tmp_path / "i" / "sa_0.png"),
                                                            "b": str(tmp_path / "i" / "sa_1.png")})["vela"]
    assert math.isnan(res.items["a"]) and math.isnan(res.system)


def test_errors_are_one_line(package: Path, tmp_path: Path) -> None:
    from capeval.metrics.vela import VelaScore

    for kwargs, fragment in (({}, "perspective=None: give one of desc, rel, flu"),
                             ({"perspective": "fluency"}, "perspective='fluency'"),
                             ({"perspective": "desc", "repo": tmp_path / "nowhere"}, "no such folder"),
                             ({"perspective": "desc", "repo": package, "config": "configs/other.yaml"},
                              "config=.*no such file")):
        with pytest.raises(CapevalError, match=fragment) as e:
            VelaScore(**kwargs)
        assert "\n" not in str(e.value)
    scorer = VelaScore(perspective="desc", repo=package)
    with pytest.raises(CapevalError, match="vela needs references"):
        scorer.score({"a": "x"}, None, images={"a": str(tmp_path)})


def test_missing_package_names_the_install(tmp_path: Path, monkeypatch) -> None:
    from capeval.metrics.vela import VelaScore

    for name in ("vela", "dataloader", "dataloader.vela_collate_fn"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if "VELA" not in p])
    with pytest.raises(CapevalError, match=r"vela: the authors' package is not importable .*pip install -e VELA") as e:
        VelaScore(perspective="desc")
    assert "\n" not in str(e.value)


def test_bench_longcap_arena_end_to_end_through_the_cli(package: Path, tmp_path: Path, capsys) -> None:
    """``capeval bench longcap-arena -m vela``: the loader's perspective reaches the package, every row
    is scored with its image, and tau matches scipy on the package's own outputs."""
    stats = pytest.importorskip("scipy.stats")
    from test_longcap_arena import _write

    from capeval.cli.main import main

    rows = _write(tmp_path / "data", split="dci_test", perspective="flu", n=9, shards=1)
    img = tmp_path / "images" / "longcap-arena" / "images"
    img.mkdir(parents=True)
    for k in range(9):
        PIL.new("RGB", (4, 4)).save(img / f"sa_0{k:05d}.jpg")
    argv = ["bench", "longcap-arena", "-m", "vela", "--data-root", str(tmp_path / "data"), "--images",
            str(tmp_path / "images"), "-B", "longcap-arena.split=test-b", "-B", "longcap-arena.perspective=flu",
            "-O", f"vela.repo={package}", "--bootstrap", "0", "--json", "--quiet"]
    assert main(argv) == 0, capsys.readouterr().err
    out = json.loads(capsys.readouterr().out)
    import vela

    samples = [s for c in vela.CALLS if c[0] == "collate" for s in c[1]]
    assert {s["mode"] for s in samples} == {"flu"} and [s["cand"] for s in samples] == [r[0] for r in rows]
    assert samples[2]["imgid"] == "sa_000002.jpg"
    m = [_expected(r[0], r[1], "flu") for r in rows]
    assert len(set(m)) > 2
    got = {r["statistic"]: r["value"] for r in out["results"]}
    assert got["kendall_tau_c"] == pytest.approx(100 * stats.kendalltau(m, [r[2] for r in rows], variant="c")[0],
                                                 abs=1e-6)


def test_download_extracts_the_images_and_bench_scores_with_them(package: Path, tmp_path: Path, monkeypatch,
                                                                 capsys) -> None:
    """``capeval download longcap-arena`` (the hub's files served from 127.0.0.1) writes the embedded
    images where ``--images <data folder>`` finds them; ``capeval bench longcap-arena -m vela`` then
    hands the package each row's own image."""
    import threading
    from functools import partial
    from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

    from test_longcap_arena import _write

    from capeval.bench import data_download as dl
    from capeval.bench.sources import DataFile
    from capeval.cli.main import main

    class Quiet(SimpleHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

    served = tmp_path / "hub"
    rows = _write(served, n=6, shards=1)  # served/longcap-arena/data/dci_val.desc-00000-of-00001.parquet
    import pyarrow as pa
    import pyarrow.parquet as pq

    shard = served / "longcap-arena" / "data" / "dci_val.desc-00000-of-00001.parquet"
    table = pq.read_table(shard)
    blobs = []
    for k in range(6):  # real, distinct PNGs as the embedded images
        import io

        buf = io.BytesIO()
        PIL.new("RGB", (3 + k, 2)).save(buf, format="PNG")
        blobs.append({"bytes": buf.getvalue(), "path": None})
    table = table.set_column(table.schema.get_field_index("image"), "image",
                             pa.array(blobs, pa.struct([("bytes", pa.binary()), ("path", pa.string())])))
    pq.write_table(table, shard)
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(Quiet, directory=str(served)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/longcap-arena/data/{shard.name}"
    monkeypatch.setattr(dl, "_hub_files", lambda src: (DataFile(shard.name, (url,), place=f"longcap-arena/data/{shard.name}"),))
    try:
        monkeypatch.setenv("CAPEVAL_CACHE", str(tmp_path / "cache"))
        monkeypatch.delenv("CAPEVAL_DATA", raising=False)
        monkeypatch.delenv("CAPEVAL_DATA_MIRROR", raising=False)
        assert main(["download", "longcap-arena"]) == 0, capsys.readouterr().err
        err = capsys.readouterr().err
    finally:
        server.shutdown()
        server.server_close()
    assert "images: 6 written" in err
    root = Path(err.split(" in ", 1)[1].split(";", 1)[0]).parents[1]
    assert (root / "longcap-arena" / "images" / "sa_000005.jpg").read_bytes() == blobs[5]["bytes"]
    assert main(["bench", "longcap-arena", "-m", "vela", "--images", str(root), "-O", f"vela.repo={package}",
                 "--bootstrap", "0", "--json", "--quiet"]) == 0, capsys.readouterr().err
    import vela

    samples = [s for c in vela.CALLS if c[0] == "collate" for s in c[1]]
    assert [s["img"][1] for s in samples] == [(3 + k, 2) for k in range(6)]  # each row its own image
    assert [s["cand"] for s in samples] == [r[0] for r in rows] and {s["mode"] for s in samples} == {"desc"}


def test_image_extraction_refuses_a_path_as_file_name(tmp_path: Path) -> None:
    from test_longcap_arena import _write

    import pyarrow.parquet as pq

    from capeval.bench.longcap_arena import extract_images

    _write(tmp_path, n=2, shards=1)
    shard = next((tmp_path / "longcap-arena" / "data").glob("*.parquet"))
    table = pq.read_table(shard)
    table = table.set_column(0, "file_name", __import__("pyarrow").array(["ok.jpg", "../escape.jpg"]))
    pq.write_table(table, shard)
    with pytest.raises(CapevalError, match=r"\(row 1\): file_name must be a plain file name") as e:
        extract_images(tmp_path)
    assert "\n" not in str(e.value) and not (tmp_path / "longcap-arena" / "escape.jpg").exists()


def test_reproduce_runs_the_vela_cells_where_the_package_imports(package: Path, tmp_path: Path, monkeypatch) -> None:
    """``capeval reproduce vela``: without the package every cell is 'not run: weights'; with it (run
    from the clone, whose configs/config.yaml is the default), the cells whose test set and
    perspective are on disk run with that perspective, the others say which data is missing."""
    from test_longcap_arena import _write

    from capeval.bench import reproduce as rp

    _write(tmp_path / "data", n=8, shards=1)  # Test A, Descriptiveness only
    img = tmp_path / "images" / "longcap-arena" / "images"
    img.mkdir(parents=True)
    for k in range(8):
        PIL.new("RGB", (4, 4)).save(img / f"sa_0{k:05d}.jpg")
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p != str(package)])
    out = rp.reproduce(["vela"], None, tmp_path / "data", images=tmp_path / "images", bootstrap=0)
    assert len(out) == 12 and all(o.status.startswith("not run: weights") for o in out)
    monkeypatch.syspath_prepend(str(package))
    monkeypatch.chdir(package)
    out = rp.reproduce(["vela"], None, tmp_path / "data", images=tmp_path / "images", bootstrap=0)
    ran = [o for o in out if o.ours is not None]
    assert {(o.options, o.statistic) for o in ran} == {("split=test-a;perspective=desc", "kendall_tau_b"),
                                                        ("split=test-a;perspective=desc", "kendall_tau_c")}
    assert all(o.status in ("reproduced", "differs") and o.tolerance == 3.0 for o in ran)
    assert all(o.status.startswith("not run: data") for o in out if o.ours is None)
    import vela

    assert {s["mode"] for c in vela.CALLS if c[0] == "collate" for s in c[1]} == {"desc"}
