"""Resumable runs: with lm-eval's --use_cache, a killed run restarted with the same command re-does no
finished request of our request types (harness/engines/response_cache.py)."""

import glob
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from lm_eval.api.instance import Instance
from lm_eval.api.model import CachingLM

from harness.engines.response_cache import OWNER_KEY

BIN = Path(sys.executable).parent


def _requests(n: int) -> list:
    prompts = [f"Write about topic number {i}: " + "a b c " * (3 + i) for i in range(n)]
    return [Instance(request_type="generate_long", doc={}, arguments=(p, {"max_gen_toks": 12}), idx=0) for p in prompts]


def test_killed_generation_resumes_without_regenerating(tiny_model_dir, tmp_path):
    """The model is 'killed' (an exception from generate) after its second request; a new process over the
    same cache runs generate only for the requests that had not finished, and the answers equal a plain run."""
    from harness.engines.hf_pic import HFPicLM

    lm = HFPicLM(
        pretrained=str(tiny_model_dir), device="cpu", dtype="float32", batch_size=1, pic="dynamic", pic_ratio=2
    )
    reference = lm.generate_long(_requests(4))  # no cache: a plain call
    calls = []
    generate = lm.model.generate

    def dying(*args, **kwargs):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt  # killed while generating the third
        return generate(*args, **kwargs)

    lm.model.generate = dying
    db = tmp_path / "cache_rank0.db"
    with pytest.raises(KeyboardInterrupt):
        CachingLM(lm, str(db)).generate_long(_requests(4))
    lm.model.generate = generate

    calls.clear()
    counting = lambda *a, **k: calls.append(1) or generate(*a, **k)  # noqa: E731
    lm.model.generate = counting
    resumed = CachingLM(lm, str(db)).generate_long(_requests(4))
    assert len(calls) == 2  # 4 requests, 2 finished before the kill
    assert resumed == reference
    calls.clear()
    assert CachingLM(lm, str(db)).generate_long(_requests(4)) == reference and calls == []


def test_sampled_generations_are_not_cached(tiny_model_dir, tmp_path):
    from harness.engines.hf_pic import HFPicLM

    lm = HFPicLM(pretrained=str(tiny_model_dir), device="cpu", dtype="float32", batch_size=2)
    sampled = [
        Instance(
            request_type="generate_long",
            doc={},
            arguments=("Hello there", {"max_gen_toks": 4, "do_sample": True}),
            idx=0,
        )
    ]
    CachingLM(lm, str(tmp_path / "c.db")).generate_long(sampled)
    with sqlite3.connect(tmp_path / "c.db") as con:
        assert con.execute("select count(*) from unnamed where key != ?", (OWNER_KEY,)).fetchone()[0] == 0


def test_a_response_cache_holds_one_runs_responses(tiny_model_dir, tmp_path, capsys):
    """lm-eval keys a response by its request alone: a second run of another inference, dtype, tokenizer (or chat
    template), answer-changing model arg or model folder content on the same database is refused in one line before
    any response is read; the same run reuses it; a database of an older lch (responses, no owner) is claimed with a
    warning, and one whose owner record lacks fields a newer lch records is refused."""
    import shutil

    from harness.core.errors import UsageError
    from harness.engines.hf_pic import HFPicLM

    db = str(tmp_path / "c.db")
    plain = HFPicLM(pretrained=str(tiny_model_dir), device="cpu", dtype="float32", batch_size=1)
    first = CachingLM(plain, db).generate_long(_requests(1))
    tokenizer = tmp_path / "tokenizer"  # the model's tokenizer files, with a chat template: another tokenizer
    tokenizer.mkdir()
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        if (tiny_model_dir / name).is_file():
            shutil.copy(tiny_model_dir / name, tokenizer / name)
    settings = json.loads((tokenizer / "tokenizer_config.json").read_text())
    settings["chat_template"] = "{% for m in messages %}{{ m['content'] }}{% endfor %}"
    (tokenizer / "tokenizer_config.json").write_text(json.dumps(settings))
    for other, words in (
        (dict(pic="naive", pic_ratio=2), "(inference standard inference (this run: Naive PIC (s_cr 2)))"),
        (dict(dtype="bfloat16"), "(dtype float32 (this run: bfloat16))"),
        (dict(tokenizer=str(tokenizer)), "(tokenizer sha256:"),
        (dict(max_length=64), "(settings none (this run: max_length=64))"),
    ):
        lm = HFPicLM(pretrained=str(tiny_model_dir), device="cpu", **{"dtype": "float32", **other}, batch_size=1)
        with pytest.raises(UsageError) as err:
            CachingLM(lm, db)
        assert str(err.value).startswith(f"--use_cache {db} holds the responses of another run (")
        assert words in str(err.value) and "\n" not in str(err.value)
    copy = tmp_path / "model"  # the same files elsewhere: the same model
    shutil.copytree(tiny_model_dir, copy)
    same = HFPicLM(pretrained=str(copy), device="cpu", dtype="float32", batch_size=1)
    same.model.generate = None  # answers must come from the cache
    assert CachingLM(same, db).generate_long(_requests(1)) == first
    config = json.loads((copy / "config.json").read_text())  # rebuilt at the same path: another model
    (copy / "config.json").write_text(json.dumps({**config, "rms_norm_eps": 1e-5}))
    with pytest.raises(UsageError, match="holds the responses of another run \\(model sha256:"):
        CachingLM(HFPicLM(pretrained=str(copy), device="cpu", dtype="float32", batch_size=1), db)
    with sqlite3.connect(db) as con:  # an older lch's database: responses, no owner
        con.execute("delete from unnamed where key = ?", (OWNER_KEY,))
    capsys.readouterr()
    CachingLM(plain, db)
    assert "carry no record of the model that computed them" in capsys.readouterr().err
    CachingLM(plain, db)  # claimed now: the same run again is silent
    assert "no record" not in capsys.readouterr().err
    from sqlitedict import SqliteDict

    with SqliteDict(db, autocommit=True) as stored:  # an owner recorded before the tokenizer was part of it
        stored[OWNER_KEY] = {k: v for k, v in stored[OWNER_KEY].items() if k not in ("tokenizer", "settings")}
    with pytest.raises(UsageError, match=r"tokenizer not recorded \(an older lch\) \(this run: sha256:"):
        CachingLM(plain, db)


def test_token_logprobs_and_lsm_come_from_the_cache(tiny_model_dir, tmp_path):
    from harness.engines.hf_pic import HFPicLM

    lm = HFPicLM(pretrained=str(tiny_model_dir), device="cpu", dtype="float32", batch_size=2)
    text = "one two three four five six seven eight nine ten " * 8
    reqs = {
        "token_logprobs": [Instance(request_type="token_logprobs", doc={}, arguments=(text, {}), idx=0)],
        "lsm": [Instance(request_type="lsm", doc={}, arguments=(text, {"context_length": 16, "n_samples": 2}), idx=0)],
    }
    first = {k: getattr(CachingLM(lm, str(tmp_path / "c.db")), k)(v) for k, v in reqs.items()}
    lm.model.forward = None  # any forward now fails: the answers must come from the cache
    again = {k: getattr(CachingLM(lm, str(tmp_path / "c.db")), k)(v) for k, v in reqs.items()}
    assert again == first


def test_lch_eval_killed_and_restarted(tiny_model_dir, tmp_path):
    """A real `lch eval` of a generation task, SIGKILLed once some generations are stored, restarted with
    the same command: it reports the stored ones as cached and generates only the rest."""
    db_prefix = tmp_path / "cache" / "lbw"
    data = tmp_path / "lbw.jsonl"  # LongBench-Write rows (the task keeps required lengths > 2000)
    data.write_text(
        "".join(
            json.dumps({"prompt": f"Write a 3000-word report on topic {i}.", "type": "Report", "length": 3000}) + "\n"
            for i in range(4)
        )
    )
    meta = {"longbench_write_data": str(data), "limit_docs": 4, "max_gen_toks": 48}
    cmd = [
        str(BIN / "lch"),
        "eval",
        "--model",
        "hf-pic",
        "--model_args",
        f"pretrained={tiny_model_dir},dtype=float32",
        "--device",
        "cpu",
        "--batch_size",
        "1",
        "--tasks",
        "longbench_write",
        "--use_cache",
        str(db_prefix),
        "--metadata",
        json.dumps(meta),
        "--output_path",
        str(tmp_path / "out"),
    ]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, start_new_session=True)

    def stored() -> int:
        files = glob.glob(str(db_prefix) + "*.db")
        if not files:
            return 0
        try:
            with sqlite3.connect(files[0]) as con:
                return con.execute("select count(*) from unnamed where key != ?", (OWNER_KEY,)).fetchone()[0]
        except sqlite3.Error:  # table not created yet
            return 0

    deadline = time.time() + 300
    while stored() < 1 and proc.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    done_before = stored()
    assert 1 <= done_before < 4, f"kill came too late or too early: {done_before} stored"
    rerun = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert f"generate_long: {done_before} of 4 responses from the response cache" in rerun.stderr
    assert stored() == 4
    results = json.loads(
        Path(glob.glob(str(tmp_path / "out" / "**" / "results_*.json"), recursive=True)[0]).read_text()
    )
    assert results["results"]["longbench_write"]["n_total,none"] == 4
