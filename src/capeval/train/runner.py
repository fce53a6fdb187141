"""Where a training loop runs: the device, optionally ``accelerate`` (mixed precision, several
processes), and the few calls that differ between a plain torch loop and an accelerate one.

Shared by every ``capeval train`` command. A config needs ``device`` (``cpu``, ``cuda``,
``auto``...), ``accelerate`` (``auto``: used when installed and the device is a GPU or the
command was started on several processes; ``yes``; ``no``) and ``mixed_precision`` (``no``,
``bf16``, ``fp16``). Several processes come from a launcher (``accelerate launch`` or
``torchrun``; the launcher's ``WORLD_SIZE`` tells them apart): the model is wrapped in
DistributedDataParallel by :meth:`Runner.prepare`, gradients are averaged over the processes
and :meth:`Runner.sum` adds a value over them. A global batch is split by :meth:`Runner.local_slice`;
:meth:`Runner.gather` puts the processes' parts of a per-item tensor back together (contrastive
losses whose negatives are the whole global batch).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
from torch import nn

from capeval._optional import available
from capeval.errors import InputError


def atomic_torch_save(obj: Any, path: Path) -> None:
    """``torch.save(obj, path)`` through a temporary file in the same folder: a crash leaves the old file."""
    from capeval.io.atomic import atomic_path

    with atomic_path(path) as tmp:
        torch.save(obj, tmp)


def launched_processes() -> int:
    """How many processes the launcher started (``WORLD_SIZE``; 1 outside a launcher)."""
    try:
        return max(int(os.environ.get("WORLD_SIZE", "1")), 1)
    except ValueError:
        return 1


class Runner:
    """Device, optional accelerate, and the calls that differ between the two kinds of loop.

    ``world_size`` processes (1 without a launcher), this one is ``rank`` (0 is the main one,
    ``is_main``).
    """

    def __init__(self, cfg: Any):
        device = cfg.device
        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        launched = launched_processes()
        if launched > 1 and cfg.accelerate == "no":
            raise InputError(f"started on {launched} processes but accelerate=no: set accelerate to auto or yes, "
                             "or start one process")
        if (cfg.accelerate == "yes" or launched > 1) and not available("accelerate"):
            raise InputError("accelerate=yes (or several processes) but accelerate is not installed: "
                             "pip install accelerate")
        use = cfg.accelerate == "yes" or (cfg.accelerate == "auto" and available("accelerate")
                                          and (device != "cpu" or launched > 1))
        if cfg.mixed_precision == "fp16" and not use:
            raise InputError("mixed_precision=fp16 needs accelerate (loss scaling); use bf16 or accelerate=yes")
        self.acc: Any = None
        if use:
            from accelerate import Accelerator

            self.acc = Accelerator(mixed_precision=cfg.mixed_precision, cpu=device == "cpu")
            self.device = self.acc.device
        else:
            self.device = torch.device(device)
        self.bf16 = cfg.mixed_precision == "bf16" and self.acc is None and self.device.type == "cuda"
        self.world_size: int = self.acc.num_processes if self.acc is not None else 1
        self.rank: int = self.acc.process_index if self.acc is not None else 0
        self.is_main: bool = self.rank == 0

    def prepare(self, *objects: Any) -> Any:
        """Models (DDP with several processes), optimizers, data loaders; one object in, one out."""
        if self.acc is not None:
            return self.acc.prepare(*objects)
        return objects[0] if len(objects) == 1 else objects

    def unwrap(self, model: nn.Module) -> nn.Module:
        """The model :meth:`prepare` wrapped (for saving, generation and other non-training calls)."""
        return self.acc.unwrap_model(model) if self.acc is not None else model

    def autocast(self) -> Any:
        return torch.autocast("cuda", dtype=torch.bfloat16, enabled=self.bf16)

    def backward(self, loss: torch.Tensor) -> None:
        self.acc.backward(loss) if self.acc is not None else loss.backward()

    def clip(self, parameters: Any, max_norm: float) -> None:
        if self.acc is not None:  # unscales fp16 gradients first
            self.acc.clip_grad_norm_(parameters, max_norm)
        else:
            nn.utils.clip_grad_norm_(parameters, max_norm)

    def mean(self, value: torch.Tensor) -> float:
        """The mean of ``value`` over the processes."""
        if self.acc is not None:
            value = self.acc.reduce(value.detach(), reduction="mean")
        return float(value)

    def sum(self, value: torch.Tensor) -> torch.Tensor:
        """``value`` (a tensor on :attr:`device`) added over the processes, without gradient."""
        value = value.detach()
        if self.acc is not None and self.world_size > 1:
            value = self.acc.reduce(value, reduction="sum")
        return value

    def wait_for_everyone(self) -> None:
        """A barrier: returns once every process has reached it."""
        if self.acc is not None and self.world_size > 1:
            self.acc.wait_for_everyone()

    @contextlib.contextmanager
    def main_first(self) -> Iterator[None]:
        """The block runs on the main process, then on the others (downloads, caches)."""
        if not self.is_main:
            self.wait_for_everyone()
        yield
        if self.is_main:
            self.wait_for_everyone()

    def part_sizes(self, n: int) -> list[int]:
        """The sizes of every process's :meth:`local_slice` of ``n`` items, in rank order."""
        return [(r + 1) * n // self.world_size - r * n // self.world_size for r in range(self.world_size)]

    def gather(self, x: torch.Tensor, n: int) -> torch.Tensor:
        """This process's rows ``x`` (its :meth:`local_slice` of ``n`` items) and every other
        process's, concatenated in rank order: the global batch's (n, ...) tensor on every process.

        Gradient flows into ``x`` only (the other processes' rows are copies). A loss computed
        from gathered tensors is therefore the global batch's loss L on every process, and its
        gradient here is dL/dx_r J_r, this process's rows' share of the full gradient
        sum_r dL/dx_r J_r. DistributedDataParallel averages the processes' gradients, so each
        process backpropagates ``world_size * L``: the average is then exactly the one-process
        gradient of L (tests/test_pacs_distributed.py). Parts may differ in size or be empty.
        """
        if self.world_size == 1:
            return x
        import torch.distributed as dist

        sizes = self.part_sizes(n)
        if len(x) != sizes[self.rank]:
            raise ValueError(f"process {self.rank} holds {len(x)} rows of {n}, its part is {sizes[self.rank]}")
        # all_gather needs equal shapes: pad every part to the largest
        padded = x.detach().new_zeros((max(sizes), *x.shape[1:]))
        padded[: len(x)] = x.detach()
        parts = [torch.empty_like(padded) for _ in range(self.world_size)]
        dist.all_gather(parts, padded)
        return torch.cat([x if r == self.rank else part[:size] for r, (part, size) in enumerate(zip(parts, sizes))])

    def local_slice(self, n: int) -> slice:
        """This process's contiguous part of ``n`` items: sizes differ by at most one, may be empty."""
        return slice(self.rank * n // self.world_size, (self.rank + 1) * n // self.world_size)
