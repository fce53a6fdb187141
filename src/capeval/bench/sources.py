"""Where each registered benchmark's files come from (``capeval download <benchmark>``).

Plain data: one :class:`DataSource` per benchmark, its files with the URLs of the public
release (the authors' or the dataset's pinned hub revision), where each file goes under the
data root (the layout the loader reads) and the sha256 it must have. The digests of the
files the loaders read are the loaders' own (``Benchmark.files``): one record, checked at
download time and again at load time. An archive has no digest here when we only know its
members' (our reference copy was unpacked); its members are checked one by one.

:data:`METRIC_SOURCES` lists the same for the annotation data some metrics read (AMBER's
``data/`` folder): ``capeval download amber`` lays it out under the data root, where the
metric finds it without an option.

Files behind a licence form or without a stable direct URL have no URL: ``manual`` says
where to get them and where to put them, and ``capeval download`` checks what was put there.
With ``CAPEVAL_DATA_MIRROR=URL`` every file, these included, is fetched from
``URL/<benchmark>/<name>`` instead.
"""

from __future__ import annotations

from dataclasses import dataclass

from capeval.bench import longcap_arena as lca
from capeval.bench.detailcaps import DETAILCAPS_REVISION
from capeval.bench.polaris import NEBULA_REVISION, POLARIS_REVISION
from capeval.metrics.amber.annotations import COMMIT as AMBER_COMMIT, RELEASE as AMBER_RELEASE
from capeval.metrics.autodq import dream1k
from capeval.metrics.vdcscore import qa as vdc


@dataclass(frozen=True)
class DataFile:
    """One file of a release: ``name`` at its source (and in a mirror), where it goes."""

    name: str
    urls: tuple[str, ...] = ()  # the release first, copies after; () = by hand (``manual``)
    place: str = ""  # path under the data root (a plain file)
    members: tuple[tuple[str, str], ...] = ()  # archive: (member file name, path under the data root)
    sha256: str | None = None  # of the file as downloaded, where known
    size: str = ""
    manual: str = ""
    optional: bool = False  # not needed by the default protocol

    @property
    def places(self) -> tuple[str, ...]:
        return tuple(p for _, p in self.members) if self.members else (self.place,)


@dataclass(frozen=True)
class DataSource:
    """A benchmark's release: its files, where they come from and under which terms."""

    benchmark: str
    files: tuple[DataFile, ...]
    source: str
    licence: str
    note: str = ""
    # Hugging Face dataset (repo, revision, file patterns) whose matching files are listed at download time
    hub: tuple[str, str, tuple[str, ...]] | None = None
    images: str = ""  # how to get the images where a licence form stands in front of them
    default_files: str = "data/test-*.parquet"  # a hub dataset's files the default protocol reads (glob)
    unpack: str = ""  # "module:function(root) -> note" run after the download (images embedded in the files)


_F8K_ZIP = "Flickr8k_text.zip"
_F8K_URLS = (
    "http://nlp.cs.illinois.edu/HockenmaierGroup/Framing_Image_Description/Flickr8k_text.zip",  # UIUC, the authors
    "https://github.com/jbrownlee/Datasets/releases/download/Flickr8k/Flickr8k_text.zip",  # byte-identical copy
)
_F8K_MEMBERS = tuple((n, f"flickr8k/{n}") for n in (
    "ExpertAnnotations.txt", "CrowdFlowerAnnotations.txt", "Flickr8k.token.txt", "Flickr_8k.testImages.txt"))
_F8K_NOTE = ("our reference copy is the zip's four text files, unpacked: the zip itself has no digest here, each "
             "member is checked against the loader's sha256")
_F8K_IMAGES = ("the Flickr8k images stand behind the authors' licence form: request Flickr8k_Dataset.zip at "
               "https://forms.illinois.edu/sec/1713398 (UIUC), unpack it so that the images are "
               "{root}/flickr8k/Flicker8k_Dataset/<name>.jpg, pass --images {root}/flickr8k to bench, and run "
               "`capeval download {bench}` again: it checks them against the MD5 list of the CLIPScore authors")
_F8K_LICENCE = "research use, UIUC terms (Hodosh et al. 2013); images: Flickr terms of use"
_ALOHA = "7da6b90ebe392228ea532a84d78eab830c2b3cb2"  # DavidMChan/aloha: HAT and nocaps-FOIL
_COCO_ZIP = DataFile(
    "annotations_trainval2014.zip", ("http://images.cocodataset.org/annotations/annotations_trainval2014.zip",),
    members=(("captions_val2014.json", "coco/captions_val2014.json"),), size="241 MB (zip)")
_EMSCORE = ("the EMScore authors' release (github.com/ShiYaya/emscore, README: the {what} data links); no direct "
            "stable URL: put the files at {{root}}/{bench}/")

SOURCES: dict[str, DataSource] = {s.benchmark: s for s in (
    DataSource("flickr8k-expert", (DataFile(_F8K_ZIP, _F8K_URLS, members=_F8K_MEMBERS, size="2.2 MB (zip)"),),
               "Hodosh et al. 2013, UIUC release Flickr8k_text.zip", _F8K_LICENCE, _F8K_NOTE, images=_F8K_IMAGES),
    DataSource("flickr8k-cf", (DataFile(_F8K_ZIP, _F8K_URLS, members=_F8K_MEMBERS, size="2.2 MB (zip)"),),
               "Hodosh et al. 2013, UIUC release Flickr8k_text.zip", _F8K_LICENCE, _F8K_NOTE, images=_F8K_IMAGES),
    DataSource("pascal-50s", (
        DataFile("pascal_50s.json", ("https://raw.githubusercontent.com/Yebin46/FLEUR/"
                                     "33a892bb15682de01b6e9aa7f53dea979a8f0635/annotations/pascal_50s.json",),
                 place="pascal50s/pascal_50s.json", size="1.7 MB"),
        DataFile("pascal50S.mat", ("https://raw.githubusercontent.com/vrama91/cider-matlab/"
                                   "febe63b05723c1fdb4cb47d646a9ca90f33e8c59/data/pascal50S.mat",),
                 place="pascal50s/pascal50S.mat", size="1.1 MB")),
        "pairs: the FLEUR repository (annotations/pascal_50s.json); references: Vedantam et al.'s "
        "pascal50S.mat (cider-matlab repository)", "research use (Vedantam et al. 2015; FLEUR repository)"),
    DataSource("thumb", tuple(
        DataFile(n, (f"https://raw.githubusercontent.com/jungokasai/THumB/95195a22d37420c4b421ab95bdbe24458592caac/"
                     f"mscoco/{n}",), place=f"thumb/{n}", size=size)
        for n, size in (("mscoco_THumB-1.0.jsonl", "0.6 MB"), ("mscoco_references.json", "0.1 MB"))),
        "Kasai et al. 2022, github.com/jungokasai/THumB (mscoco/)", "the THumB repository's terms; COCO captions CC BY 4.0"),
    DataSource("composite", (
        DataFile(_F8K_ZIP, _F8K_URLS, members=(("Flickr8k.token.txt", "flickr8k/Flickr8k.token.txt"),),
                 size="2.2 MB (zip)"),
        _COCO_ZIP,
        *(DataFile(n, place=f"composite/{n}", manual=(
            "the Composite release of Aditya et al. (AMT ratings, linked from "
            "https://imagesdg.wordpress.com/image-to-scene-description-graph/): put it at {root}/composite/" + n))
          for n in ("8k_correctness.csv", "30k_correctness.csv", "coco_correctness.csv")),
        DataFile("results_20130124.token", place="composite/results_20130124.token", manual=(
            "the Flickr30k captions (Young et al. 2014) stand behind a licence form: request them at "
            "https://shannon.cs.illinois.edu/DenotationGraph/ and put results_20130124.token at "
            "{root}/composite/results_20130124.token"))),
        "Aditya et al. 2015 (ratings); Flickr8k, Flickr30k and COCO captions (references)",
        "research use (Composite, Flickr8k, Flickr30k terms); COCO captions CC BY 4.0"),
    DataSource("foil", (
        DataFile("foilv1.0_test_2017.json", place="foil/foilv1.0_test_2017.json", manual=(
            "the FOIL-COCO test file of Shekhar et al. 2017 (https://foilunitn.github.io/, 'Download'): put "
            "foilv1.0_test_2017.json at {root}/foil/")),
        _COCO_ZIP),
        "Shekhar et al. 2017 (FOIL site); COCO 2014 captions (cocodataset.org)", "FOIL: research use; COCO captions CC BY 4.0"),
    DataSource("vatex-eval", tuple(
        DataFile(n, place=f"vatex-eval/{n}", manual=_EMSCORE.format(what="VATEX-EVAL", bench="vatex-eval") + n)
        for n in ("candidates_list.pkl", "gts_list.pkl", "human_scores.pkl", "video_ids.pkl",
                  "vatex_train_en_annotations.json")),
        "Shi et al. 2022 (EMScore repository's data links)", "research use (EMScore release; VATEX CC BY 4.0)"),
    DataSource("activitynet-foil", tuple(
        DataFile(n, place=f"activitynet-foil/{n}", manual=_EMSCORE.format(what="ActivityNet-FOIL",
                                                                         bench="activitynet-foil") + n)
        for n in ("final_right_video_sentences.json", "final_foil_video_sentences.json", "anet_entities_test_1.json",
                  "anet_entities_test_2.json", "train.json")),
        "Shi et al. 2022 (EMScore repository's data links); ActivityNet Captions / Entities",
        "research use (EMScore release; ActivityNet Captions terms)"),
    DataSource("polaris", tuple(
        DataFile(n, (f"https://huggingface.co/datasets/yuwd/Polaris/resolve/{POLARIS_REVISION}/{n}",),
                 place=f"polaris/{n}", size=size, optional=n != "polaris_test.csv")
        for n, size in (("polaris_test.csv", ""), ("polaris_val.csv", ""))),
        f"huggingface.co/datasets/yuwd/Polaris at {POLARIS_REVISION[:12]}", "the dataset card's terms",
        note="images (images.tar.gz in the same revision, several GB) are not fetched: text metrics need none"),
    DataSource("nebula", (), f"huggingface.co/datasets/Ka2ukiMatsuda/Nebula at {NEBULA_REVISION[:12]}",
               "the dataset card's terms", note="Parquet shards (images embedded) of the test and valid splits, named by the hub listing",
               hub=("Ka2ukiMatsuda/Nebula", NEBULA_REVISION, ("data/test-", "data/valid-"))),
    DataSource("detailcaps", (
        DataFile("DetailCaps-4870.parquet", ("https://huggingface.co/datasets/foundation-multimodal-models/"
                                             f"DetailCaps-4870/resolve/{DETAILCAPS_REVISION}/DetailCaps-4870.parquet",),
                 place="detailcaps/DetailCaps-4870.parquet", size="971 MB"),
        DataFile("DetailCaps-100.parquet", place="detailcaps/DetailCaps-100.parquet", optional=True, manual=(
            "DetailCaps-100 (the 100 images with human-expert judgments) is not published: a copy from the CAPTURE "
            "authors (github.com/foundation-multimodal-models/CAPTURE), in the DetailCaps-4870 layout, goes at "
            "{root}/detailcaps/DetailCaps-100.parquet"))),
        f"huggingface.co/datasets/foundation-multimodal-models/DetailCaps-4870 at {DETAILCAPS_REVISION[:12]}",
        "CC BY-NC-SA 4.0 (the dataset card)",
        note="one Parquet file with the images embedded (column binary); the loader reads the text columns only"),
    DataSource("caparena", (
        DataFile("caparena_annots_eval.json", place="caparena/caparena_annots_eval.json", manual=(
            "the CapArena human pair-wise battle annotation (README of github.com/njucckevin/CapArena, "
            "'Reproduce Paper Results'): the box.nju.edu.cn share https://box.nju.edu.cn/f/0fd0a0d3dce243ab8c12/ "
            "has no stable direct URL; put caparena_annots_eval.json at {root}/caparena/caparena_annots_eval.json")),),
        "Cheng et al. 2025, github.com/njucckevin/CapArena (data/eval)", "the CapArena repository's terms",
        note="images (data/eval/images) are not fetched: text metrics need none"),
    DataSource("longcap-arena", (), f"huggingface.co/datasets/{lca.REPO} ({lca.REVISION}: no commit pinned)",
               "BSD-3-Clause-Clear (the dataset card); images: SA-1B terms",
               note="Parquet shards (images embedded) of Test A (dci_val) and Test B (dci_test), the three perspectives "
                    "each, named by the hub listing; no sha256 published",
               hub=(lca.REPO, lca.REVISION, tuple(lca.shard_prefix(s, p) for s in lca.SPLITS for p in lca.PERSPECTIVES)),
               default_files=lca.shard_prefix("test-a", "desc") + "*.parquet",
               unpack="capeval.bench.longcap_arena:extract_images"),
    *(DataSource(bench, (DataFile(name, (f"https://raw.githubusercontent.com/DavidMChan/aloha/{_ALOHA}/data/{name}",),
                                   place=f"{bench}/{name}", size=size),),
                 f"Petryk*, Chan* et al. 2024, github.com/DavidMChan/aloha (data/{name})",
                 f"the ALOHa repository's terms; {captions}", note=f"images ({images}) are not fetched: text metrics need none")
      for bench, name, size, captions, images in (
          ("hat", "hat-trainval.json", "0.5 MB", "COCO captions CC BY 4.0", "COCO val2014"),
          ("nocaps-foil", "nocaps-val-foil.json", "2.5 MB", "nocaps annotations: the nocaps terms",
           "nocaps val, Open Images"))),
)}

#: annotation data read by metrics (not benchmarks of ``capeval bench``), by metric family
METRIC_SOURCES: dict[str, DataSource] = {s.benchmark: s for s in (
    DataSource("amber", tuple(
        DataFile(n, (f"https://raw.githubusercontent.com/junyangwang0410/AMBER/{AMBER_COMMIT}/data/{n}",),
                 place=f"amber/{n}", sha256=AMBER_RELEASE[n], size=size)
        for n, size in (("annotations.json", "1.8 MB"), ("relation.json", "13 kB"), ("safe_words.txt", "57 B"))),
        f"Wang et al. 2023, github.com/junyangwang0410/AMBER at {AMBER_COMMIT[:7]} (data/)",
        "Apache License 2.0 (the repository's LICENSE)",
        note="the images (AMBER.zip, a Google Drive link in the README) are not fetched: the metrics read the "
             "responses and the annotations only"),
    DataSource("vdc", tuple(
        DataFile(f"{d}.jsonl", (vdc.URL.format(commit=vdc.COMMIT, dimension=d),), place=f"vdc/{d}.jsonl",
                 sha256=vdc.RELEASE[d], size=vdc.SIZES[d]) for d in vdc.DIMENSIONS),
        f"Chai et al. 2025 (AuroraCap), github.com/rese1f/aurora at {vdc.COMMIT[:7]} (post_eval/<dimension>.jsonl)",
        "the rese1f/aurora repository's terms (Apache License 2.0)",
        note="VDC's ground-truth questions per dimension for vdcscore (-O vdcscore.dimension=camera); the videos "
             "are not fetched: the metric reads the captions only"),
    DataSource("dream-1k", (DataFile("DREAM-1k.jsonl", (dream1k.URL,), place="dream-1k/DREAM-1k.jsonl",
                                     sha256=dream1k.RELEASE, size="1.1 MB"),),
               f"Wang et al. 2024 (Tarsier), github.com/bytedance/tarsier at {dream1k.COMMIT[:7]} ({dream1k.FILE})",
               "Apache License 2.0 (the repository's LICENSE)",
               note="DREAM-1K's descriptions and events for autodq (-O autodq.annotations=<data root>/dream-1k/"
                    "DREAM-1k.jsonl); the videos (Hugging Face omni-research/DREAM-1K) are not fetched"),
)}
