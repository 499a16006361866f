"""lm-eval finds our models and tasks through entry points, as its plugin loading resolves them; the rules of
lm-evaluation-harness PR #4013 (models) and PR #4015 (task folders) are restated here and applied to our declared
entry points, independently of harness/plugin/discovery.py, which backports the same discovery onto lm-eval 0.4.13.
Plain lm-eval then needs no flag: the command, ``python -m lm_eval`` and ``simple_evaluate`` in fresh
interpreters (the activation of lch_harness_lm_eval.py, installed by README's install command)."""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib
from lm_eval.api import registry
from lm_eval.api.model import LM
from lm_eval.models.huggingface import HFLM

from harness.engines.registry import model_names
from harness.plugin import discovery as plugin
from harness.plugin.activation import activate
from harness.plugin.task_index import task_folder

ROOT = Path(__file__).resolve().parents[2]


def our_task_names(tasks_dir: str) -> set[str]:
    """The task and group names our folder's YAMLs define, read by our own walk of the folder (not lm-eval's index)."""
    folder = task_folder(tasks_dir)
    return set(folder.tasks) | set(folder.groups)


BIN = Path(sys.executable).parent


def _declared(group: str) -> dict[str, str]:
    """``{name: value}`` of the installed distribution's entry points of ``group`` (what lm-eval reads), which
    must be pyproject.toml's table."""
    installed = {
        ep.name: ep.value for ep in importlib.metadata.distribution("lch-harness").entry_points if ep.group == group
    }
    written = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"][group]
    assert installed == written, "reinstall the package: its installed entry points are not pyproject.toml's"
    return installed


def test_model_entry_points_land_on_our_decorated_classes():
    """#4013: the registry alias is the entry point's name; loading the value gives the object it names; a class
    that also registers itself with @register_model under that alias is accepted only when the value is exactly
    ``<module>:<class name>`` of that class (else lm-eval refuses the collision)."""
    declared = _declared("lm_eval.models")
    assert list(declared) == model_names() and set(declared) == {"hf-pic", "vllm-pic", "compressor"}
    for name, value in declared.items():
        module, _, attr = value.partition(":")
        cls = getattr(importlib.import_module(module), attr)
        assert isinstance(cls, type) and issubclass(cls, LM)
        assert f"{cls.__module__}:{cls.__name__}" == value
        assert registry.get_model(name) is cls  # its decorator registered it under the entry point's name


def test_aggregation_entry_points_load_to_our_aggregations():
    """#4014 (aggregations: the alias is the entry point's name, loading gives the function) on pooled items:
    two documents of (nll sum, tokens) (2.0, 4) and (6.0, 4): exp(8 / 8)."""
    import math

    declared = _declared("lm_eval.aggregations")
    assert sorted(declared) == ["lch_pooled_mean", "lch_token_perplexity", "lch_total"]
    loaded = {
        name: importlib.metadata.EntryPoint(name, value, "lm_eval.aggregations").load()
        for name, value in declared.items()
    }
    assert loaded["lch_token_perplexity"]([(2.0, 4), (6.0, 4)]) == pytest.approx(math.e)
    assert loaded["lch_pooled_mean"]([(3.0, 2), (5.0, 2)]) == 2.0 and loaded["lch_total"]([1, 2, 3]) == 6


def _resolve_as_pr_4015(value: str) -> Path:
    """#4015: the value's part before ':' is a module name; a package resolves to its folder, a plain module to
    the folder of its file."""
    spec = importlib.util.find_spec(value.split(":", 1)[0].strip())
    if spec.submodule_search_locations:
        return Path(list(spec.submodule_search_locations)[0]).resolve()
    return Path(spec.origin).resolve().parent


def test_task_entry_point_lands_on_the_folder_of_every_task_yaml():
    """#4015 indexes every ``*.yaml`` below the resolved folder: ours must be exactly our task YAMLs (the old
    value, a callable in harness/lmeval, resolved to a folder without any). The backport resolves the same."""
    (value,) = _declared("lm_eval.tasks").values()
    folder = _resolve_as_pr_4015(value)
    ours = sorted((ROOT / "harness" / "tasks").rglob("*.yaml"))
    assert ours and sorted(folder.rglob("*.yaml")) == [p.resolve() for p in ours]
    assert plugin.resolve_task_dir(value) == folder
    assert list(_resolve_as_pr_4015("harness.plugin.discovery:tasks_path").rglob("*.yaml")) == []


@pytest.fixture
def fresh_registry(monkeypatch):
    """lm-eval's model registry as lm-eval 0.4.13 fills it (built-ins, no plugins), restored afterwards."""
    import lm_eval.models  # noqa: F401

    builtins = {k: v for k, v in registry.model_registry._objs.items() if k not in model_names()}
    monkeypatch.setattr(registry.model_registry, "_objs", builtins)
    monkeypatch.setattr(registry.model_registry, plugin._MARK, False, raising=False)
    return registry.model_registry


def _fake_entry_points(monkeypatch, points: dict[str, list[tuple[str, str]]]) -> None:
    eps = {
        group: [importlib.metadata.EntryPoint(name, value, group) for name, value in items]
        for group, items in points.items()
    }
    monkeypatch.setattr(plugin.metadata, "entry_points", lambda group: eps.get(group, []))


def test_the_backport_registers_model_plugins_lazily_and_keeps_builtins(fresh_registry, monkeypatch):
    _fake_entry_points(
        monkeypatch,
        {
            "lm_eval.models": [
                ("hf", "some_pkg:NotHF"),  # a built-in name: kept
                ("fake-lm", "lm_eval.models.dummy:DummyLM"),  # another package's model
                ("fake-lm", "other_pkg:Other"),  # the same name twice: the first wins
                ("broken", "no_such_module:Model"),  # registered; fails only when asked for
                *_declared("lm_eval.models").items(),
            ]
        },
    )
    assert plugin.after_models_import() == ["fake-lm", "broken", *model_names()]
    assert plugin.after_models_import() == []  # once per process
    from lm_eval.models.dummy import DummyLM

    assert registry.get_model("hf") is HFLM and registry.get_model("fake-lm") is DummyLM
    from harness.engines.hf_pic import HFPicLM

    assert registry.get_model("hf-pic") is HFPicLM  # the placeholder upgraded to the decorated class
    with pytest.raises(ModuleNotFoundError):
        registry.get_model("broken")


def test_the_backport_adds_task_plugins_between_lm_evals_tasks_and_include_path(monkeypatch, tmp_path, caplog):
    """The index lm-eval builds from its own folder then ``include_path`` gets the plugin folders right after its own
    (ours; a broken entry point of another package skipped with a warning; a foreign one whose folder holds no YAML
    adds nothing), so ``include_path`` still overrides a plugin's task of the same name. Shown on a stand-in of
    lm-eval's manager module whose own folder is a small one (lm-eval's real one holds 14,000 tasks)."""
    import types

    from lm_eval.tasks import _index

    builtin = tmp_path / "lm_eval_tasks"
    builtin.mkdir()
    (builtin / "b.yaml").write_text("task: builtin_task\ndataset_path: json\noutput_type: loglikelihood\n")
    manager = types.SimpleNamespace(TaskIndex=_index.TaskIndex, __file__=str(builtin / "manager.py"))
    _fake_entry_points(
        monkeypatch,
        {"lm_eval.tasks": [("broken", "no_such_package.tasks"), ("foreign", "json"), ("lch", "harness.tasks")]},
    )
    plugin.plugin_task_folders.cache_clear()
    try:
        with caplog.at_level(logging.WARNING, logger=plugin.__name__):
            assert plugin.after_task_manager_import(manager) and not plugin.after_task_manager_import(manager)
            index = manager.TaskIndex.build([builtin])
        assert "Failed to resolve task plugin 'broken' (no_such_package.tasks)" in caplog.text
        assert set(index) == {"builtin_task"} | our_task_names(plugin.tasks_path())
        mine = tmp_path / "mine"
        mine.mkdir()
        (mine / "ppl.yaml").write_text(
            "task: ppl_govreport\ndataset_path: json\noutput_type: loglikelihood_rolling\n"
            "test_split: test\ndoc_to_text: ''\ndoc_to_target: '{{text}}'\n"
        )
        assert manager.TaskIndex.build([builtin, mine])["ppl_govreport"].yaml_path == mine / "ppl.yaml"
        # without lm-eval's own folder (TaskManager(include_defaults=False)) exactly the paths given are indexed
        assert set(manager.TaskIndex.build([mine])) == {"ppl_govreport"}
    finally:
        plugin.plugin_task_folders.cache_clear()


def test_a_run_of_only_plugin_tasks_indexes_the_plugin_folders_and_include_path_only(monkeypatch, tmp_path):
    """Under ``plugin_tasks_only`` the index lm-eval would build from its own folder then ``include_path`` leaves its
    own folder out and keeps the rest in the same order: our tasks, then the user's (which still win a name of
    ours). On the same stand-in of lm-eval's manager module as above."""
    import types

    from lm_eval.tasks import _index

    builtin, mine = tmp_path / "lm_eval_tasks", tmp_path / "mine"
    for folder in (builtin, mine):
        folder.mkdir()
    (builtin / "b.yaml").write_text("task: builtin_task\ndataset_path: json\noutput_type: loglikelihood\n")
    (mine / "ppl.yaml").write_text("task: ppl_govreport\ndataset_path: json\noutput_type: loglikelihood_rolling\n")
    manager = types.SimpleNamespace(TaskIndex=_index.TaskIndex, __file__=str(builtin / "manager.py"))
    _fake_entry_points(monkeypatch, {"lm_eval.tasks": [("lch", "harness.tasks")]})
    plugin.plugin_task_folders.cache_clear()
    try:
        assert plugin.after_task_manager_import(manager)
        with plugin.plugin_tasks_only():
            assert set(manager.TaskIndex.build([builtin])) == our_task_names(plugin.tasks_path())
            index = manager.TaskIndex.build([builtin, mine])
            assert set(manager.TaskIndex.build([mine])) == {"ppl_govreport"}  # no lm-eval folder: paths as given
        assert set(index) == our_task_names(plugin.tasks_path())
        assert index["ppl_govreport"].yaml_path == mine / "ppl.yaml"
        assert set(manager.TaskIndex.build([builtin])) == {"builtin_task"} | our_task_names(plugin.tasks_path())
    finally:
        plugin.plugin_task_folders.cache_clear()


def test_which_runs_index_only_the_plugin_folders(tmp_path):
    """A run whose every task (a name, or a group of ours) resolves to our folder indexes the plugin folders only;
    one name of lm-eval's, of nobody's, an inline config, a name of ours that ``include_path`` redefines, or a task
    manager of the caller's own, and lm-eval's whole index is built as it would be without us."""
    import contextlib

    from harness.plugin.discovery import task_index_for

    (tmp_path / "mine.yaml").write_text("task: ppl_govreport\ndataset_path: json\noutput_type: loglikelihood\n")
    scoped = type(plugin.plugin_tasks_only())
    assert isinstance(task_index_for(["longppl_govreport", "lch_ruler", "mrqa"]), scoped)
    assert isinstance(task_index_for(["lsm_govreport"], str(tmp_path)), scoped)
    whole = [
        (["longppl_govreport", "hellaswag"], None),
        (["ppl_govreprot"], None),
        ([{"task": "ppl_govreport"}], None),
        (["ppl_govreport"], str(tmp_path)),
        ([], None),
    ]
    for tasks, include_path in whole:
        assert isinstance(task_index_for(tasks, include_path), contextlib.nullcontext), tasks
    assert isinstance(task_index_for(["ppl_govreport"], task_manager=object()), contextlib.nullcontext)
    # sound only while each group of ours lists names of our folder alone (lm-eval's would be missing from the index)
    folder = task_folder(plugin.tasks_path())
    assert folder.groups and all(m in folder.tasks or m in folder.groups for ms in folder.groups.values() for m in ms)


def test_lch_eval_and_plain_lm_eval_run_only_our_tasks_under_the_plugin_scope(monkeypatch, tiny_model_dir, corpus):
    """The scope is on while lm-eval's ``run`` command executes a run of only our tasks (where its task manager is
    built), through ``lch eval`` and through plain ``lm_eval``'s command line with the hook, and off for a run that
    names one of lm-eval's."""
    import lm_eval._cli.harness
    from lm_eval.__main__ import cli_evaluate
    from lm_eval._cli.run import Run

    from harness.cli.evaluate import run_eval
    from harness.plugin.command_line import after_cli_import

    seen: list[bool] = []
    monkeypatch.setattr(Run, "_execute", staticmethod(lambda args: seen.append(plugin._PLUGINS_ONLY.get())))
    after_cli_import(lm_eval._cli.harness)  # what the start-up activation does for plain lm_eval
    metadata = json.dumps({"data_files": str(corpus), "min_tokens": 1, "num_docs": 3})
    for tasks in ("ppl_govreport,lsm_govreport", "ppl_govreport,hellaswag"):
        argv = [
            "--model",
            "hf-pic",
            "--model_args",
            f"pretrained={tiny_model_dir}",
            "--device",
            "cpu",
            "--tasks",
            tasks,
            "--metadata",
            metadata,
        ]
        run_eval(argv)
        monkeypatch.setattr(sys, "argv", ["lm_eval", *argv])
        cli_evaluate()
    assert seen == [True, True, False, False] and not plugin._PLUGINS_ONLY.get()


def test_a_task_manager_without_defaults_indexes_only_the_paths_given(tmp_path):
    """lm-eval's own rule for ``TaskManager(include_defaults=False, include_path=...)``: only the tasks of that path
    (lm-eval's tests/test_task_manager.py holds it; our plugin tasks stay out of it)."""
    from lm_eval.tasks import TaskManager

    activate()
    (tmp_path / "custom.yaml").write_text("task: custom_task\ndataset_path: json\noutput_type: loglikelihood\n")
    manager = TaskManager(include_defaults=False, include_path=str(tmp_path))
    assert manager.all_tasks == ["custom_task"]
    assert manager.include_path == str(tmp_path)


# ------------------------------------------------------------------ plain lm-eval, fresh interpreters


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    from harness.data.synthetic import synthetic_reports

    path = tmp_path_factory.mktemp("plain") / "reports.jsonl"
    path.write_text("".join(json.dumps({"report": t}) + "\n" for t in synthetic_reports(3, 300, seed=1)))
    return path


def _plain(args: list[str], env: dict | None = None, timeout: int = 400) -> subprocess.CompletedProcess:
    return subprocess.run(
        args, capture_output=True, text=True, timeout=timeout, env={**os.environ, "HF_HUB_OFFLINE": "1", **(env or {})}
    )


def _run_args(tiny_model_dir, corpus, out: Path) -> list[str]:
    meta = {
        "data_files": str(corpus),
        "min_tokens": 1,
        "num_docs": 3,
        "evaluator": str(tiny_model_dir),
        "trunc_len": 64,
        "sliding_window": 32,
    }
    return [
        "--model",
        "hf-pic",
        "--model_args",
        f"pretrained={tiny_model_dir}",
        "--device",
        "cpu",
        "--tasks",
        "ppl_govreport,longppl_govreport",
        "--metadata",
        json.dumps(meta),
        "--output_path",
        str(out),
    ]


def _results(out: Path) -> dict:
    (path,) = out.rglob("results_*.json")
    return json.loads(path.read_text())["results"]


@pytest.mark.parametrize("command", ["lm_eval", "python -m lm_eval"])
def test_plain_lm_eval_runs_our_model_on_our_tasks(command, tiny_model_dir, corpus, tmp_path):
    """README's install command, then lm-eval's own command line with no flag of ours: exit 0 with results."""
    program = [str(BIN / "lm_eval")] if command == "lm_eval" else [sys.executable, "-m", "lm_eval"]
    done = _plain([*program, *_run_args(tiny_model_dir, corpus, tmp_path / "out")])
    assert done.returncode == 0, done.stderr[-3000:]
    results = _results(tmp_path / "out")
    assert results["ppl_govreport"]["n_docs,none"] == 3 and results["longppl_govreport"]["n_tokens,none"] > 0


SIMPLE_EVALUATE = """
import json, sys
import lm_eval
results = lm_eval.simple_evaluate(model="hf-pic", model_args=f"pretrained={sys.argv[1]}", device="cpu",
                                  tasks=["ppl_govreport"], metadata={"data_files": sys.argv[2], "min_tokens": 1,
                                                                              "num_docs": 3})
print(json.dumps(results["results"]["ppl_govreport"]["n_docs,none"]))
try:
    lm_eval.simple_evaluate(model="hf", model_args=f"pretrained={sys.argv[1]}", device="cpu", tasks=["ppl_govreport"])
except Exception as err:
    print(type(err).__name__, err)
"""


def test_simple_evaluate_from_python_finds_our_model_and_refuses_a_stock_one(tiny_model_dir, corpus):
    done = _plain([sys.executable, "-c", SIMPLE_EVALUATE, str(tiny_model_dir), str(corpus)])
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-2:] == [
        "3",
        "UsageError ppl_govreport sends token_logprobs requests, which the hf model does not serve: use --model "
        "hf-pic or --model vllm-pic",
    ]


def test_a_run_checks_its_model_args_once_and_a_direct_construction_checks_them(monkeypatch, tiny_model_dir, corpus):
    """The door checks hf-pic's model args as lm-eval builds the model (``--device`` added), and the constructor
    takes that result in the run; ``HFPicLM(...)`` built directly checks its args itself."""
    import dataclasses

    import lm_eval

    from harness.core.errors import UsageError
    from harness.engines import registry as ours
    from harness.engines.hf_pic import HFPicLM

    activate()
    entry = ours.model_entry("hf-pic")
    assert entry is not None
    checked: list[dict] = []

    def counted(args: dict) -> object:
        checked.append(dict(args))
        return entry.preflight(args)

    monkeypatch.setitem(ours._REGISTERED, "hf-pic", dataclasses.replace(entry, preflight=counted))
    metadata = {"data_files": str(corpus), "min_tokens": 1, "num_docs": 1}
    results = lm_eval.simple_evaluate(
        model="hf-pic",
        model_args=f"pretrained={tiny_model_dir}",
        device="cpu",
        tasks=["ppl_govreport"],
        metadata=metadata,
    )
    assert results["results"]["ppl_govreport"]["n_docs,none"] == 1
    assert checked == [{"pretrained": str(tiny_model_dir), "device": "cpu"}]
    HFPicLM(pretrained=str(tiny_model_dir), device="cpu")
    assert len(checked) == 2
    with pytest.raises(UsageError, match=r"^hf-pic: unknown model arg pic_ration; did you mean pic_ratio\?"):
        HFPicLM(pretrained=str(tiny_model_dir), device="cpu", pic_ration=2)


def test_a_stock_model_on_our_task_is_one_line_before_it_loads(tiny_model_dir):
    done = _plain(
        [
            str(BIN / "lm_eval"),
            "--model",
            "hf",
            "--model_args",
            f"pretrained={tiny_model_dir}",
            "--device",
            "cpu",
            "--tasks",
            "longppl_govreport",
        ]
    )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1] == (
        "lch: error: longppl_govreport sends token_logprobs requests, which the hf model does not serve: use --model "
        "hf-pic or --model vllm-pic"
    )
    assert "Traceback" not in done.stderr and "Loading weights" not in done.stderr  # refused before loading


def test_plain_lm_eval_names_the_closest_task_for_a_typo_in_a_run_of_ours(tiny_model_dir):
    """A run of our model with a task nobody defines: lm-eval's "Tasks not found" as one line, with the closest name
    of lm-eval's whole index (ours among them)."""
    done = _plain(
        [
            str(BIN / "lm_eval"),
            "--model",
            "hf-pic",
            "--model_args",
            f"pretrained={tiny_model_dir}",
            "--tasks",
            "ppl_govreprot",
        ]
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines()[-1] == (
        "lch: error: Tasks not found: ppl_govreprot; did you mean "
        "ppl_govreport? (`lch eval --tasks list` lists every task)"
    )


def test_the_activation_is_installed_switched_off_and_inert_elsewhere():
    """At start-up the activation only puts its finder on sys.meta_path (no lm-eval, no harness module, only the
    activation module of its own name imported); LCH_LM_EVAL_PLUGIN=0 switches it off; once lm-eval's registry is
    imported our models are registered (or, switched off, not)."""
    probe = (
        "import sys; finders = [type(f).__name__ for f in sys.meta_path]; "
        "loaded = sorted(m for m in sys.modules if m.startswith(('lm_eval', 'harness', 'torch', 'lch'))); "
        "import lm_eval.api.registry as r, lm_eval.models; print(finders[0], loaded, 'hf-pic' in r.model_registry)"
    )
    on = _plain([sys.executable, "-c", probe])
    assert on.stdout.split() == ["LchLmEvalFinder", "['lch_harness_lm_eval']", "True"], on.stderr
    off = _plain([sys.executable, "-c", probe], env={"LCH_LM_EVAL_PLUGIN": "0"})
    assert off.stdout.split()[-1] == "False" and off.stdout.split()[0] != "LchLmEvalFinder", off.stderr


def test_a_run_is_ours_by_lm_evals_task_index_not_by_how_its_names_look(tmp_path):
    """Ours: a name of our folder that no ``include_path`` YAML redefines, or (with the run's task manager) a name
    whose indexed YAML is in our folder. Not ours: a user's ``lch_...`` / ``ppl_...`` task, a YAML path, a typo of
    anyone's, lm-eval's own LongBench task that shares our first word."""
    from argparse import Namespace

    from lm_eval.tasks._index import TaskIndex

    from harness.plugin.command_line import front
    from harness.plugin.discovery import our_tasks
    from harness.plugin.preflight import admit

    assert our_tasks(["longppl_govreport", "lch_ruler", "hellaswag", "lch_ruler_niah_single_1"]) == [
        "longppl_govreport",
        "lch_ruler",
        "lch_ruler_niah_single_1",
    ]
    assert our_tasks(["ppl_govreprot", "lch_my_suite", "longbench_narrativeqa", "ppl_local.yaml"]) == []
    (tmp_path / "mine.yaml").write_text(
        "task: ppl_govreport  # my own\ndataset_path: json\noutput_type: loglikelihood_rolling\n"
    )
    assert our_tasks(["ppl_govreport", "lsm_govreport"], str(tmp_path)) == ["lsm_govreport"]  # the user's wins
    assert our_tasks(["ppl_govreport"], [str(tmp_path)]) == []
    index = TaskIndex.build([Path(plugin.tasks_path()), tmp_path])
    manager = type("Manager", (), {"task_index": index})()
    assert our_tasks(["ppl_govreport", "lsm_govreport", "nobody"], task_manager=manager) == ["lsm_govreport"]

    def command_line(model: str, tasks: list[str]) -> Namespace:
        return Namespace(command="run", model=model, tasks=tasks, include_path=None, config=None, model_args=None)

    assert front(command_line("hf-pic", ["hellaswag"])) is not None
    assert front(command_line("hf", ["hellaswag", "lch_my_suite"])) is None
    assert not admit({"model": "hf", "tasks": [{"task": "ppl_govreport"}]})  # an inline config is lm-eval's to load


def test_our_runs_outside_a_git_checkout_print_no_git_error_and_others_keep_lm_evals_lookup(tmp_path):
    """lm-eval records the git commit of the working folder; outside a checkout its lookup prints git's 'fatal: not a
    git repository'. During a run of ours the same lookup is quiet (None, nothing on stderr); outside our runs the
    evaluator keeps lm-eval's own function."""
    code = (
        "import lm_eval.evaluator as e, lm_eval.loggers.utils as u; from harness.plugin.activation import activate; "
        "from harness.plugin.preflight import quiet_git_lookup; activate(); "
        "print(e.get_git_commit_hash is u.get_git_commit_hash)\n"
        "with quiet_git_lookup(e): print(repr(e.get_git_commit_hash()))\n"
        "print(e.get_git_commit_hash is u.get_git_commit_hash)"
    )
    for switch in ("1", "0"):  # with the start-up activation, and with lch's own activation only
        done = subprocess.run(
            [sys.executable, "-c", code],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "GIT_CEILING_DIRECTORIES": str(tmp_path.parent), "LCH_LM_EVAL_PLUGIN": switch},
        )
        assert done.returncode == 0 and done.stdout.split() == ["True", "None", "True"], done.stderr
        assert "not a git repository" not in done.stderr


def test_lm_evals_private_modules_are_read_behind_a_check(monkeypatch):
    """A release without ``lm_eval.tasks._index`` indexes our folder through a ``TaskManager`` told to index nothing
    else, with the same names; one without ``lm_eval._cli`` refuses ``lch eval`` in one line."""
    from harness.core.errors import UsageError

    names = set(plugin.index_folders([plugin.tasks_path()]))
    groups = {n for n, e in plugin.index_folders([plugin.tasks_path()]).items() if plugin.group_config(e) is not None}
    assert {"ppl_govreport", "longppl_govreport"} <= names and "lch_ruler" in groups and "ppl_govreport" not in groups
    monkeypatch.setitem(sys.modules, "lm_eval.tasks._index", None)  # import of it raises ImportError
    assert set(plugin.index_folders([plugin.tasks_path()])) == names
    monkeypatch.setitem(sys.modules, "lm_eval._cli", None)
    with pytest.raises(
        UsageError,
        match=r"^this lm-eval \(.*\) has no `lm-eval run` command line; install "
        r"lm-eval>=0.4.13$",
    ):
        plugin.harness_cli()


def test_what_the_0_5_line_makes_private_is_read_where_the_public_name_is_gone(monkeypatch):
    """The 0.5 line keeps a task manager's index as ``_task_index`` and the evaluator's sample size as
    ``_get_sample_size`` (``tests/plugin/test_lm_eval_05.py`` runs it); a release with the public names is read by
    them."""
    import types

    import lm_eval.evaluator_utils as utils

    index = {"ppl_govreport": object()}
    assert plugin.manager_index(types.SimpleNamespace(task_index=index)) is index
    assert plugin.manager_index(types.SimpleNamespace(_task_index=index)) is index
    assert plugin.manager_index(types.SimpleNamespace()) is None and plugin.manager_index(None) is None
    task = types.SimpleNamespace(eval_docs=list(range(10)))
    assert [plugin.sample_size(task, limit) for limit in (None, 4, 0.25)] == [None, 4, 3]  # a fraction: rounded up
    monkeypatch.delattr(utils, "get_sample_size")
    monkeypatch.setattr(utils, "_get_sample_size", lambda task, limit: ("private", limit), raising=False)
    assert plugin.sample_size(task, 0.25) == ("private", 0.25)
