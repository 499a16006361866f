"""Judges: parsers, prompts, and the async client against a real local server, with and without faults."""

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.data.documents import MissingDataError
from harness.judges.client import JudgeCache, JudgeClient, JudgeSettings
from harness.judges.parsing import parse_longbench_write_judgement
from harness.judges.prompts import helloeval_messages, load_longbench_write_prompt, longbench_write_messages
from tests.conftest import SHARED_DATA
from tests.judge_servers import FaultyProxy, ServedModel, judge_model

DIMS = {"Relevance": 4, "Accuracy": 3, "Coherence": 5, "Clarity": 4, "Breadth and Depth": 2, "Reading Experience": 3}


def test_longbench_write_parser():
    official = "Here is my evaluation:\n" + json.dumps(DIMS) + "\nDone."
    assert parse_longbench_write_judgement(official) == {k: float(v) for k, v in DIMS.items()}
    nested_text = (
        "```json\n{'Relevance': 4, 'Accuracy': 3, 'Coherence': 5, 'Clarity': 4, "
        "'Breadth and Depth': 2, 'Reading Experience': 3}\n```"
    )
    assert parse_longbench_write_judgement(nested_text)["Coherence"] == 5.0
    prose = "Relevance: 4\nAccuracy - 3\nCoherence: 5\nClarity: 4\nBreadth and Depth: 2\nReading Experience: 3"
    assert parse_longbench_write_judgement(prose)["Accuracy"] == 3.0
    assert parse_longbench_write_judgement(json.dumps({**DIMS, "Clarity": 7})) is None
    assert parse_longbench_write_judgement("I cannot grade this.") is None


@pytest.mark.skipif(not (SHARED_DATA / "longbench_write").exists(), reason="../shared/data not present")
def test_longbench_write_prompt_loaded_from_path():
    template = load_longbench_write_prompt(str(SHARED_DATA / "longbench_write" / "judge.txt"))
    messages = longbench_write_messages(template, "Write 100 words.", "Some words.")
    assert "Write 100 words." in messages[0]["content"] and "$INST$" not in messages[0]["content"]
    with pytest.raises(MissingDataError, match="does not exist"):
        load_longbench_write_prompt("/nonexistent/judge.txt")
    hello = helloeval_messages("Write an essay.", "An essay.", ["Is it good?", "Is it long?"])
    assert '"checklist_id": 1' in hello[1]["content"] and "2 items" in hello[1]["content"]


def test_settings_need_server_and_model(monkeypatch):
    monkeypatch.delenv("LCH_JUDGE_BASE_URL", raising=False)
    monkeypatch.delenv("LCH_JUDGE_MODEL", raising=False)
    with pytest.raises(ValueError, match="judge_base_url"):
        JudgeClient(JudgeSettings())


@pytest.fixture(scope="module")
def served(tiny_model_dir, tmp_path_factory):
    model = judge_model(tiny_model_dir, tmp_path_factory.mktemp("judge") / "model")
    with ServedModel(model) as server:
        yield server


def _conversations(n):
    return [[{"role": "user", "content": f"Grade answer number {i}."}] for i in range(n)]


def test_real_server_answers_and_cache_resumes(served, tmp_path):
    settings = JudgeSettings(
        base_url=served.base_url, model=served.model, max_tokens=8, concurrency=3, cache_dir=str(tmp_path)
    )
    client = JudgeClient(settings)
    answers = client.ask_many(_conversations(6), progress=False)
    assert all(a.text and not a.cached for a in answers) and client.stats["requests_sent"] == 6
    assert answers[0].model  # the server's model name is recorded
    again = JudgeClient(settings)
    repeat = again.ask_many(_conversations(6), progress=False)
    assert again.stats["requests_sent"] == 0 and all(a.cached for a in repeat)
    assert [a.text for a in repeat] == [a.text for a in answers]


JUDGE_SCRIPT = """
import json, sys
from harness.judges.client import JudgeClient, JudgeSettings
base_url, model, cache, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
client = JudgeClient(JudgeSettings(base_url=base_url, model=model, max_tokens=8, concurrency=4,
                                   cache_dir=cache, backoff=0.05, max_attempts=20))
conversations = [[{"role": "user", "content": f"Grade answer number {i}."}] for i in range(n)]
answers = client.ask_many(conversations, progress=False)
print(json.dumps({"ok": sum(a.text is not None for a in answers), **client.stats}))
"""


def test_faults_and_a_killed_run_lose_nothing(served, tmp_path):
    """429s, 500s and dropped connections, and a run killed halfway: every request ends answered, and
    nothing answered before the kill is asked again."""
    n = 24
    cache = tmp_path / "cache"
    with FaultyProxy(int(served.base_url.split(":")[2].split("/")[0])) as proxy:
        args = [sys.executable, "-c", JUDGE_SCRIPT, proxy.base_url, served.model, str(cache), str(n)]
        first = subprocess.Popen(args, stdout=subprocess.PIPE, text=True)
        deadline = time.time() + 120
        while len(list(cache.glob("*/*.json"))) < n // 3 and time.time() < deadline:
            time.sleep(0.05)
        first.kill()
        first.wait()
        answered_before = {p.stem for p in cache.glob("*/*.json")}
        assert 0 < len(answered_before) < n
        done = subprocess.run(args, capture_output=True, text=True, timeout=300)
        report = json.loads(done.stdout.strip().splitlines()[-1])
        assert report["ok"] == n and report["cache_hits"] >= len(answered_before)
        assert report["retries"] > 0  # the faults really happened
        assert len(list(cache.glob("*/*.json"))) == n
        # every request ends answered; those answered before the kill were never requested again
        from harness.judges.client import request_body, request_key

        settings = JudgeSettings(base_url=proxy.base_url, model=served.model, max_tokens=8).resolved()
        keys = [
            request_key(request_body(settings, c))
            for c in [[{"role": "user", "content": f"Grade answer number {i}."}] for i in range(n)]
        ]
        assert all(JudgeCache(cache).get(k)["text"] is not None for k in keys)
        assert set(proxy.forwarded) == set(keys)
        assert all(proxy.forwarded[k] == 1 for k in answered_before)
        # at most the requests in flight at the kill (concurrency 4) were answered twice
        assert sum(proxy.forwarded.values()) - n <= 4


@pytest.mark.skipif(not (SHARED_DATA / "longbench_write").exists(), reason="../shared/data not present")
def test_judged_tasks_end_to_end_then_rejudged(served, tiny_model_dir, tmp_path):
    """Tiny model generates with Dynamic PIC, tiny model judges through `transformers serve` (its replies
    do not parse: n_valid 0, policy zero); then `lch judge` re-judges the logged samples with another
    judge whose grades are known, without regenerating."""
    import glob

    from harness.data.longform import load_hellobench_weights
    from tests.judge_servers import CannedJudge

    bin_dir = Path(sys.executable).parent
    meta = {
        "longbench_write_data": str(SHARED_DATA / "longbench_write" / "longbench_write.jsonl"),
        "hellobench_data": str(SHARED_DATA / "hellobench" / "heuristic_text_generation_2k.jsonl"),
        "limit_docs": 3,
        "max_gen_toks": 16,
        "judge_base_url": served.base_url,
        "judge_model": served.model,
        "judge_max_tokens": 8,
        "judge_prompt": str(SHARED_DATA / "longbench_write" / "judge.txt"),
        "weights_file": str(SHARED_DATA / "hellobench" / "weighted_scores.txt"),
        "judge_policy": "zero",
        "judge_cache_dir": str(tmp_path / "judge-cache"),
    }
    out = tmp_path / "run"
    subprocess.run(
        [
            str(bin_dir / "lch"),
            "eval",
            "--model",
            "hf-pic",
            "--model_args",
            f"pretrained={tiny_model_dir},dtype=float32,pic=dynamic,pic_ratio=2",
            "--device",
            "cpu",
            "--batch_size",
            "3",
            "--tasks",
            "longbench_write,hellobench_htg_2k",
            "--log_samples",
            "--metadata",
            json.dumps(meta),
            "--output_path",
            str(out),
        ],
        check=True,
        capture_output=True,
    )
    results = json.loads(Path(glob.glob(str(out / "**" / "results_*.json"), recursive=True)[0]).read_text())["results"]
    lbw, hb = results["longbench_write"], results["hellobench_htg_2k"]
    for metric in ("length", "length_score", "quality", "score", "corrupted_ratio", "n_valid", "n_total", "n_tokens"):
        assert f"{metric},none" in lbw
    assert lbw["n_total,none"] == 3 and lbw["n_valid,none"] == 0 and lbw["quality,none"] == 0.0
    assert lbw["score,none"] == pytest.approx(lbw["length_score,none"] / 2)
    assert hb["n_total,none"] == 3 and hb["n_valid,none"] == 0 and hb["quality,none"] == 0.0 and hb["length,none"] > 0
    for task in (lbw, hb):  # length honesty: prompts counted in the model's tokens, none over its 4096
        assert task["prompt_tokens,none"] > 10 and task["over_length,none"] == 0
    assert 0 < len(list((tmp_path / "judge-cache").glob("*/*.json"))) <= 6  # one request per sample
    config = json.loads(Path(glob.glob(str(out / "**" / "results_*.json"), recursive=True)[0]).read_text())["configs"]
    recorded = config["longbench_write"]["metadata"]["judge_provenance"]
    assert recorded["model"] == served.model and recorded["reported_models"]  # as the server named itself
    assert config["hellobench_htg_2k"]["metadata"]["length_tokenizer"] in (
        "nltk.word_tokenize",
        "treebank+untrained-punkt",
    )

    samples = {
        t: glob.glob(str(out / "**" / f"samples_{t}_*.jsonl"), recursive=True)[0]
        for t in ("longbench_write", "hellobench_htg_2k")
    }
    with CannedJudge(0.5, DIMS) as canned:
        args = [
            "--judge-base-url",
            canned.base_url,
            "--judge-model",
            "canned",
            "--judge-cache-dir",
            str(tmp_path / "c2"),
        ]
        lbw2 = json.loads(
            subprocess.run(
                [str(bin_dir / "lch"), "judge", samples["longbench_write"], *args],
                check=True,
                capture_output=True,
                text=True,
            ).stdout
        )
        hb2 = json.loads(
            subprocess.run(
                [str(bin_dir / "lch"), "judge", samples["hellobench_htg_2k"], *args],
                check=True,
                capture_output=True,
                text=True,
            ).stdout
        )
        assert canned.requests == 6  # each sample judged once; the second and third metric hit the cache
    expected_sq = sum(25 * (v - 1) for v in DIMS.values()) / 6
    assert lbw2["n_valid"] == 3 and lbw2["quality"] == pytest.approx(expected_sq)
    assert lbw2["score"] == pytest.approx((lbw["length_score,none"] + expected_sq) / 2)
    weights = load_hellobench_weights(SHARED_DATA / "hellobench" / "weighted_scores.txt")
    assert sum(weights["argumentative_writing"]) == pytest.approx(100)
    assert hb2["n_valid"] == 3 and hb2["quality"] == pytest.approx(50.0)  # 0.5 on every item, weights sum to 100


@pytest.mark.skipif(not (SHARED_DATA / "longbench_write").exists(), reason="../shared/data not present")
def test_lm_eval_judges_each_sample_once_for_all_judged_metrics(tiny_model_dir, tmp_path, monkeypatch, caplog, capsys):
    """lm-eval (in this process) runs longbench_write on 3 documents with a canned judge whose grades differ
    per sample; quality, score and n_valid all aggregate from one judging: one judge() call, 3
    conversations through the client (cache hits included, so a metric re-judging from the cache would
    show), 3 requests at the server. Grades: the k-th distinct instruction to arrive gets
    [5, 4, 3, 2, 1, 3] (quality 50), all 2 (25), all 5 (100): S_q = 175 / 3 whatever the order.
    The judge's key (``LCH_JUDGE_API_KEY``) goes to the server and nowhere else: not the results, the samples,
    the judge's cache or the log."""
    from harness.judges import stage
    from harness.judges.client import JudgeClient
    from harness.plugin.in_process import evaluate, task_manager
    from tests.judge_servers import CannedJudge, canned_usage, longbench_write_reply

    names = ("Relevance", "Accuracy", "Coherence", "Clarity", "Breadth and Depth", "Reading Experience")
    cycle = [dict(zip(names, s)) for s in ((5, 4, 3, 2, 1, 3), (2,) * 6, (5,) * 6)]
    given: dict[str, dict] = {}  # judge prompt -> grades

    def grade(prompt: str, body: dict) -> str:
        given.setdefault(prompt, cycle[len(given) % 3])
        return longbench_write_reply(given[prompt])

    key = "sk-lch-test-0c5e1d2a9b"
    monkeypatch.setenv("LCH_JUDGE_API_KEY", key)
    caplog.set_level("DEBUG")
    judge_calls, conversations = [], []
    real_judge, real_ask = stage.judge, JudgeClient.ask_many
    monkeypatch.setattr(stage, "judge", lambda items: judge_calls.append(len(items)) or real_judge(items))
    monkeypatch.setattr(
        JudgeClient,
        "ask_many",
        lambda self, convs, progress=True: conversations.extend(convs) or real_ask(self, convs, progress),
    )
    with CannedJudge(grade=grade) as canned:
        meta = {  # as in test_judged_tasks_end_to_end_then_rejudged, with the canned judge
            "longbench_write_data": str(SHARED_DATA / "longbench_write" / "longbench_write.jsonl"),
            "limit_docs": 3,
            "max_gen_toks": 16,
            "judge_base_url": canned.base_url,
            "judge_model": "canned",
            "judge_prompt": str(SHARED_DATA / "longbench_write" / "judge.txt"),
            "judge_policy": "drop",
            "judge_cache_dir": str(tmp_path / "judge-cache"),
            "pretrained": str(tiny_model_dir),
        }
        out = evaluate(
            {"pretrained": str(tiny_model_dir), "dtype": "float32"},
            ["longbench_write"],
            task_manager(metadata=meta, ours_only=True),
            device="cpu",
            batch_size=3,
            log_samples=True,
        )
        assert canned.requests == 3 and canned.authorizations == [f"Bearer {key}"] * 3
        # the run's cost holds the judge's requests and the tokens the server reported for each (canned: words)
        usages = [
            canned_usage(p, longbench_write_reply(given[p]))
            for p in (body["messages"][-1]["content"] for body in canned.bodies)
        ]
        assert out["lch_cost"]["judge"] == {
            "requests": 3,
            "prompt_tokens": sum(u["prompt_tokens"] for u in usages),
            "completion_tokens": sum(u["completion_tokens"] for u in usages),
        }
    assert judge_calls == [3] and len(conversations) == 3
    assert len(list((tmp_path / "judge-cache").glob("*/*.json"))) == 3
    samples = out["samples"]["longbench_write"]
    assert len(samples) == 3
    for sample in samples:  # each sample's instruction went to the judge in exactly one request
        assert sum(sample["doc"]["prompt"] in p for p in given) == 1
    lbw = out["results"]["longbench_write"]
    s_q = (50 + 25 + 100) / 3
    s_l = sum(s["length_score"] for s in samples) / 3
    assert lbw["n_valid,none"] == 3 and lbw["n_total,none"] == 3
    assert lbw["quality,none"] == pytest.approx(s_q)
    assert lbw["score,none"] == pytest.approx((s_l + s_q) / 2) and lbw["length_score,none"] == pytest.approx(s_l)
    assert out["configs"]["longbench_write"]["metadata"]["judge_provenance"]["reported_models"] == ["canned-judge"]
    from lm_eval.utils import handle_non_serializable

    printed = capsys.readouterr()
    assert key not in json.dumps(out, default=handle_non_serializable) and key not in caplog.text
    assert key not in printed.out + printed.err
    assert not [p for p in tmp_path.rglob("*") if p.is_file() and key.encode() in p.read_bytes()]
