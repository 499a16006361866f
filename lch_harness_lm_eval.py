"""Plain ``lm_eval`` (the command, ``python -m lm_eval``, ``lm_eval.simple_evaluate``) finds lch-harness's models and
tasks on lm-eval releases that do not load plugins yet; everything else in the interpreter is left as it was.

lm-eval discovers model backends from ``lm_eval.models`` entry points (lm-evaluation-harness PR #4013, merged after
0.4.13) and task folders from ``lm_eval.tasks`` entry points (PR #4015); 0.4.13 reads neither. Installing the package
puts ``lch_harness_lm_eval.pth`` into site-packages (``build_pth.py``), whose one line imports this module, and only
this module, at interpreter start and calls :func:`install`. This module is a top-level name of the distribution's
own (never ``harness``, which a user's project may own) and imports nothing beyond ``os`` and ``sys``: it puts a
finder at the front of ``sys.meta_path``. When (and only when) the program later imports one of the lm-eval modules
in :data:`HOOKS`, the module runs as usual and then its hook runs:

* ``lm_eval.models``: the entry points of the ``lm_eval.models`` group are registered as #4013 does;
* ``lm_eval.tasks.manager``: a ``TaskManager`` that indexes lm-eval's own tasks also indexes the folders of the
  ``lm_eval.tasks`` entry points, after them and before ``include_path``, as #4015 does;
* ``lm_eval.evaluator``: ``simple_evaluate`` becomes the door of every run (``harness/plugin/preflight.py``): a run of
  our models or tasks is checked before a model loads and its results are finished; any other goes straight on;
* ``lm_eval._cli.harness``: once lm-eval has parsed its command line, a run of ours gets its task index scoped and
  its user errors in one ``lch: error:`` line (``harness/plugin/command_line.py``); any other is left as lm-eval
  runs it.

A hook runs only when the ``harness`` package that Python would import is this distribution's (the folder beside
this file): in a project with a ``harness`` package of its own on ``sys.path`` first, nothing of ours is imported
and lm-eval runs as if we were not installed. Every failure here or in a hook is swallowed and reported only under
``LCH_DEBUG=1``; ``LCH_LM_EVAL_PLUGIN=0`` switches it all off. It retires itself: the discovery hooks do nothing on
an lm-eval that discovers plugins itself, and once the package requires such an lm-eval, the discovery hooks go.
Why a ``.pth`` line and a meta path finder: lm-eval 0.4.13 has no hook a package can register into, and
``sitecustomize`` belongs to the user (the post-import hook pattern of coverage's subprocess support and
OpenTelemetry's auto-instrumentation).
"""

from __future__ import annotations

import os
import sys

OPT_OUT = "LCH_LM_EVAL_PLUGIN"  # "0": no activation
PACKAGE = "harness"  # the import name the hooks live under
HOOKS = {
    "lm_eval.models": "harness.plugin.discovery:after_models_import",
    "lm_eval.tasks.manager": "harness.plugin.discovery:after_task_manager_import",
    "lm_eval.evaluator": "harness.plugin.preflight:after_evaluator_import",
    "lm_eval._cli.harness": "harness.plugin.command_line:after_cli_import",
}


def _debug(message: str) -> None:
    if os.environ.get("LCH_DEBUG") == "1":
        print(f"lch: lm-eval plugin activation: {message}", file=sys.stderr)


def switched_off() -> bool:
    return os.environ.get(OPT_OUT, "").strip().lower() in ("0", "off", "false", "no")


def ours_is_importable() -> bool:
    """Whether ``import harness`` gives this distribution's package (the folder beside this file), found without
    importing anything: a user's own ``harness`` earlier on ``sys.path`` (or already imported) is not ours."""
    from importlib.util import find_spec

    expected = os.path.join(os.path.dirname(os.path.abspath(__file__)), PACKAGE)
    module = sys.modules.get(PACKAGE)
    spec = getattr(module, "__spec__", None) if module is not None else find_spec(PACKAGE)
    locations = list(getattr(spec, "submodule_search_locations", None) or [])
    return bool(locations) and os.path.realpath(locations[0]) == os.path.realpath(expected)


def run_hook(module_name: str, module: object) -> None:
    """Run the hook of ``module_name`` on the imported ``module`` when our package is the one Python imports; a
    failure is reported under ``LCH_DEBUG``."""
    try:
        if not ours_is_importable():
            _debug(f"'{PACKAGE}' on sys.path is not lch-harness's: no hook for {module_name}")
            return
        from importlib import import_module

        hook_module, _, function = HOOKS[module_name].partition(":")
        getattr(import_module(hook_module), function)(module)
    except Exception as err:  # noqa: BLE001 (never break the importing program)
        _debug(f"the hook of {module_name} failed: {type(err).__name__}: {err}")


class _ThenHook:
    """The loader of a hooked module: runs the real loader, then the hook."""

    def __init__(self, loader: object, name: str) -> None:
        self._loader, self._name = loader, name

    def create_module(self, spec):  # noqa: ANN001, ANN201
        return self._loader.create_module(spec)

    def exec_module(self, module) -> None:  # noqa: ANN001
        module.__spec__.loader = module.__loader__ = self._loader  # no trace of ours left on the module
        self._loader.exec_module(module)
        run_hook(self._name, module)

    def __getattr__(self, name: str):  # noqa: ANN204 (resource readers and the like: the real loader's)
        return getattr(self._loader, name)


class LchLmEvalFinder:
    """Finds nothing itself: for a hooked module, the spec the other finders give, with :class:`_ThenHook`."""

    def __init__(self) -> None:
        self.waiting = set(HOOKS)

    def find_spec(self, name, path=None, target=None):  # noqa: ANN001, ANN201
        if name not in self.waiting:
            return None
        self.waiting.discard(name)
        if not self.waiting and self in sys.meta_path:
            sys.meta_path.remove(self)
        try:
            for finder in sys.meta_path:
                find = getattr(finder, "find_spec", None)
                if finder is self or find is None:
                    continue
                spec = find(name, path, target)
                if spec is not None:
                    if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                        spec.loader = _ThenHook(spec.loader, name)
                    return spec
        except Exception as err:  # noqa: BLE001
            _debug(f"finding {name} failed: {type(err).__name__}: {err}")
        return None


def install() -> None:
    """Put the finder at the front of ``sys.meta_path`` (the ``.pth`` line calls this at start-up), unless switched
    off; hooked modules that are already imported get their hooks at once."""
    try:
        if switched_off():
            return
        finder = LchLmEvalFinder()
        for name in list(finder.waiting):
            if name in sys.modules:
                finder.waiting.discard(name)
                run_hook(name, sys.modules[name])
        if finder.waiting and not any(isinstance(f, LchLmEvalFinder) for f in sys.meta_path):
            sys.meta_path.insert(0, finder)
    except Exception as err:  # noqa: BLE001
        _debug(f"not installed: {type(err).__name__}: {err}")
