"""Image captioners through transformers (BLIP, BLIP-2), with capeval's own preprocessing in PIL.

BRIDGE's template captions come from "the BLIP model ... the ViT-L version pre-trained on 129M
image-text pairs and finetuned on the COCO dataset" (Sarto et al. 2024, Sec. 4.1): on the
Hugging Face hub that is ``Salesforce/blip-image-captioning-large`` (the default here).

Preprocessing: transformers' ``BlipImageProcessor`` needs torchvision, which does not work
with capeval's torch, so the same steps run here in PIL/numpy. Its documented defaults
(transformers 5.x ``models/blip/image_processing_blip.py`` and the checkpoint's
``preprocessor_config.json``): convert to RGB (transparency composited onto white, as
transformers' ``convert_to_rgb``; BLIP's own code calls ``convert('RGB')``, which only differs
for images with an alpha channel); resize to 384 x 384 (both sides, the aspect
ratio is not kept), bicubic; x / 255; (x - mean) / std with OpenAI CLIP's mean
(0.48145466, 0.4578275, 0.40821073) and std (0.26862954, 0.26130258, 0.27577711). BLIP-2
uses the same steps at its config's image size (224).

Generation (BLIP's ``configs/caption_coco.yaml``, salesforce/BLIP): beam search with 3 beams,
``max_length`` 20, ``min_length`` 5, decoder prompt ``'a picture of '``, which is removed from
the output as BLIP's ``blip_decoder.generate`` does. BLIP-2 gets no prompt by default.
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import Any, Sequence

import numpy as np

from capeval._optional import require
from capeval.errors import ResourceError

DEFAULT_CAPTIONER = "Salesforce/blip-image-captioning-large"
BLIP_SIZE = 384
BLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
BLIP_STD = (0.26862954, 0.26130258, 0.27577711)
BLIP_GENERATION = {"num_beams": 3, "max_length": 20, "min_length": 5}  # BLIP configs/caption_coco.yaml
BLIP_PROMPT = "a picture of "


def blip_preprocess(image: Any, size: int = BLIP_SIZE, mean: Sequence[float] = BLIP_MEAN,
                    std: Sequence[float] = BLIP_STD) -> np.ndarray:
    """(3, size, size) float32: RGB, bicubic resize to size x size, /255, (x - mean) / std (BLIP's processor)."""
    from PIL import Image

    from capeval.models.clip.preprocess import open_image

    img = open_image(image)
    if "A" in img.getbands() or img.info.get("transparency") is not None:
        # as transformers' convert_to_rgb: transparency composited onto white (COCO JPEGs have none)
        rgba = img.convert("RGBA")
        img = Image.alpha_composite(Image.new("RGBA", rgba.size, (255, 255, 255, 255)), rgba)
    img = img.convert("RGB")
    if img.size != (size, size):
        img = img.resize((size, size), Image.BICUBIC)
    x = np.asarray(img, dtype=np.float32) / np.float32(255)
    x = (x - np.asarray(mean, dtype=np.float32)) / np.asarray(std, dtype=np.float32)
    return np.ascontiguousarray(x.transpose(2, 0, 1))


def weights_fingerprint(model: Any) -> str:
    """sha256 of every parameter and buffer (names, shapes, bytes): captions are cached under it."""
    h = hashlib.sha256()
    for name, t in sorted(model.state_dict().items()):
        h.update(f"{name}{tuple(t.shape)}{t.dtype}".encode())
        h.update(t.detach().to("cpu").float().contiguous().numpy().tobytes() if t.is_floating_point()
                 else t.detach().to("cpu").contiguous().numpy().tobytes())
    return h.hexdigest()


class Captioner:
    """A transformers BLIP / BLIP-2 captioning model: ``caption(images) -> list[str]`` (fp32).

    ``key`` names everything a caption depends on (model name, weights fingerprint, generation
    settings, preprocessing): template-caption caches are keyed by it.
    """

    def __init__(self, model: Any, tokenizer: Any, name: str, *, prompt: str | None = BLIP_PROMPT,
                 generation: dict[str, Any] | None = None, image_size: int | None = None, batch_size: int = 16,
                 device: str = "cpu"):
        import torch

        self.model = model.to(device).float().eval()
        self.tokenizer = tokenizer
        self.name = name
        self.prompt = prompt or ""
        self.generation = dict(BLIP_GENERATION if generation is None else generation)
        vision = getattr(model.config, "vision_config", None)
        self.image_size = int(image_size or getattr(vision, "image_size", BLIP_SIZE))
        self.batch_size = int(batch_size)
        self.device = torch.device(device)
        settings = {"name": name, "weights": weights_fingerprint(model), "prompt": self.prompt,
                    "generation": self.generation, "size": self.image_size, "mean": BLIP_MEAN, "std": BLIP_STD,
                    "resize": "square-bicubic"}
        self.key = f"{name}@" + hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:16]

    def caption(self, images: Sequence[Any]) -> list[str]:
        """One caption per image (paths, PIL images or uint8 arrays), prompt removed, whitespace trimmed."""
        import torch

        out: list[str] = []
        for start in range(0, len(images), self.batch_size):
            chunk = images[start: start + self.batch_size]
            px = torch.from_numpy(np.stack([blip_preprocess(im, self.image_size) for im in chunk])).to(self.device)
            kwargs: dict[str, Any] = dict(self.generation)
            if self.prompt:
                enc = self.tokenizer([self.prompt] * len(chunk), return_tensors="pt")
                kwargs.update(input_ids=enc["input_ids"].to(self.device),
                              attention_mask=enc["attention_mask"].to(self.device))
            with torch.inference_mode():
                ids = self.model.generate(pixel_values=px, **kwargs)
            for text in self.tokenizer.batch_decode(ids, skip_special_tokens=True):
                out.append(self._strip(text))
        return out

    def _strip(self, text: str) -> str:
        text = " ".join(text.split())
        lead = self.prompt.strip().lower()
        if lead and text.lower().startswith(lead):
            text = text[len(lead):].strip()
        return text


def load_captioner(name_or_path: str | os.PathLike[str] = DEFAULT_CAPTIONER, device: str = "cpu",
                   prompt: str | None = None, generation: dict[str, Any] | None = None,
                   batch_size: int = 16) -> Captioner:
    """A BLIP (``BlipForConditionalGeneration``) or BLIP-2 captioner by hub name or local path.

    ``prompt`` None: BLIP's ``'a picture of '`` for BLIP, none for BLIP-2.
    """
    transformers = require("transformers", purpose="BRIDGE's template captioner (BLIP)")
    name = os.fspath(name_or_path)
    try:
        config = transformers.AutoConfig.from_pretrained(name)
    except (OSError, ValueError) as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
        raise ResourceError(f"captioner {name!r} cannot be loaded (not a local folder and not in the Hugging Face "
                            f"cache; download it with network access first): {first}") from None
    classes = {"blip": "BlipForConditionalGeneration", "blip-2": "Blip2ForConditionalGeneration"}
    if config.model_type not in classes:
        raise ResourceError(f"captioner {name!r} is a {config.model_type!r} model; supported: BLIP, BLIP-2")
    try:
        model = getattr(transformers, classes[config.model_type]).from_pretrained(name)
        tokenizer = transformers.AutoTokenizer.from_pretrained(name)
    except (OSError, ValueError) as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
        raise ResourceError(f"captioner {name!r} cannot be loaded: {first}") from None
    if prompt is None:
        prompt = BLIP_PROMPT if config.model_type == "blip" else ""
    return Captioner(model, tokenizer, name, prompt=prompt, generation=generation, batch_size=batch_size,
                     device=device)
