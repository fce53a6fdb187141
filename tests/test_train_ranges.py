"""Every numeric setting of every ``capeval train`` config has a declared range, checked on
construction (YAML, ``--set`` and Python alike) with a one-line error naming the setting."""

from __future__ import annotations

import dataclasses
import typing

import pytest

from capeval.errors import InputError
from capeval.ranges import TRAIN_RANGES

pytest.importorskip("torch")

from capeval.train.bridge_config import BridgeTrainConfig  # noqa: E402
from capeval.train.config import build  # noqa: E402
from capeval.train.pacs_config import PacsTrainConfig  # noqa: E402
from capeval.train.scst import CaptionerTrainConfig  # noqa: E402

CONFIGS = [PacsTrainConfig, BridgeTrainConfig, CaptionerTrainConfig]


def _numeric(hint) -> bool:
    args = typing.get_args(hint)
    if args and typing.get_origin(hint) not in (list, tuple, dict):
        return any(_numeric(a) for a in args)
    return hint in (int, float)


def _numeric_fields(cls):
    hints = typing.get_type_hints(cls)
    return [f.name for f in dataclasses.fields(cls) if _numeric(hints[f.name])]


@pytest.mark.parametrize("cls", CONFIGS, ids=lambda c: c.__name__)
def test_every_numeric_setting_has_a_declared_range(cls):
    declared = TRAIN_RANGES[cls.RANGES]
    missing = [name for name in _numeric_fields(cls) if name not in declared]
    assert not missing, f"{cls.__name__}: no range in capeval.ranges.TRAIN_RANGES[{cls.RANGES!r}] for {missing}"
    stale = sorted(set(declared) - {f.name for f in dataclasses.fields(cls)})
    # the shared block names settings some trainers lack; a trainer-specific stale name is a typo
    assert not [s for s in stale if s not in ("max_val_images", "max_eval_images", "grad_clip", "temperature",
                                              "max_steps", "max_epochs", "workers", "lr", "weight_decay")], stale


def _outside(bounds):
    if bounds.low is not None:
        return bounds.low if bounds.low_open else (bounds.low - 1 if bounds.integer else bounds.low - 0.5)
    return bounds.high if bounds.high_open else bounds.high + 1


@pytest.mark.parametrize("cls", CONFIGS, ids=lambda c: c.__name__)
def test_a_value_outside_its_range_is_one_line_naming_it(cls):
    declared = TRAIN_RANGES[cls.RANGES]
    hints = typing.get_type_hints(cls)
    for name in _numeric_fields(cls):
        bounds = declared[name]
        value = _outside(bounds)
        kinds = typing.get_args(hints[name]) + (hints[name],)
        value = float(value) if float in kinds else int(value)
        with pytest.raises(InputError) as err:
            build(cls, {name: value})
        message = str(err.value)
        assert "\n" not in message
        assert f"{name}={value!r} out of range: {bounds.describe(name)}" in message, message


def test_none_means_unset_and_defaults_pass():
    for cls in CONFIGS:
        cls()  # the papers' defaults are inside every range
    assert PacsTrainConfig(max_steps=None, grad_clip=None, lambda_v=None).lambdas == (0.1, 0.001)


def test_cross_setting_checks():
    with pytest.raises(InputError, match=r"d_model=100 must be a multiple of heads=8"):
        CaptionerTrainConfig(d_model=100)
    with pytest.raises(InputError, match=r"xe_decay_end=5 must be >= xe_decay_start=10"):
        CaptionerTrainConfig(xe_decay_start=10, xe_decay_end=5)
    with pytest.raises(InputError, match=r"batch_size 10 must be a multiple of grad_accum 3"):
        PacsTrainConfig(batch_size=10, grad_accum=3)
    with pytest.raises(InputError, match=r"dropout=1.0 out of range: dropout must be a number in \[0, 1\)"):
        BridgeTrainConfig(dropout=1.0)
