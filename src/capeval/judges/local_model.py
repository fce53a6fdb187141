"""Where the local judge backends load their model from, and fetching one with ``capeval download``.

A local backend never downloads implicitly (a 13B LLaVA is 26 GB, and without a network the
Hugging Face client retries for half a minute, printing as it goes): :func:`locate` finds the
model offline only, as a folder or in the Hugging Face cache, and a missing one is one line
naming ``capeval download <model>`` and the server backend. ``capeval download <org>/<name>``
(:func:`download_hub_model`) puts a hub model into the Hugging Face cache, where
:func:`locate` then finds it.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from capeval.errors import InputError, ResourceError

#: ``org/name`` of a Hugging Face hub repository
HUB_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")


def missing_message(label: str, name: str) -> str:
    """The one line for a model that is on this machine neither as a folder nor in the cache."""
    if not HUB_NAME.match(name):
        return (f"{label}: the model folder {name!r} does not exist; give a folder saved with save_pretrained, "
                f"a Hugging Face name, or use a server: -O {label}.backend=openai -O {label}.base_url=URL")
    return (f"{label}: the model {name!r} is not on this machine: run `capeval download {name}` once online, "
            f"or use a server: -O {label}.backend=openai -O {label}.base_url=URL")


def locate(name: str, revision: str | None, label: str) -> str:
    """The folder to load ``name`` from: a folder as it is, else the Hugging Face cache's snapshot
    of ``name`` at ``revision`` (looked up offline: no network, nothing printed)."""
    folder = os.path.expanduser(name)
    if os.path.isdir(folder):
        return folder
    if not HUB_NAME.match(name):
        raise ResourceError(missing_message(label, name))
    try:
        from huggingface_hub import snapshot_download

        return snapshot_download(name, revision=revision, local_files_only=True)
    except Exception:  # not in the cache: the hub client raises one of several types
        raise ResourceError(missing_message(label, name)) from None


def download_hub_model(name: str, revision: str | None = None) -> Path:
    """Fetch hub model ``name`` (config, tokenizer, weights; safetensors when the repository has
    them, else its other weights) into the Hugging Face cache; returns the snapshot folder."""
    if not HUB_NAME.match(name):
        raise InputError(f"{name!r} is not a Hugging Face model name (ORG/NAME)")
    from capeval._optional import require

    require("huggingface_hub", purpose=f"capeval download {name}")
    from huggingface_hub import HfApi, snapshot_download

    try:
        files = HfApi().list_repo_files(name, revision=revision)
        ignore = ["*.h5", "*.msgpack", "*.onnx", "*.gguf", "*.ot"]
        if any(f.endswith(".safetensors") for f in files):
            ignore += ["*.bin", "*.pt", "*.pth"]
        return Path(snapshot_download(name, revision=revision, ignore_patterns=ignore))
    except Exception as exc:  # network and hub errors come in many types
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise ResourceError(f"could not download {name} from https://huggingface.co/{name} "
                            f"({type(exc).__name__}: {first[:160]})") from None
