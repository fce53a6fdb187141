"""Run before importing lmms-eval 0.7.3 (installed --no-deps) in a test's child process.

lmms-eval imports torch, accelerate, datasets, loguru, ... at module level. The writers and
loaders the tests call (evaluator._process_document_results, EvaluationTracker.save_results_samples,
TaskManager, utils.load_yaml_config, the caption tasks' process_results) use none of them on
the inputs given, so each such import gets an inert stand-in: FORCED always (heavy or
absent), any other module only when the importer is lmms-eval's and the module is not installed.
"""

import datetime
import importlib.abc
import importlib.machinery
import sys
import types


class Anything:
    """Any attribute, call, subclassing or operator works and yields another inert value."""

    def __init__(self, *args, **kwargs):
        pass

    def __call__(self, *args, **kwargs):
        if len(args) == 1 and callable(args[0]) and not kwargs:  # used as a decorator
            return args[0]
        return Anything()

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return Anything()

    def __iter__(self):
        return iter(())

    def __len__(self):
        return 0

    def __or__(self, other):
        return self

    __ror__ = __and__ = __add__ = __or__

    def __mro_entries__(self, bases):
        return (object,)


class AnyType(type):
    """A stand-in class (``torch.Tensor`` in an isinstance test): any class attribute is inert too."""

    def __getattr__(cls, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return AnyType(name, (Anything,), {}) if name[:1].isupper() else Anything()


class StubModule(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        if name[:1].isupper():  # a class: usable in isinstance and as a base
            return AnyType(name, (Anything,), {})
        return Anything()


FORCED = {"torch", "transformers", "accelerate", "datasets", "pandas", "PIL", "pytz", "nltk", "spacy", "loguru",
          "capture_metric"}


class StubFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name, path, target=None):
        top = name.split(".")[0]
        if top not in FORCED:
            if top in ("lmms_eval", "capeval"):
                return None
            frame = sys._getframe(1)
            while frame is not None and frame.f_code.co_filename.startswith("<frozen"):
                frame = frame.f_back
            if frame is None or not frame.f_globals.get("__name__", "").startswith("lmms_eval"):
                return None
            if top in sys.modules and not isinstance(sys.modules[top], StubModule):
                return None  # a real package's submodule
            if importlib.machinery.PathFinder.find_spec(top) is not None:
                return None  # installed: the real one
        return importlib.machinery.ModuleSpec(name, self, is_package=True)

    def create_module(self, spec):
        module = StubModule(spec.name)
        module.__path__ = []
        return module

    def exec_module(self, module):
        if module.__name__ == "pytz":  # utils.get_datetime_str runs at import time
            module.timezone = lambda name: datetime.timezone.utc


sys.meta_path.insert(0, StubFinder())
