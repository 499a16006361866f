"""Plain ``lm_eval`` (the command, ``python -m lm_eval``, ``lm_eval.simple_evaluate``) finds this package's models
and tasks on lm-eval releases that do not load plugins yet.

lm-eval discovers model backends from ``lm_eval.models`` entry points (lm-evaluation-harness PR #4013, merged
after 0.4.13) and task folders from ``lm_eval.tasks`` entry points (PR #4015); 0.4.13 reads neither. Installing
this package puts ``lch_harness_lm_eval.pth`` into site-packages (``build_pth.py``, for wheel and editable
installs alike), whose one line calls :func:`install` at interpreter start. That only puts a finder at the front
of ``sys.meta_path``; nothing of lm-eval or of the harness is imported. When (and only when) the program later
imports one of the lm-eval modules in :data:`HOOKS`, the module runs as usual and then its hook runs:

* ``lm_eval.models``: the entry points of the ``lm_eval.models`` group are registered as #4013 does
  (:func:`harness.lmeval.plugin.after_models_import`);
* ``lm_eval.tasks.manager``: every ``TaskManager`` also indexes the folders of ``lm_eval.tasks`` entry points,
  as #4015 does (:func:`harness.lmeval.plugin.after_task_manager_import`);
* ``lm_eval.evaluator``: ``simple_evaluate`` runs our preflight before it loads a model, for runs of our models
  or tasks (a stock model asked for a task it cannot serve is refused in one line naming the models that can;
  :func:`harness.lmeval.preflight.after_evaluator_import`);
* ``lm_eval._cli.harness``: lm-eval's command line ends a run of our models or tasks that fails on user input
  with one ``lch: error:`` line and exit 2, as ``lch eval`` does (:func:`harness.cli.lm_eval_errors.after_cli_import`).

Why a ``.pth`` line and a meta path finder: lm-eval 0.4.13 has no hook a package can register into, and
``sitecustomize`` belongs to the user. This is the post-import hook pattern of coverage's subprocess support and
OpenTelemetry's auto-instrumentation. Its cost at start-up is importing this module (measured in
docs/ARCHITECTURE.md, "Plain lm_eval"); after each hooked module is imported, the finder leaves ``sys.meta_path``.

It never breaks interpreter start-up or an unrelated program: every failure here or in a hook is swallowed and
reported only under ``LCH_DEBUG=1``; the preflight and the error lines act only on runs of our models or tasks.
``LCH_LM_EVAL_PLUGIN=0`` switches it off. It retires itself: the discovery hooks do nothing on an lm-eval that
discovers plugins itself (they look for #4013's ``load_plugins`` and #4015's ``discover_plugin_task_paths``), and
once the package requires such an lm-eval, this module, the ``.pth`` and ``build_pth.py`` are deleted.
"""

from __future__ import annotations

import os
import sys

OPT_OUT = "LCH_LM_EVAL_PLUGIN"  # "0": no activation
HOOKS = {
    "lm_eval.models": "harness.lmeval.plugin:after_models_import",
    "lm_eval.tasks.manager": "harness.lmeval.plugin:after_task_manager_import",
    "lm_eval.evaluator": "harness.lmeval.preflight:after_evaluator_import",
    "lm_eval._cli.harness": "harness.cli.lm_eval_errors:after_cli_import",
}


def _debug(message: str) -> None:
    if os.environ.get("LCH_DEBUG") == "1":
        print(f"lch: lm-eval plugin activation: {message}", file=sys.stderr)


def run_hook(module_name: str, module: object) -> None:
    """Run the hook of ``module_name`` on the imported ``module``; a failure is reported under ``LCH_DEBUG``."""
    try:
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


class _Finder:
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
        if os.environ.get(OPT_OUT, "").strip().lower() in ("0", "off", "false", "no"):
            return
        finder = _Finder()
        for name in list(finder.waiting):
            if name in sys.modules:
                finder.waiting.discard(name)
                run_hook(name, sys.modules[name])
        if finder.waiting and not any(isinstance(f, _Finder) for f in sys.meta_path):
            sys.meta_path.insert(0, finder)
    except Exception as err:  # noqa: BLE001
        _debug(f"not installed: {type(err).__name__}: {err}")
