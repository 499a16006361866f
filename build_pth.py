"""Build step (setuptools ``build_py``, named in pyproject.toml's ``[tool.setuptools.cmdclass]``): ships
``lch_harness_lm_eval.pth`` at the top of site-packages, in wheels and in editable installs alike, so that plain
``lm_eval`` finds our models and tasks (lch_harness_lm_eval.py says what the line does and when it retires).

setuptools offers no option for a top-level ``.pth``: a regular build writes it beside the packages in
``build_lib``; an editable build (``pip install -e``) has no ``build_lib`` in the wheel, so it goes where
setuptools' ``editable_wheel`` points ``install_lib``, the unpacked wheel's root. The file is named after the
``__editable__`` finder's ``.pth``, which site processes first (alphabetical order), so that the activation module
is importable; the line imports that module only (a top-level name of ours, never ``harness``, which a user may own).
"""

from __future__ import annotations

import os

from setuptools.command.build_py import build_py

PTH_NAME = "lch_harness_lm_eval.pth"
# one line, run by site at start-up; a failure must never stop the interpreter (LCH_DEBUG=1 says why)
PTH_LINE = (
    'import sys; exec("try:\\n import lch_harness_lm_eval as _lch\\n _lch.install()\\n'
    "except Exception as _e:\\n import os\\n if os.environ.get('LCH_DEBUG') == '1': "
    "print('lch: lm-eval plugin activation not installed:', repr(_e), file=sys.stderr)\")\n"
)


class BuildPyWithPth(build_py):
    """``build_py`` that also writes :data:`PTH_NAME`."""

    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            root = self.get_finalized_command("install").install_lib
        else:
            root = self.build_lib
        os.makedirs(root, exist_ok=True)
        with open(os.path.join(root, PTH_NAME), "w", encoding="utf-8") as handle:
            handle.write(PTH_LINE)

    def get_outputs(self, include_bytecode: bool = True) -> list[str]:
        outputs = super().get_outputs(include_bytecode)
        if not getattr(self, "editable_mode", False):
            outputs.append(os.path.join(self.build_lib, PTH_NAME))
        return outputs
