"""Our lm-eval models, each registered once by :func:`lch_model` on its class: with lm-eval under its name, and here
with the request types it serves and the check of its ``--model_args`` run before anything loads. Which models exist
is read from pyproject.toml's ``lm_eval.models`` entry points, so a model module is imported only when asked about."""

from __future__ import annotations

import importlib
import importlib.metadata
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from harness.core.context import setting

LM_EVAL_TYPES = frozenset({"loglikelihood", "loglikelihood_rolling", "generate_until"})
DISTRIBUTION = "lch-harness"
_REGISTERED: dict[str, ModelEntry] = {}
# within one run (checking_once): the model args each model has checked, with the check's result
_CHECKED: ContextVar[list[tuple[str, dict, Any]] | None] = ContextVar("lch_checked_model_args", default=None)


@dataclass(frozen=True)
class ModelEntry:
    """One of our lm-eval models: its name, class, the check of its model args, the request types it serves."""

    name: str
    cls: type[Any]
    preflight: Callable[[dict], Any]

    @property
    def serves(self) -> frozenset[str]:
        """lm-eval's request types and ours that the class answers (the engine core's: with their primitives)."""
        from harness.engines.core import EngineCore
        from harness.engines.requests import REQUESTS

        def answers(request_type: str) -> bool:
            if not callable(getattr(self.cls, request_type, None)):
                return False
            core = issubclass(self.cls, EngineCore) and request_type in EngineCore.NEEDS
            return not core or self.cls.serves(request_type)

        return LM_EVAL_TYPES | {name for name in REQUESTS if answers(name)}

    def check(self, args: Mapping[str, Any]) -> Any:
        """The check of ``args`` registered with the model; within a run (:func:`checking_once`) once per args, so
        that the constructor takes the door's result, elsewhere (a direct construction, ``lch plan``) each time."""
        done = _CHECKED.get()
        found = [result for name, given, result in done or () if name == self.name and given == args]
        if found:
            return found[0]
        result = self.preflight(dict(args))
        if done is not None:
            done.append((self.name, dict(args), result))
        return result

    def check_request(self, task: str, request_type: str, model_args: dict) -> None:
        """The model's own refusal of a request type under these model args (one line), if it has one."""
        check = getattr(self.cls, "check_request", None)
        if check is not None:
            check(task, request_type, model_args)


def lch_model(name: str, preflight: Callable[[dict], Any]) -> Callable[[type], type]:
    """Class decorator: register the class with lm-eval under ``name`` and here (module docstring)."""

    def decorate(cls: type[Any]) -> type[Any]:
        from lm_eval.api.registry import register_model

        register_model(name)(cls)
        cls.ENGINE_NAME = name  # the class knows its name (progress bars, the response cache's owner)
        _REGISTERED[name] = ModelEntry(name, cls, preflight)
        return cls

    return decorate


def checking_once() -> AbstractContextManager[Any]:
    """While on (a run, from the door to its end), a model checks given args once (:meth:`ModelEntry.check`)."""
    return setting(_CHECKED, [])


def check_model_args(name: str, args: Mapping[str, Any]) -> Any:
    """Our registered model ``name``'s check of ``args`` (its constructor's: :meth:`ModelEntry.check`)."""
    return _REGISTERED[name].check(args)


def _entry_points() -> list[importlib.metadata.EntryPoint]:
    return [ep for ep in importlib.metadata.distribution(DISTRIBUTION).entry_points if ep.group == "lm_eval.models"]


def model_names() -> list[str]:
    """Our model names, in the order of the installed entry points (nothing imported)."""
    return [ep.name for ep in _entry_points()]


def model_entry(name: str) -> ModelEntry | None:
    """The registry entry of our model ``name`` (its module imported), or None for a name that is not ours."""
    for ep in _entry_points():
        if ep.name == name:
            if name not in _REGISTERED:
                importlib.import_module(ep.value.split(":", 1)[0])
            return _REGISTERED.get(name)
    return None


def models() -> list[ModelEntry]:
    """Every one of our models (their modules imported), in :func:`model_names` order."""
    return [entry for entry in (model_entry(name) for name in model_names()) if entry is not None]
