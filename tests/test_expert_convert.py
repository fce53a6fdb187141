"""``capeval convert expert`` on a tiny LLaVA-native checkpoint + a tiny peft LoRA built here.

Independent references: peft's own ``merge_and_unload`` with its default settings for the merged
language weights (bit for bit, on grid-valued and on random float16 LoRA weights), and LLaVA-1.5's forward pass written out with separate transformers modules (CLIP vision
tower -> hidden_states[-2] without CLS -> Linear-GELU-Linear -> spliced between the text
embeddings -> Llama), compared in float64 with the converted ``LlavaForConditionalGeneration``.
"""

from __future__ import annotations

import json
import string

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("peft")
pytest.importorskip("safetensors")

import torch  # noqa: E402

from capeval.errors import InputError, ResourceError  # noqa: E402

HIDDEN, VISION_HIDDEN = 32, 16
TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def _tokenizer():
    from tokenizers import Tokenizer, decoders, models, processors
    from transformers import PreTrainedTokenizerFast

    specials = ["<unk>", "<s>", "</s>"]  # Llama's; the converter adds <image> and <pad>
    vocab = {tok: i for i, tok in enumerate(specials + sorted(set(string.printable)))}
    tk = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="<unk>"))
    tk.decoder = decoders.Fuse()
    tk.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 1)])
    return PreTrainedTokenizerFast(tokenizer_object=tk, bos_token="<s>", eos_token="</s>", unk_token="<unk>")


def _grid(shape, gen, scale=2.0 ** -6):
    """Small integers times a power of two: LoRA products are exact in float32 on any CPU."""
    return torch.randint(-4, 5, shape, generator=gen).to(torch.float32) * scale


@pytest.fixture(scope="module")
def native(tmp_path_factory):
    """Folders ``base`` (LLaVA-native, 2 .bin shards), ``lora`` (peft + non_lora_trainables) and ``clip``."""
    import transformers as tf
    from peft import LoraConfig, get_peft_model

    root = tmp_path_factory.mktemp("native")
    base, lora, clip = root / "base", root / "lora", root / "clip"
    tok = _tokenizer()
    text = tf.LlamaConfig(vocab_size=len(tok), hidden_size=HIDDEN, intermediate_size=64, num_hidden_layers=2,
                          num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=256,
                          bos_token_id=1, eos_token_id=2, initializer_range=0.3)
    torch.manual_seed(0)
    llama = tf.LlamaForCausalLM(text).to(torch.float16)
    gen = torch.Generator().manual_seed(1)
    sd = {k: v.clone() for k, v in llama.state_dict().items()}
    sd["model.layers.0.self_attn.rotary_emb.inv_freq"] = torch.ones(8)  # old checkpoints carry it
    base_proj = {"model.mm_projector.0.weight": torch.randn(HIDDEN, VISION_HIDDEN, generator=gen),
                 "model.mm_projector.0.bias": torch.randn(HIDDEN, generator=gen),
                 "model.mm_projector.2.weight": torch.randn(HIDDEN, HIDDEN, generator=gen),
                 "model.mm_projector.2.bias": torch.randn(HIDDEN, generator=gen)}
    sd.update({k: v.half() for k, v in base_proj.items()})
    sd["model.vision_tower.vision_tower.vision_model.post_layernorm.weight"] = torch.full((VISION_HIDDEN,), 7.0).half()
    keys = sorted(sd)
    half = len(keys) // 2
    base.mkdir()
    index = {"metadata": {}, "weight_map": {}}
    for k, part in enumerate((keys[:half], keys[half:]), start=1):
        name = f"pytorch_model-0000{k}-of-00002.bin"
        torch.save({key: sd[key] for key in part}, base / name)
        index["weight_map"].update({key: name for key in part})
    (base / "pytorch_model.bin.index.json").write_text(json.dumps(index))
    cfg = text.to_dict()
    cfg.update(architectures=["LlavaLlamaForCausalLM"], model_type="llava_llama", mm_hidden_size=VISION_HIDDEN,
               mm_projector_type="mlp2x_gelu", mm_vision_select_layer=-2, mm_vision_select_feature="patch",
               mm_vision_tower="openai/clip-vit-large-patch14-336", mm_use_im_start_end=False,
               mm_use_im_patch_token=False, mm_patch_merge_type="flat", image_aspect_ratio="pad",
               tune_mm_mlp_adapter=False, freeze_mm_mlp_adapter=False, use_mm_proj=True,
               tokenizer_model_max_length=2048, tokenizer_padding_side="right", torch_dtype="float16")
    (base / "config.json").write_text(json.dumps(cfg))
    tok.save_pretrained(str(base))

    # the LoRA, saved by peft itself (names base_model.model.model.layers.N....lora_{A,B}.weight)
    peft_model = get_peft_model(tf.LlamaForCausalLM(text), LoraConfig(r=4, lora_alpha=8, target_modules=TARGETS,
                                                                     lora_dropout=0.0, bias="none"))
    with torch.no_grad():
        for name, p in peft_model.named_parameters():
            if "lora_" in name:
                p.copy_(_grid(p.shape, gen))
    peft_model.save_pretrained(str(lora))
    lora_proj = {"base_model.model." + k: torch.randn(v.shape, generator=gen) for k, v in base_proj.items()}
    lora_proj["base_model.model.model.unused_extra.weight"] = torch.zeros(2)
    torch.save(lora_proj, lora / "non_lora_trainables.bin")
    (lora / "config.json").write_text(json.dumps(cfg))

    vision = tf.CLIPVisionConfig(hidden_size=VISION_HIDDEN, intermediate_size=32, num_hidden_layers=3,
                                 num_attention_heads=2, image_size=28, patch_size=14, projection_dim=16)
    clip_cfg = tf.CLIPConfig(text_config=dict(hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                                              num_attention_heads=2, vocab_size=64, projection_dim=16),
                             vision_config=vision.to_dict(), projection_dim=16)
    tf.CLIPModel(clip_cfg).save_pretrained(str(clip))
    # openai/clip-vit-large-patch14-336's weights file holds the int64 position_ids buffer too
    from safetensors.torch import load_file, save_file

    clip_sd = load_file(str(clip / "model.safetensors"))
    clip_sd["vision_model.embeddings.position_ids"] = torch.arange(5)[None]
    save_file(clip_sd, str(clip / "model.safetensors"), metadata={"format": "pt"})
    tf.CLIPImageProcessor(size={"shortest_edge": 28}, crop_size={"height": 28, "width": 28}).save_pretrained(str(clip))
    return {"base": base, "lora": lora, "clip": clip, "root": root, "llama_config": text}


@pytest.fixture(scope="module")
def converted(native):
    from capeval.models.expert_convert import convert

    out = native["root"] / "expert-hf"
    manifest = convert(native["base"], native["lora"], native["clip"], out)
    return out, manifest


def _peft_merged(native, lora=None, **peft_options):
    """The language model merged by peft's merge_and_unload (fp16 on the CPU, as LLaVA's script)."""
    import transformers as tf
    from peft import PeftModel

    sd = {}
    for f in sorted(native["base"].glob("pytorch_model-*.bin")):
        sd.update(torch.load(f, weights_only=True))
    llama = tf.LlamaForCausalLM(native["llama_config"]).to(torch.float16)
    llama.load_state_dict({k: v for k, v in sd.items() if k in llama.state_dict()}, strict=True)
    return PeftModel.from_pretrained(llama, str(lora or native["lora"]), **peft_options).merge_and_unload().state_dict()


def test_merged_weights_are_peft_merge_and_unload_bit_for_bit(native, converted):
    from safetensors.torch import load_file

    out, manifest = converted
    got = {}
    for f in sorted(out.glob("model-*.safetensors")):
        got.update(load_file(str(f)))
    ref = _peft_merged(native)
    n_layers = native["llama_config"].num_hidden_layers
    assert manifest["lora"]["merged_weights"] == n_layers * len(TARGETS) and manifest["lora"]["scaling"] == 8 / 4
    vocab = ref["model.embed_tokens.weight"].shape[0]
    for key, value in ref.items():
        name = "language_model." + key  # model.X and lm_head: the llava-hf names
        mine = got[name][:vocab] if key in ("model.embed_tokens.weight", "lm_head.weight") else got[name]
        assert mine.dtype == torch.float16 and torch.equal(mine, value), key
    assert got["language_model.model.embed_tokens.weight"].shape[0] % 64 == 0
    lora_proj = torch.load(native["lora"] / "non_lora_trainables.bin", weights_only=True)
    for i, j in ((0, 1), (2, 2)):  # the LoRA's projector, not the base's
        assert torch.equal(got[f"multi_modal_projector.linear_{j}.weight"],
                           lora_proj[f"base_model.model.model.mm_projector.{i}.weight"].half())
    assert got["vision_tower.vision_model.post_layernorm.weight"].float().ne(7.0).all()  # CLIP's, not the base's
    assert any("unused_extra" in s for s in manifest["ignored"])
    # the CLIP file's integer position_ids buffer is no weight: dropped, not written as float16
    assert not any(k.endswith("position_ids") for k in got)
    assert any(s.startswith("vision_model.embeddings.position_ids") for s in manifest["ignored"])
    assert set(manifest["inputs"]) == {"base", "lora", "vision"}
    assert all(len(f["sha256"]) == 64 for f in manifest["inputs"]["lora"].values())
    assert "model.safetensors.index.json" in manifest["outputs"]


def test_merge_of_random_lora_equals_peft_defaults(native):
    """A LoRA with random (non-grid) float16 weights, as released LoRAs are stored: the merged
    weights equal peft's merge_and_unload with its default settings bit for bit (peft upcasts the
    adapter to float32, adds in float32 and rounds once). peft with autocast_adapter_dtype=False
    rounds the float16 product first; that merge is within one float16 step of the result plus
    half a step of the product (the tolerance this test states and checks)."""
    import transformers as tf
    from peft import LoraConfig, get_peft_model
    from safetensors.torch import load_file

    from capeval.models.expert_convert import convert

    root = native["root"] / "random-lora"
    lora = root / "lora"
    gen = torch.Generator().manual_seed(5)
    peft_model = get_peft_model(tf.LlamaForCausalLM(native["llama_config"]),
                                LoraConfig(r=4, lora_alpha=8, target_modules=TARGETS, lora_dropout=0.0, bias="none"))
    with torch.no_grad():
        for name, p in peft_model.named_parameters():
            if "lora_" in name:
                p.copy_(torch.randn(p.shape, generator=gen) * 0.2)
    peft_model.half().save_pretrained(str(lora))
    for f in ("non_lora_trainables.bin", "config.json"):
        (lora / f).write_bytes((native["lora"] / f).read_bytes())
    out = root / "hf"
    convert(native["base"], lora, native["clip"], out)
    got = {}
    for f in sorted(out.glob("model-*.safetensors")):
        got.update(load_file(str(f)))
    ref = _peft_merged(native, lora)
    rounded_twice = _peft_merged(native, lora, autocast_adapter_dtype=False)
    base = {}
    for f in sorted(native["base"].glob("pytorch_model-*.bin")):
        base.update(torch.load(f, weights_only=True))

    def step(x):  # one float16 step (ulp) at |x|, subnormals included
        e = torch.floor(torch.log2(x.float().abs().clamp(min=2.0 ** -14)))
        return 2.0 ** (e - 10)

    n_diff = n_all = 0
    for key in (k for k in ref if k.endswith(".weight") and any(t in k for t in TARGETS)):
        assert torch.equal(got["language_model." + key], ref[key]), key
        twice, merged = rounded_twice[key].float(), ref[key].float()
        delta = merged - base[key].float()
        assert ((twice - merged).abs() <= step(merged) + step(delta) / 2).all(), key
        n_diff += int((twice != merged).sum())
        n_all += merged.numel()
    assert n_diff > 0  # the random weights do tell the two roundings apart (grid weights would not)
    print(f"\npeft autocast_adapter_dtype=False differs in {n_diff}/{n_all} merged elements ({n_diff / n_all:.1%})")


def test_converted_model_is_llava_forward_in_float64(native, converted):
    """Logits of the converted folder == LLaVA-1.5's forward written out with separate modules."""
    import numpy as np
    import transformers as tf
    from PIL import Image

    out, _ = converted
    model, info = tf.LlavaForConditionalGeneration.from_pretrained(str(out), dtype=torch.float64,
                                                                   output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"], info
    proc = tf.AutoProcessor.from_pretrained(str(out))
    tok = proc.tokenizer
    image_id = tok.convert_tokens_to_ids("<image>")
    assert model.config.image_token_index == image_id and tok.pad_token_id == model.config.pad_token_id

    rng = np.random.default_rng(3)
    image = Image.fromarray(rng.integers(0, 256, (28, 28, 3), dtype=np.uint8))
    pixels = proc.image_processor(images=image, return_tensors="pt")["pixel_values"].to(torch.float64)
    before = tok("USER: ").input_ids
    after = tok("\nEvaluate the caption. ASSISTANT:").input_ids[1:]
    ids = torch.tensor([before + [image_id] * 4 + after])
    with torch.no_grad():
        got = model(input_ids=ids, pixel_values=pixels).logits[0]

    # the reference: peft-merged Llama, the LoRA's projector, CLIP's vision tower (all cast to fp16 first)
    llama = tf.LlamaForCausalLM(native["llama_config"])
    llama.load_state_dict({k: v.double() for k, v in _peft_merged(native).items()}, strict=True)
    llama = llama.double().eval()
    vision = tf.CLIPVisionModel.from_pretrained(str(native["clip"])).half().double().eval()
    proj = {k.split("mm_projector.")[1]: v.half().double() for k, v in
            torch.load(native["lora"] / "non_lora_trainables.bin", weights_only=True).items() if "mm_projector" in k}
    with torch.no_grad():
        feats = vision(pixel_values=pixels, output_hidden_states=True).hidden_states[-2][:, 1:]
        feats = torch.nn.functional.gelu(feats @ proj["0.weight"].T + proj["0.bias"]) @ proj["2.weight"].T + proj["2.bias"]
        emb = llama.get_input_embeddings()
        embeds = torch.cat([emb(torch.tensor([before])), feats, emb(torch.tensor([after]))], dim=1)
        ref = llama(inputs_embeds=embeds).logits[0]
    n = ref.shape[-1]
    assert got.shape[0] == ref.shape[0]
    torch.testing.assert_close(got[:, :n], ref, rtol=1e-9, atol=1e-9)


def test_chat_template_is_llava_v1(converted):
    """vLLM prompts through the saved chat template: BOS + the official llava_v1 conversation."""
    import transformers as tf

    from capeval.judges.templates import llava_v1_turns

    out, _ = converted
    proc = tf.AutoProcessor.from_pretrained(str(out))
    first = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "Score it."}]}]
    before, after = llava_v1_turns("Score it.")
    assert proc.apply_chat_template(first, add_generation_prompt=True) == "<s>" + before + "<image>" + after
    two = first + [{"role": "assistant", "content": [{"type": "text", "text": "0.5</s>"}]},
                   {"role": "user", "content": [{"type": "text", "text": "Why?"}]}]
    before, after = llava_v1_turns("Why?", (("Score it.", "0.5</s>"),))
    assert proc.apply_chat_template(two, add_generation_prompt=True) == "<s>" + before + "<image>" + after


def test_expert_runs_on_the_converted_folder(native, converted, tmp_path):
    from PIL import Image

    from capeval.metrics.fleur import EXPERT

    out, _ = converted
    Image.new("RGB", (40, 20), (200, 10, 10)).save(tmp_path / "a.png")
    report = EXPERT(model=str(out), cache=None, max_new_tokens=4).score({"a": "a red box"}, images=tmp_path)
    result = report["expert"]
    assert set(result.extras["answers"]) == {"a"}


@pytest.mark.parametrize("remove, where", [
    ("lora/non_lora_trainables.bin", "non_lora_trainables.bin"),
    ("lora/adapter_config.json", "adapter_config.json"),
    ("lora/adapter_model.safetensors", "adapter_model.bin"),
    ("base/pytorch_model-00002-of-00002.bin", "pytorch_model-00002-of-00002.bin"),
    ("clip/preprocessor_config.json", "preprocessor_config.json"),
])
def test_missing_files_are_one_line_errors(native, tmp_path, capsys, remove, where):
    import shutil

    from capeval.models.expert_convert import convert

    for name in ("base", "lora", "clip"):
        shutil.copytree(native[name], tmp_path / name)
    (tmp_path / remove).unlink()
    with pytest.raises(ResourceError, match="missing file") as exc:
        convert(tmp_path / "base", tmp_path / "lora", tmp_path / "clip", tmp_path / "out")
    assert where in str(exc.value) and "\n" not in str(exc.value)
    assert not (tmp_path / "out").exists() and not list(tmp_path.glob(".out.*"))
    from capeval.cli.main import main

    code = main(["convert", "expert", "--base", str(tmp_path / "base"), "--lora", str(tmp_path / "lora"),
                 "--vision", str(tmp_path / "clip"), "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("capeval: error: ") and where in err and err.count("\n") == 1, err


def test_existing_output_is_not_replaced_without_force(native, converted):
    from capeval.models.expert_convert import convert

    out, _ = converted
    with pytest.raises(InputError, match="--force"):
        convert(native["base"], native["lora"], native["clip"], out)


def test_bin_adapter_and_manifest_hashes(native, converted, tmp_path):
    """LLaVA-era peft saved ``adapter_model.bin``: the same folder comes out; the manifest's sha256 are the files'."""
    import hashlib
    import shutil

    from safetensors.torch import load_file

    from capeval.models.expert_convert import MANIFEST, convert

    out, manifest = converted
    lora = tmp_path / "lora"
    shutil.copytree(native["lora"], lora)
    torch.save(load_file(str(lora / "adapter_model.safetensors")), lora / "adapter_model.bin")
    (lora / "adapter_model.safetensors").unlink()
    again = convert(native["base"], lora, native["clip"], tmp_path / "out")
    for name, entry in manifest["outputs"].items():
        if name.endswith(".safetensors"):
            assert again["outputs"][name]["sha256"] == entry["sha256"], name
        assert hashlib.sha256((out / name).read_bytes()).hexdigest() == entry["sha256"], name
    assert json.loads((out / MANIFEST).read_text())["inputs"]["lora"]["adapter_model.safetensors"]["sha256"] == \
        hashlib.sha256((native["lora"] / "adapter_model.safetensors").read_bytes()).hexdigest()
