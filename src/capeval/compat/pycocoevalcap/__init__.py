"""pycocoevalcap 1.2's API, computed by capeval: no Java, the same numbers.

Replace the import prefix ``pycocoevalcap`` by ``capeval.compat.pycocoevalcap`` and nothing
else::

    from capeval.compat.pycocoevalcap.eval import COCOEvalCap          # was: from pycocoevalcap.eval import ...
    from capeval.compat.pycocoevalcap.tokenizer.ptbtokenizer import PTBTokenizer
    from capeval.compat.pycocoevalcap.bleu.bleu import Bleu
    from capeval.compat.pycocoevalcap.meteor.meteor import Meteor
    from capeval.compat.pycocoevalcap.rouge.rouge import Rouge
    from capeval.compat.pycocoevalcap.cider.cider import Cider
    from capeval.compat.pycocoevalcap.spice.spice import Spice

Each class has the original's methods and return values (types, list vs array, per-item
order): the PTB tokenizer is :mod:`capeval.tokenize.ptb`, BLEU / ROUGE-L / CIDEr are
:mod:`capeval.metrics.bleu` / ``rouge`` / ``cider`` (bit for bit), METEOR is
:mod:`capeval.metrics.meteor` (pure Python METEOR 1.5, its resources read from the
installed ``pycocoevalcap==1.2`` wheel: the ``meteor`` extra), SPICE is
:mod:`capeval.metrics.spice` (the ``spice`` extra). For a script that cannot be edited,
:func:`install` makes ``import pycocoevalcap...`` resolve to these modules (explicit, never
by default).

Differences that cannot be avoided:

- SPICE parses captions with spaCy (capeval's SPICE), not with CoreNLP 3.6.0 as SPICE 1.0's
  jar does: same result layout, different numbers. ``Spice.compute_score`` warns once
  (``SpiceParserWarning``) naming the signature.
- The original's ``assert`` checks are always made (also under ``python -O``) and raise
  ``CompatInputError`` (an ``AssertionError`` and a ``capeval.errors.InputError``) with a
  message naming the image. ``Bleu(n)`` takes ``1 <= n <= 4`` and ``Cider`` ``n == 4``, a
  finite ``sigma > 0``: other values crash or silently rescale in pycocoevalcap 1.2.
- PTBTokenizer reads ``\\r \\v \\f`` U+2028 U+2029 in a caption as spaces (Java reads line
  breaks and shifts all later captions onto the wrong images).

Importing this package imports nothing else; each class loads its metric on first use.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import sys
import types

#: the submodules of pycocoevalcap 1.2 with a public class, aliased by :func:`install`
SUBMODULES = (
    "eval", "tokenizer", "tokenizer.ptbtokenizer", "bleu", "bleu.bleu", "meteor", "meteor.meteor",
    "rouge", "rouge.rouge", "cider", "cider.cider", "spice", "spice.spice",
)  # fmt: skip


def install() -> None:
    """Make ``import pycocoevalcap`` and its submodules (:data:`SUBMODULES`) resolve to this
    package, for scripts that cannot be edited. Explicit only (never done on import);
    modules imported from pycocoevalcap before the call keep the original classes.

    The top-level alias keeps the real package's import spec (when it is installed), so the
    METEOR resources are still found in the ``pycocoevalcap==1.2`` wheel.
    """
    current = sys.modules.get("pycocoevalcap")
    if getattr(current, "__capeval_alias__", False):
        return
    try:
        real = importlib.util.find_spec("pycocoevalcap")
    except (ImportError, ValueError):
        real = None
    top = types.ModuleType("pycocoevalcap", __doc__)
    top.__capeval_alias__ = True  # type: ignore[attr-defined]
    top.__path__ = []  # a package: ``import pycocoevalcap.x`` looks x up in sys.modules
    # without the real package, an empty package spec: METEOR then reports the missing wheel
    top.__spec__ = real or importlib.machinery.ModuleSpec("pycocoevalcap", None, is_package=True)
    top.install = install  # type: ignore[attr-defined]
    mods = {name: importlib.import_module(f"{__name__}.{name}") for name in SUBMODULES}
    sys.modules["pycocoevalcap"] = top
    for name, mod in mods.items():
        sys.modules[f"pycocoevalcap.{name}"] = mod
        parent, _, leaf = f"pycocoevalcap.{name}".rpartition(".")
        setattr(sys.modules[parent] if parent != "pycocoevalcap" else top, leaf, mod)
