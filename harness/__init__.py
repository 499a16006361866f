"""lch-harness: long-context evaluation for lm-evaluation-harness.

Public API (torch is imported only when used): :func:`apply_pic` / :func:`remove_pic` / :func:`pic_settings` (Position
ID Compression on a loaded HF causal LM), :class:`Inference` (those settings as one value), :func:`tasks_path`.
"""

from __future__ import annotations

# nothing imported at module level: every lm-eval plugin hook imports the package, so it must cost next to nothing
__version__ = "0.1.0"
__all__ = ["Inference", "apply_pic", "remove_pic", "pic_settings", "tasks_path", "__version__"]


def __getattr__(name: str) -> object:
    if name in ("apply_pic", "remove_pic", "pic_settings"):
        from harness.pic import hf as pic

        return getattr(pic, name)
    if name == "Inference":
        from harness.pic.inference import Inference

        return Inference
    if name == "tasks_path":
        from harness.plugin.discovery import tasks_path

        return tasks_path
    raise AttributeError(f"module 'harness' has no attribute {name!r}")
