"""BRIDGE's weighted contrastive loss (capeval.train.losses) against literal loop transcriptions.

The default is Eq. 5 of the paper's supplementary (Sec. A; Eq. 6 is the same with ground-truth
caption embeddings as targets), written below with plain Python loops over i, j, k, h and
math.exp/log in float64 from the printed formula, not from the vectorised code. Gradients are
checked against finite differences (torch.autograd.gradcheck, float64).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from capeval.errors import InputError  # noqa: E402
from capeval.train.bridge_config import BridgeTrainConfig  # noqa: E402
from capeval.train.losses import infonce, weighted_infonce  # noqa: E402


def _cos(a, b) -> float:
    return sum(x * y for x, y in zip(a, b)) / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))


def _eq5(v, t_star, tau):
    """Supplementary Eq. 5, literally: ``v[i]`` the target of image i, ``t_star[i][j]`` its j-th pseudo-caption."""
    n = len(v)
    big_n = [len(t_star[i]) for i in range(n)]
    m = sum(big_n)

    def e(a, b):
        return math.exp(_cos(a, b) / tau)

    first = 0.0
    for i in range(n):
        for j in range(big_n[i]):
            denom = sum(big_n[k] * e(v[k], t_star[i][j]) for k in range(n) if k != i)
            first += math.log(e(v[i], t_star[i][j]) / denom)
    second = 0.0
    for i in range(n):
        for j in range(big_n[i]):
            denom = sum(e(v[i], t_star[k][h]) for k in range(n) if k != i for h in range(big_n[k]))
            second += big_n[i] * math.log(e(v[i], t_star[i][j]) / denom)
    return -first / m + -second / m


def _batch(rng, counts, dim=6, shuffle=True):
    """Unit pseudo-caption rows in a shuffled order, their owners, unit targets; the nested form of Eq. 5."""
    unit = lambda x: x / np.linalg.norm(x, axis=-1, keepdims=True)  # noqa: E731
    targets = unit(rng.normal(size=(len(counts), dim)))
    owner = [i for i, c in enumerate(counts) for _ in range(c)]
    if shuffle:
        owner = [owner[k] for k in rng.permutation(len(owner))]
    pseudo = unit(rng.normal(size=(len(owner), dim)))
    nested = [[list(pseudo[m]) for m in range(len(owner)) if owner[m] == i] for i in range(len(counts))]
    return pseudo, targets, owner, nested


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("kind", ["ones", "mixed", "aligned"])
def test_weighted_infonce_equals_eq5_loops(seed, kind):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 7))
    counts = [1] * n if kind == "ones" else [int(c) for c in rng.integers(1, 5, size=n)]
    pseudo, targets, owner, nested = _batch(rng, counts)
    if kind == "aligned":  # pseudo-captions near (cos ~ 1) or opposite (cos ~ -1) their image
        sign = np.array([1.0 if m % 2 else -1.0 for m in range(len(owner))])[:, None]
        pseudo = sign * targets[owner] + 0.05 * pseudo
        pseudo /= np.linalg.norm(pseudo, axis=1, keepdims=True)
        nested = [[list(pseudo[m]) for m in range(len(owner)) if owner[m] == i] for i in range(n)]
    assert (pseudo @ targets.T).min() < 0  # negative cosines occur
    for tau in (1.0, 0.07, 0.01):
        got = weighted_infonce(torch.tensor(pseudo), torch.tensor(targets), torch.tensor(owner), 1.0 / tau)
        want = _eq5([list(x) for x in targets], nested, tau)
        assert got.dtype == torch.float64
        assert abs(float(got) - want) <= 1e-10 * max(1.0, abs(want)), (counts, tau)


def test_images_without_pseudo_captions_drop_out_as_in_eq5():
    rng = np.random.default_rng(7)
    pseudo, targets, owner, nested = _batch(rng, [2, 0, 3, 1])  # image 1 has N_1 = 0: weight 0 everywhere
    got = weighted_infonce(torch.tensor(pseudo), torch.tensor(targets), torch.tensor(owner), 20.0)
    assert abs(float(got) - _eq5([list(x) for x in targets], nested, 1 / 20.0)) < 1e-10
    kept = [0, 2, 3]
    owner2 = torch.tensor([kept.index(o) for o in owner])
    again = weighted_infonce(torch.tensor(pseudo), torch.tensor(targets[kept]), owner2, 20.0)
    assert abs(float(got) - float(again)) < 1e-12


def test_scale_as_a_tensor_and_the_option_name():
    rng = np.random.default_rng(3)
    pseudo, targets, owner, _ = _batch(rng, [1, 3, 2])
    args = torch.tensor(pseudo), torch.tensor(targets), torch.tensor(owner)
    as_tensor = torch.tensor(14.0, dtype=torch.float64)
    assert float(weighted_infonce(*args, as_tensor)) == float(weighted_infonce(*args, 14.0))
    assert float(weighted_infonce(*args, 14.0, "paper")) == float(weighted_infonce(*args, 14.0))
    assert float(weighted_infonce(*args, 14.0, "capeval-v1")) != float(weighted_infonce(*args, 14.0))


@pytest.mark.parametrize("counts", [[1, 1], [1, 2, 3], [4, 1, 2, 3]])
def test_gradients_agree_with_finite_differences(counts):
    rng = np.random.default_rng(len(counts))
    pseudo, targets, owner, _ = _batch(rng, counts, dim=4)
    owner_t = torch.tensor(owner)

    def loss(p, x):  # normalised inside, as BridgeObjective normalises before the loss
        return weighted_infonce(torch.nn.functional.normalize(p, dim=-1), torch.nn.functional.normalize(x, dim=-1),
                                owner_t, 5.0)

    p = torch.tensor(pseudo, requires_grad=True)
    x = torch.tensor(targets, requires_grad=True)
    assert torch.autograd.gradcheck(loss, (p, x))


def test_no_negative_is_one_line_input_error():
    rng = np.random.default_rng(0)
    pseudo, targets, owner, _ = _batch(rng, [3])
    with pytest.raises(InputError, match="at least two images") as err:
        weighted_infonce(torch.tensor(pseudo), torch.tensor(targets), torch.tensor(owner), 10.0)
    assert "\n" not in str(err.value)
    pseudo, targets, owner, _ = _batch(rng, [2, 0, 0])  # other images, but none owns a pseudo-caption
    with pytest.raises(InputError, match="got 1"):
        weighted_infonce(torch.tensor(pseudo), torch.tensor(targets), torch.tensor(owner), 10.0)
    args = torch.tensor(pseudo), torch.tensor(targets), torch.tensor(owner)
    for bad, match in ((dict(scale=0.0), "scale"), (dict(scale=-1.0), "scale"), (dict(weighting="half"), "weighting")):
        with pytest.raises(InputError, match=match):
            weighted_infonce(*args, **{"scale": 10.0, **bad})
    with pytest.raises(InputError, match=r"owner indices should lie in 0\.\.2"):
        weighted_infonce(args[0], args[1], torch.tensor([0, 3]), 10.0)
    with pytest.raises(InputError, match="should be"):
        weighted_infonce(args[0], args[1][:, :3], args[2], 10.0)


def test_config_options():
    assert BridgeTrainConfig().loss_weighting == "paper"
    assert BridgeTrainConfig(loss_weighting="capeval-v1").loss_weighting == "capeval-v1"
    with pytest.raises(InputError, match="loss_weighting must be one of paper, capeval-v1"):
        BridgeTrainConfig(loss_weighting="v1")
    with pytest.raises(InputError, match=r"batch_size=1 out of range: batch_size must be an integer >= 2"):
        BridgeTrainConfig(batch_size=1)


# -- capeval 0.1.0's reading (weighting="capeval-v1") and plain InfoNCE -----------------------

def _v1_reference(pseudo, targets, owner, scale):
    """capeval-v1 written as loops from the docstring of capeval.train.losses."""
    s = [[scale * float(np.dot(p, t)) for t in targets] for p in pseudo]
    counts = [owner.count(n) for n in range(len(targets))]
    images = sum(1 for c in counts if c)
    a = 0.0
    for m, i in enumerate(owner):
        lse = math.log(sum(math.exp(x) for x in s[m]))
        a += (lse - s[m][i]) / counts[i]
    b = 0.0
    for n in range(len(targets)):
        for m in (m for m, i in enumerate(owner) if i == n):
            denom = math.exp(s[m][n]) + sum(math.exp(s[k][n]) / counts[owner[k]] for k in range(len(owner))
                                            if owner[k] != n)
            b += -(s[m][n] - math.log(denom)) / counts[n]
    return 0.5 * (a / images + b / images)


def test_capeval_v1_and_infonce_match_loops():
    rng = np.random.default_rng(0)
    unit = lambda x: x / np.linalg.norm(x, axis=1, keepdims=True)  # noqa: E731
    pseudo, targets = unit(rng.normal(size=(7, 5))), unit(rng.normal(size=(4, 5)))
    owner = [0, 0, 0, 1, 2, 2, 0]  # image 3 owns nothing: a negative only
    got = weighted_infonce(torch.tensor(pseudo), torch.tensor(targets), torch.tensor(owner), 10.0, "capeval-v1")
    assert abs(float(got) - _v1_reference(pseudo, targets, owner, 10.0)) < 1e-9
    a, b = torch.tensor(pseudo[:4]), torch.tensor(targets)
    same = torch.tensor([[i == j or {i, j} == {1, 2} for j in range(4)] for i in range(4)])
    logits = (10 * a @ b.T).numpy()
    ref = 0.0
    for i in range(4):
        row = [logits[i, j] for j in range(4) if not same[i, j] or i == j]
        col = [logits[j, i] for j in range(4) if not same[j, i] or i == j]
        ref += (math.log(sum(map(math.exp, row))) - logits[i, i]) + (math.log(sum(map(math.exp, col))) - logits[i, i])
    assert abs(float(infonce(a, b, 10.0, same)) - ref / 8) < 1e-9


def test_capeval_v1_single_image_batch_is_zero_with_finite_gradients():
    pseudo = torch.nn.functional.normalize(torch.randn(3, 4), dim=-1).requires_grad_(True)
    targets = torch.nn.functional.normalize(torch.randn(1, 4), dim=-1)
    loss = weighted_infonce(pseudo, targets, torch.zeros(3, dtype=torch.long), 100.0, "capeval-v1")
    loss.backward()
    assert torch.isfinite(pseudo.grad).all() and loss.item() == 0.0
