"""``capeval convert expert``: the EXPERT release (a LoRA in LLaVA's own format over LLaVA-1.5-13B)
merged and written as a llava-hf folder that ``LlavaForConditionalGeneration`` loads and vLLM serves.

Inputs (folders; downloaded from the hub when not given): the LLaVA-native base
``liuhaotian/llava-v1.5-13b`` (``LlavaLlamaForCausalLM`` shards, config with ``mm_*`` keys,
tokenizer), the LoRA ``hjkim811/EXPERT-llava-13b-lora`` and the vision tower
``openai/clip-vit-large-patch14-336``. The merge and the names: :mod:`capeval.models.llava_lora`.

The rest follows transformers' ``convert_llava_weights_to_hf.py``: tokenizer + ``<image>``
(special, not normalised) + pad token ``<pad>``; vocabulary resized to the next multiple of 64
(32000 -> 32064 for LLaVA-1.5), the new rows of ``embed_tokens`` and ``lm_head`` the mean of the
original ``embed_tokens`` rows (the script samples them from a normal distribution around that
mean with covariance 1e-5 x theirs; here its centre, so the output is deterministic); the image
processor of the CLIP folder; ``LlavaConfig(text_config, vision_config)`` with ``image_token_index``
and ``pad_token_id`` the ids of the added tokens. From the LLaVA config (the LoRA folder's
``config.json``, which LLaVA's builder instantiates, else the base's): ``vision_feature_layer =
mm_vision_select_layer``, strategy ``default`` for ``mm_vision_select_feature='patch'``, projector
``mlp2x_gelu`` (others are refused). Weights in float16, as LLaVA's builder loads and merges them.
The processor carries a chat template rendering LLaVA's ``llava_v1`` conversation (system prompt,
``USER: <image>\\n...``, ``ASSISTANT:``), so an OpenAI-compatible server prompts as the official code.

Streaming: one base shard in memory at a time, written as one safetensors shard; the LoRA and
the projector are small. The folder is built under a temporary name next to the target and
renamed when complete; ``capeval_conversion.json`` records the sha256 of every input and output
file, the LoRA's scaling and what was taken from where.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from capeval.errors import InputError, ResourceError
from capeval.models import llava_lora as ll

#: the published checkpoints (hub ids; revision None = the hub's main branch at download time,
#: whose commit is recorded in the manifest)
EXPERT_LORA = "hjkim811/EXPERT-llava-13b-lora"
EXPERT_BASE = "liuhaotian/llava-v1.5-13b"
EXPERT_VISION = "openai/clip-vit-large-patch14-336"
REVISIONS: dict[str, str | None] = {EXPERT_LORA: None, EXPERT_BASE: None, EXPERT_VISION: None}
MANIFEST = "capeval_conversion.json"
PAD_SHAPE = 64  # the conversion script's pad_shape
DTYPE = "float16"
_TEXT_SKIP = ("mm_", "image_aspect_ratio", "tune_mm", "freeze_mm", "tokenizer_", "use_mm_proj", "unfreeze_mm",
              "architectures", "model_type", "_name_or_path", "transformers_version", "torch_dtype", "dtype")


def chat_template() -> str:
    """A Jinja chat template that renders LLaVA's ``llava_v1`` conversation (the string
    :func:`capeval.judges.templates.llava_v1_turns` builds, with the BOS in front)."""
    from capeval.metrics.visce2 import prompts

    conv = prompts.conversation()
    user, assistant = conv["roles"]
    sep, sep2 = conv["sep"], conv["sep2"]
    q = json.dumps  # Jinja string literals: JSON's escaping is valid there
    return (
        "{%- set system = " + q(conv["system"]) + " -%}"
        "{%- if messages and messages[0]['role'] == 'system' -%}"
        "{%- set system = messages[0]['content'] if messages[0]['content'] is string else "
        "messages[0]['content'] | selectattr('type', 'equalto', 'text') | map(attribute='text') | join('') -%}"
        "{%- set messages = messages[1:] -%}{%- endif -%}"
        "{{- bos_token + system + " + q(sep) + " -}}"
        "{%- for m in messages -%}"
        "{%- if m['content'] is string -%}{%- set text = m['content'] -%}{%- set n = 0 -%}{%- else -%}"
        "{%- set text = m['content'] | selectattr('type', 'equalto', 'text') | map(attribute='text') | join('') -%}"
        "{%- set n = m['content'] | rejectattr('type', 'equalto', 'text') | list | length -%}{%- endif -%}"
        "{%- if m['role'] == 'assistant' -%}{{- " + q(assistant + ": ") + " + text + " + q(sep2) + " -}}"
        "{%- else -%}{{- " + q(user + ": ") + " + " + q(conv["image_prefix"]) + " * n + text + " + q(sep) + " -}}"
        "{%- endif -%}{%- endfor -%}"
        "{%- if add_generation_prompt -%}{{- " + q(assistant + ":") + " -}}{%- endif -%}"
    )


def _hub_folder(repo: str, what: str) -> Path:
    """``repo`` downloaded with huggingface_hub (its cache), or a one-line ResourceError."""
    from capeval._optional import require

    require("huggingface_hub", purpose=f"capeval convert expert (downloading {repo}; or pass --{what} FOLDER)")
    from huggingface_hub import snapshot_download

    try:
        # transformers' weights only: the CLIP repository also holds TensorFlow and Flax copies
        return Path(snapshot_download(repo, revision=REVISIONS.get(repo),
                                      ignore_patterns=["*.h5", "*.msgpack", "*.onnx", "*.ot", "*.tflite", "*.ckpt"]))
    except Exception as exc:  # network and hub errors come in many types
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise ResourceError(f"could not download {repo} ({type(exc).__name__}: {first[:160]}); "
                            f"download it yourself and pass --{what} FOLDER") from None


def _native_config(base: Path, lora: Path) -> tuple[dict[str, Any], Path]:
    """The LLaVA config the builder instantiates: the LoRA folder's ``config.json``, else the base's."""
    for folder in (lora, base):
        if (folder / "config.json").is_file():
            return ll.read_json(folder / "config.json", "LLaVA config"), folder / "config.json"
    raise ResourceError(f"base checkpoint: missing file {base / 'config.json'}")


def _check_native(cfg: dict[str, Any], where: Path) -> None:
    checks = (("mm_projector_type", ("mlp2x_gelu",)), ("mm_vision_select_feature", ("patch", None)),
              ("mm_use_im_start_end", (False, None)), ("mm_patch_merge_type", ("flat", None)))
    for key, allowed in checks:
        if cfg.get(key) not in allowed:
            raise ResourceError(f"{where}: {key}={cfg.get(key)!r} is not LLaVA-1.5's ({allowed[0]!r}); "
                                "the llava-hf layout holds LLaVA-1.5 checkpoints only")


def _tokenizer(base: Path) -> Any:
    from transformers import AddedToken, AutoTokenizer

    if not any((base / n).is_file() for n in ("tokenizer.model", "tokenizer.json")):
        raise ResourceError(f"base checkpoint: missing file {base / 'tokenizer.model'}")
    tok = AutoTokenizer.from_pretrained(str(base))
    tok.add_tokens(AddedToken("<image>", special=True, normalized=False), special_tokens=True)
    tok.add_special_tokens({"pad_token": "<pad>"})
    return tok


def _config(native: dict[str, Any], vision: Path, tok: Any, vocab: int) -> Any:
    import transformers as tf

    text = {k: v for k, v in native.items() if not k.startswith(_TEXT_SKIP)}
    text["vocab_size"] = vocab
    text_config = tf.LlamaConfig(**text)
    ll.read_json(vision / "config.json", "vision tower")  # the one-line error when it is missing
    vision_cfg = tf.AutoConfig.from_pretrained(str(vision))
    vision_config = getattr(vision_cfg, "vision_config", vision_cfg)
    layer = native.get("mm_vision_select_layer", -2)
    config = tf.LlavaConfig(text_config=text_config, vision_config=vision_config,
                            image_token_index=tok.convert_tokens_to_ids("<image>"),
                            vision_feature_layer=layer, vision_feature_select_strategy="default",
                            projector_hidden_act="gelu",
                            image_seq_length=(vision_config.image_size // vision_config.patch_size) ** 2)
    config.pad_token_id = tok.pad_token_id
    config.torch_dtype = DTYPE
    return config


def _embed_mean(base: Path) -> Any:
    """Row mean (float64) of the base's ``model.embed_tokens.weight`` (the script's ``mu``)."""
    for _shard, sd in ll.iter_base(base):
        if "model.embed_tokens.weight" in sd:
            return sd["model.embed_tokens.weight"].double().mean(dim=0)
    raise ResourceError(f"base checkpoint: no model.embed_tokens.weight in {base}")


def _files(folder: Path) -> dict[str, dict[str, Any]]:
    return {p.name: {"sha256": ll.sha256(p), "bytes": p.stat().st_size} for p in ll.folder_files(folder)}


def convert(base: str | os.PathLike[str] | None, lora: str | os.PathLike[str] | None,
            vision: str | os.PathLike[str] | None, out: str | os.PathLike[str], force: bool = False,
            log: Any = None) -> dict[str, Any]:
    """Write the merged llava-hf folder ``out`` (see the module docstring); returns the manifest."""
    from capeval._optional import require

    for mod in ("torch", "transformers", "safetensors"):
        require(mod, purpose="capeval convert expert")
    out = Path(out)
    if out.exists() and not force:
        raise InputError(f"{out} exists (use --force to replace it)")
    say = log or (lambda msg: None)
    sources = {}
    folders = {}
    for what, given, repo in (("base", base, EXPERT_BASE), ("lora", lora, EXPERT_LORA), ("vision", vision, EXPERT_VISION)):
        path = Path(given) if given is not None else _hub_folder(repo, what)
        if not path.is_dir():
            raise ResourceError(f"{what}: missing folder {path}")
        folders[what] = path
        sources[what] = {"hub": repo, "revision": REVISIONS[repo], "path": str(path), "given": given is not None}
        if given is None:  # huggingface_hub's cache: .../snapshots/<commit>
            sources[what]["commit"] = path.name
    base_p, lora_p, vision_p = folders["base"], folders["lora"], folders["vision"]
    lo = ll.Lora(lora_p)
    native, native_from = _native_config(base_p, lora_p)
    _check_native(native, native_from)
    ll.base_shards(base_p)  # one-line error for a missing shard before any work
    ll.read_json(vision_p / "preprocessor_config.json", "vision tower")
    tok = _tokenizer(base_p)
    vocab = -(-len(tok) // PAD_SHAPE) * PAD_SHAPE
    config = _config(native, vision_p, tok, vocab)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".part", dir=out.parent))
    try:
        report = _write(tmp, base_p, lo, vision_p, config, tok, vocab, say)
        manifest = {"format": "capeval llava-hf conversion 1", "judge": "expert", "dtype": DTYPE,
                    "sources": sources, "native_config": str(native_from), "lora": {
                        "r": lo.config.get("r"), "lora_alpha": lo.config.get("lora_alpha"),
                        "use_rslora": bool(lo.config.get("use_rslora")), "scaling": lo.scaling,
                        "merged_weights": report["merged"]},
                    "vocab": {"tokenizer": len(tok), "native": report["native_vocab"], "padded": vocab,
                              "new_rows": "mean of the original embed_tokens rows"},
                    "rules": {"merge": "(W in float32 + scaling * (B @ A) in float32).to(float16), as peft "
                                       "merge_and_unload with its default settings (LLaVA "
                                       "scripts/merge_lora_weights.py)",
                              "names": "transformers convert_llava_weights_to_hf.py KEYS_TO_MODIFY_MAPPING",
                              "vision_tower": "the CLIP folder's vision_model.* (LLaVA loads mm_vision_tower)"},
                    "ignored": report["ignored"], "inputs": {}, "outputs": {}}
        say("hashing the inputs (sha256)")
        for what, path in folders.items():
            manifest["inputs"][what] = _files(path)
        manifest["outputs"] = _files(tmp)
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
        if out.exists():
            shutil.rmtree(out)
        os.replace(tmp, out)
        return manifest
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _write(tmp: Path, base: Path, lo: Any, vision: Path, config: Any, tok: Any, vocab: int,
           say: Any) -> dict[str, Any]:
    """The weights (shard by shard), config, tokenizer and processor into ``tmp``."""
    import torch
    from safetensors.torch import save_file
    from transformers import AutoImageProcessor, LlavaProcessor

    dtype = getattr(torch, DTYPE)
    mu = _embed_mean(base)
    extra = lo.trainables()
    pairs = dict(lo.pairs)
    shards = ll.base_shards(base)
    n = len(shards) + 1
    weight_map: dict[str, str] = {}
    total, merged, native_vocab = 0, 0, None
    ignored: list[str] = []

    def flush(tensors: dict[str, Any], k: int) -> None:
        nonlocal total
        name = f"model-{k:05d}-of-{n:05d}.safetensors"
        save_file(tensors, str(tmp / name), metadata={"format": "pt"})
        for key, t in tensors.items():
            weight_map[key] = name
            total += t.numel() * t.element_size()

    for k, (shard, sd) in enumerate(ll.iter_base(base), start=1):
        say(f"shard {k}/{len(shards)}: {shard.name}")
        tensors: dict[str, Any] = {}
        for key in list(sd):
            value = sd.pop(key)
            if key.endswith(".inv_freq"):
                continue
            if key.startswith("model.vision_tower."):
                ignored.append(f"{key} (base; the vision tower comes from the CLIP folder)")
                continue
            if key in extra:  # non_lora_trainables over the base, as the builder's load_state_dict
                value = extra.pop(key)
            value = value.to(dtype)
            if key in pairs:
                value = ll.merge(value, pairs.pop(key), lo.scaling)
                merged += 1
            if key in ("model.embed_tokens.weight", "lm_head.weight"):
                native_vocab = value.shape[0]
                if native_vocab > vocab:
                    raise ResourceError(f"base checkpoint: {key} has {native_vocab} rows, more than the "
                                        f"tokenizer's {vocab}")
                value = torch.cat([value, mu.to(dtype).expand(vocab - native_vocab, -1)])
            tensors[ll.hf_name(key)] = value.contiguous()
        flush(tensors, k)
        del tensors, sd
    if pairs:
        raise ResourceError(f"LoRA: {next(iter(pairs))} is not a weight of the base checkpoint")
    tail: dict[str, Any] = {}
    for key, value in ll.vision_state(vision).items():
        if not value.is_floating_point():  # buffers such as position_ids, not weights of the llava-hf model
            ignored.append(f"{key} (CLIP folder; an integer buffer, not a weight)")
            continue
        tail[ll.hf_name("model.vision_tower.vision_tower." + key)] = value.to(dtype).contiguous()
    for key in list(extra):
        if key.startswith("model.mm_projector."):
            tail[ll.hf_name(key)] = extra.pop(key).to(dtype).contiguous()
    ignored += [f"{key} (non_lora_trainables; no such parameter, LLaVA's strict=False load skips it)"
                for key in extra]
    flush(tail, n)
    need = [f"multi_modal_projector.linear_{i}.{p}" for i in (1, 2) for p in ("weight", "bias")]
    missing = [key for key in need + ["language_model.lm_head.weight", "language_model.model.embed_tokens.weight"]
               if key not in weight_map]
    if missing:
        raise ResourceError(f"no {missing[0]} in the base checkpoint or the LoRA's non_lora_trainables.bin")
    index = {"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))}
    (tmp / "model.safetensors.index.json").write_text(json.dumps(index, indent=2) + "\n", encoding="utf-8")
    config.save_pretrained(str(tmp))
    gen = {"bos_token_id": tok.bos_token_id, "eos_token_id": tok.eos_token_id, "pad_token_id": tok.pad_token_id}
    (tmp / "generation_config.json").write_text(json.dumps(gen, indent=2) + "\n", encoding="utf-8")
    image_processor = AutoImageProcessor.from_pretrained(str(vision))
    processor = LlavaProcessor(image_processor=image_processor, tokenizer=tok,
                               patch_size=config.vision_config.patch_size, vision_feature_select_strategy="default",
                               num_additional_image_tokens=1, chat_template=chat_template())
    processor.save_pretrained(str(tmp))
    return {"merged": merged, "native_vocab": native_vocab, "ignored": ignored}
