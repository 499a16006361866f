"""``lch plan``: the cells' arithmetic by hand, the counts against tokens counted here from the documents and the
cached samples (not by the plan's code), RULER's plan from its cache equal to the plan of its built requests, the
throughput store, and the command's one-line refusals."""

from __future__ import annotations

import dataclasses
import json
from fractions import Fraction

import pytest

from harness.plan.cells import PlanCell, Throughput, totals
from harness.plan.report import duration, table


def test_throughput_fits_two_points_and_prices_a_sample_by_hand():
    """Prefill 1 s at 1000 tokens and 8 s at 4000: a n + b n^2 through both gives a = 1/1500, b = 1/3e6; decode
    0.01 s / token at 1000 and 0.02 at 4000: c = 1/150, d = 1/3e5. A 2000-token prompt with 100 new tokens:
    prefill 4/3 + 4/3 = 8/3 s, decode 100 x (1/150 + 2050/3e5) = 1.35 s."""
    t = Throughput.fit((1000, 4000), (1.0, 8.0), (0.01, 0.02), "by hand")
    for got, want in (
        (t.a, Fraction(1, 1500)),
        (t.b, Fraction(1, 3_000_000)),
        (t.c, Fraction(1, 150)),
        (t.d, Fraction(1, 300_000)),
    ):
        assert got == pytest.approx(float(want), rel=1e-12)
    assert t.sample_seconds(2000, 100) == pytest.approx(8 / 3 + 1.35, rel=1e-12)
    cell = PlanCell("t", "2000", (2000, 2000), (100, 0))
    assert t.cell_seconds(cell) == pytest.approx(2 * 8 / 3 + 1.35, rel=1e-12)
    # a perplexity's scoring forward, timed apart: 2 s at 1000 tokens, 16 s at 4000 -> e = 1/750, f = 1/1.5e6; a
    # cell that scores a 2000-token document and generates nothing costs 8/3 + 8/3 s; without the scoring timings
    # (a calibration stored before they were taken) the same cell is priced as a prefill, 8/3 s
    scoring = Throughput.fit((1000, 4000), (1.0, 8.0), (0.01, 0.02), "by hand", score_seconds=(2.0, 16.0))
    assert (scoring.e, scoring.f) == (pytest.approx(1 / 750, rel=1e-12), pytest.approx(1 / 1_500_000, rel=1e-12))
    document = PlanCell("p", "-", (2000,), (0,), scored_tokens=1999)
    assert scoring.cell_seconds(document) == pytest.approx(16 / 3, rel=1e-12)
    assert t.cell_seconds(document) == pytest.approx(8 / 3, rel=1e-12)
    # timing noise that makes the per-token cost fall with length: no negative coefficient, the longer point kept
    noisy = Throughput.fit((1000, 2000), (1.0, 1.5), (0.02, 0.01), "noisy")
    assert (noisy.a, noisy.b, noisy.c, noisy.d) == (1.5 / 2000, 0.0, 0.01, 0.0)
    with pytest.raises(ValueError):
        Throughput.fit((2000, 1000), (1.0, 2.0), (0.1, 0.1), "backwards")


def test_cells_total_and_read_as_a_table():
    cells = [
        PlanCell(
            "a",
            "1024",
            (900, 1000),
            (64, 64),
            cut=1,
            cached=True,
            judge_calls=2,
            judge_tokens=900,
            memory=3 << 30,
            fits=True,
        ),
        PlanCell("b", "-", (3000,), (0,), scored_tokens=2999, judge_calls=0, memory=512 << 20, fits=False),
    ]
    assert (cells[0].samples, cells[0].prompt_tokens, cells[0].longest_prompt, cells[0].generated_tokens) == (
        2,
        1900,
        1000,
        128,
    )
    # the memory of the run is its largest cell's; it fits where every cell does
    assert totals(cells) == {
        "samples": 3,
        "prompt_tokens": 4900,
        "generated_tokens": 128,
        "scored_tokens": 2999,
        "cut": 1,
        "judge_calls": 2,
        "judge_tokens": 900,
        "longest_prompt": 3000,
        "memory": 3 << 30,
        "fits": False,
    }
    lines = table([c.row() for c in cells]).splitlines()
    assert lines[1].split() == [
        "a",
        "1024",
        "2",
        "1,900",
        "1,000",
        "128",
        "0",
        "1",
        "2",
        "900",
        "yes",
        "3.0",
        "GiB",
        "yes",
    ]
    assert lines[2].split() == ["b", "-", "1", "3,000", "3,000", "0", "2,999", "0", "0", "0", "-", "512", "MiB", "no"]
    unsized = dataclasses.replace(cells[1], memory=None, fits=None)  # a model the plan does not size
    assert table([unsized.row()]).splitlines()[1].split()[-2:] == ["-", "-"]
    assert (totals([cells[0], unsized])["memory"], totals([cells[0], unsized])["fits"]) == (None, None)
    # a judge prompt not at hand: its tokens unknown ("?"), and so the total's
    unknown = dataclasses.replace(cells[0], judge_tokens=None)
    assert totals([unknown, cells[1]])["judge_tokens"] is None
    assert table([unknown.row()]).splitlines()[1].split()[-5] == "?"
    with pytest.raises(ValueError):
        PlanCell("c", "-", (1, 2), (0,))
    assert [duration(s) for s in (44.6, 725, 12_000, 190_000)] == ["45 s", "12 min 5 s", "3 h 20 min", "2 d 4 h"]


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    from harness.data.synthetic import synthetic_reports

    path = tmp_path_factory.mktemp("plan") / "reports.jsonl"
    texts = synthetic_reports(3, 200, seed=5)
    path.write_text("".join(json.dumps({"report": t}) + "\n" for t in texts))
    return path, texts


def _plan(model_dir, tasks, metadata, **run):
    from harness.plan.make import EvalSettings, make_plan

    return make_plan(EvalSettings("hf-pic", {"pretrained": str(model_dir)}, tasks, metadata, **run))


def test_a_scoring_plan_counts_each_document_as_the_tokenizer_does(tiny_model_dir, reports):
    """ppl_govreport scores every document whole: its prompt tokens are the tokenizer's count of each document
    (BOS included), n - 1 of them scored (the first token has no context)."""
    from transformers import AutoTokenizer

    path, texts = reports
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    counts = [len(tokenizer(t)["input_ids"]) for t in texts]
    plan = _plan(tiny_model_dir, ["ppl_govreport"], {"data_files": str(path), "min_tokens": 1, "num_docs": 3})
    (cell,) = plan.cells
    assert (cell.task, cell.length, sorted(cell.prompts), cell.budgets) == (
        "ppl_govreport",
        "-",
        sorted(counts),
        (0, 0, 0),
    )
    assert cell.scored_tokens == sum(counts) - 3 and cell.judge_calls == 0 and cell.cached is None


def _ruler_meta(seed: int) -> dict:
    return {"lengths": [512, 1024], "num_samples": 3, "essays": "synthetic", "seed": seed}


def test_rulers_plan_from_its_cache_equals_its_counted_requests_and_the_cached_rows(tiny_model_dir):
    """A RULER task's plan: first built (its samples generated and cached), then read from the cache; each cell equal
    to the cell of the same requests built by lm-eval and counted, and each prompt equal to the tokenizer's count
    of the cached row's text joined to its answer prefix as lm-eval joins them (one space)."""
    from transformers import AutoTokenizer

    from harness.core.run_record import asking_chat_template
    from harness.data.prompt_tokens import PromptCounter
    from harness.plan.requests import plan_requests
    from harness.plugin.in_process import task_manager

    meta = _ruler_meta(seed=4242)
    tasks = ["lch_ruler_niah_single_1", "lch_ruler_vt"]
    first = _plan(tiny_model_dir, tasks, meta)
    again = _plan(tiny_model_dir, tasks, meta)
    assert [c.cached for c in first.cells] == [False] * 4 and [c.cached for c in again.cells] == [True] * 4
    assert [(c.task, c.length) for c in again.cells] == [(t, n) for t in tasks for n in ("512", "1024")]
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    with asking_chat_template(False):
        manager = task_manager(metadata={"pretrained": str(tiny_model_dir), **meta}, ours_only=True)
        counted = plan_requests(manager, tasks, PromptCounter(tokenizer))
    # counting keeps no cache; only the plan sizes memory (every cell of the tiny model fits this machine)
    assert [{**c.row(), "cached": True, "memory": None, "fits": None} for c in counted] == [
        {**c.row(), "memory": None, "fits": None} for c in again.cells
    ]
    assert all(c.memory and c.fits for c in again.cells)
    assert [(c.prompts, c.budgets) for c in counted] == [(c.prompts, c.budgets) for c in again.cells]
    # the cached rows themselves, counted here: lm-eval joins text and answer prefix with one space when neither
    # side has whitespace at the join
    from harness.plugin.task_index import check_task_options
    from harness.tasks import TASKS_PATH
    from harness.tasks.lch_ruler.cache import cache_path, read_rows

    parsed = check_task_options(meta, {"pretrained": str(tiny_model_dir)}, tasks, str(TASKS_PATH))
    for cell in again.cells:
        _, _, options = parsed[cell.task]
        options = dataclasses.replace(options, chat_template=False)  # as the run without a template fits them
        rows = read_rows(cache_path(options, int(cell.length), PromptCounter(tokenizer)), 3)
        joined = [
            r["input"]
            + (" " if r["gen_prefix"] and not (r["input"][-1].isspace() or r["gen_prefix"][0].isspace()) else "")
            + r["gen_prefix"]
            for r in rows
        ]
        assert cell.prompts == tuple(len(tokenizer(text)["input_ids"]) for text in joined)
        assert cell.budgets == tuple(r["max_gen_toks"] for r in rows) and cell.budgets[0] > 0


def test_plan_refuses_what_it_cannot_plan_in_one_line(tiny_model_dir, capsys, tmp_path):
    from harness.cli import main

    foreign = tmp_path / "results_2026-01-01T00-00-00.json"  # a results file of another harness: no invocation
    foreign.write_text(json.dumps({"results": {"t": {"acc,none": 1.0}}, "config": {"model": "hf"}}))
    cases = [
        (
            ["plan", "--against", str(foreign), "--tasks", "ppl_govreport"],
            "lch: error: lch plan --against plans the run its results file recorded: leave out --tasks (the run's own "
            "flags are used)",
        ),
        (
            ["plan", "--against", str(foreign)],
            f"lch: error: {foreign} records no invocation (a run of another harness, or of lch before it recorded "
            "them): plan it with the run's own flags instead",
        ),
        (
            ["plan", "--against", str(tmp_path / "none")],
            f"lch: error: {tmp_path / 'none'} does not exist: give a results file (or the folder lm-eval wrote it in)",
        ),
        (
            ["plan", "--model", "hf-pic", "--model_args", f"pretrained={tiny_model_dir}", "--tasks", "hellaswag"],
            "lch: error: lch plan plans the tasks of this package; hellaswag holds others: plan them with their own "
            "harness, or leave them out",
        ),
        (
            ["plan", "--model", "hf-pic", "--model_args", f"pretrained={tiny_model_dir}"],
            "lch: error: lch plan needs a run to plan: --model and --tasks, as `lch eval` takes them",
        ),
        (
            ["plan", "--model", "hf-pic", "--tasks", "ppl_govreport", "--json"],
            "lch: error: lch plan: --json needs a file path",
        ),
    ]
    for argv, line in cases:
        assert main(argv) == 2
        assert capsys.readouterr().err.strip().splitlines()[-1] == line


def test_a_run_records_what_it_cost_and_its_tokens_are_its_plans(tiny_model_dir, reports, tmp_path):
    """A run of a scoring task and a generating one records, per task, the requests it computed and their tokens,
    counted here from the documents and the logged prompts and generations (a prompt as the tokenizer encodes it,
    its BOS included, as lm-eval's HF model sends it; a generation without special tokens); the seconds are the
    engine's, the rate their quotient; the wall time covers them. The plan of the same run counted the same prompt
    and scored tokens before it ran, and a generation budget the generations stayed within."""
    from transformers import AutoTokenizer

    from harness.core import results as keys
    from harness.plugin.in_process import evaluate, task_manager

    path, texts = reports
    meta = {
        "data_files": str(path),
        "min_tokens": 1,
        "num_docs": 3,
        **_ruler_meta(seed=777),
        "lengths": [512],
        "num_samples": 2,
    }
    tasks = ["ppl_govreport", "lch_ruler_niah_single_1"]
    out = evaluate(
        {"pretrained": str(tiny_model_dir), "dtype": "float32"},
        tasks,
        task_manager(metadata={"pretrained": str(tiny_model_dir), **meta}, ours_only=True),
        device="cpu",
        batch_size=2,
        log_samples=True,
    )
    cost = out[keys.COST]
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    ppl, ruler = cost["tasks"]["ppl_govreport"], cost["tasks"]["lch_ruler_niah_single_1"]
    documents = [len(tokenizer(t)["input_ids"]) for t in texts]
    assert (ppl["requests"], ppl["prompt_tokens"], ppl["generated_tokens"], ppl["scored_tokens"]) == (
        3,
        sum(documents),
        0,
        sum(documents) - 3,
    )
    logged = out["samples"]["lch_ruler_niah_single_1"]
    prompts = [len(tokenizer(s["arguments"][0][0])["input_ids"]) for s in logged]
    generated = [len(tokenizer(s["resps"][0][0], add_special_tokens=False)["input_ids"]) for s in logged]
    assert (ruler["requests"], ruler["prompt_tokens"], ruler["generated_tokens"], ruler["scored_tokens"]) == (
        2,
        sum(prompts),
        sum(generated),
        0,
    )
    for task in (ppl, ruler):
        assert task["seconds"] > 0 and task["tokens_per_second"] == pytest.approx(
            (task["prompt_tokens"] + task["generated_tokens"]) / task["seconds"]
        )
    assert cost["wall_seconds"] > ppl["seconds"] + ruler["seconds"]
    assert cost["device"] == "cpu" and cost["device_name"].startswith("CPU") and cost["processes"] == 1
    assert (
        cost["peak_memory"]["what"] == "peak resident memory of this process" and cost["peak_memory"]["bytes"] > 2**20
    )
    assert cost["judge"] == {"requests": 0, "prompt_tokens": 0, "completion_tokens": 0} and cost["helpers"] == []

    plan = {c.task: c for c in _plan(tiny_model_dir, tasks, meta).cells}
    assert plan["ppl_govreport"].scored_tokens == ppl["scored_tokens"]
    assert plan["ppl_govreport"].prompt_tokens == ppl["prompt_tokens"]
    assert plan["lch_ruler_niah_single_1"].prompt_tokens == ruler["prompt_tokens"]
    assert plan["lch_ruler_niah_single_1"].generated_tokens >= ruler["generated_tokens"]

    # lch plan --against: the recorded run planned again beside what it cost, estimated from the throughput stored for
    # its setting
    from harness.cli import main
    from harness.plan import throughput as tp
    from harness.plugin.in_process import save_run

    save_run(out, tmp_path / "run")
    a, b, e, f = 1e-4, 1e-8, 3e-4, 2e-8
    tp.store(
        tp.setting_of("hf-pic", {"pretrained": str(tiny_model_dir), "dtype": "float32"}, "cpu"),
        Throughput(a, b, 1e-3, 1e-7, "by hand", e, f),
        {},
    )  # c, d: below
    assert main(["plan", "--against", str(tmp_path / "run"), "--json", str(tmp_path / "against.json")]) == 0
    rows = {r["task"]: r for r in json.loads((tmp_path / "against.json").read_text())["against"]["tasks"]}
    assert rows["ppl_govreport"]["prompt_tokens"] == rows["ppl_govreport"]["prompt_tokens_run"] == sum(documents)
    assert rows["lch_ruler_niah_single_1"]["prompt_tokens"] == rows["lch_ruler_niah_single_1"]["prompt_tokens_run"]
    assert rows["lch_ruler_niah_single_1"]["generated_tokens_run"] == sum(generated)
    # ppl_govreport scores its documents and generates nothing: priced by the scoring forward, e n + f n^2
    assert rows["ppl_govreport"]["seconds_estimated"] == pytest.approx(sum(e * n + f * n * n for n in documents))
    assert rows["ppl_govreport"]["seconds_run"] == ppl["seconds"]
    assert rows["total"]["seconds_run"] == pytest.approx(ppl["seconds"] + ruler["seconds"])
    assert rows["total"]["estimate_over_run"] == pytest.approx(
        rows["total"]["seconds_estimated"] / rows["total"]["seconds_run"]
    )
    # the same throughput at the run's own requests: the RULER prompts as logged, each generation as long as it was
    # (its mean context prompt + generated / 2); with c = 1e-3, d = 1e-7 per generated token
    c, d = 1e-3, 1e-7
    at_run = sum(a * n + b * n * n + g * (c + d * (n + g / 2)) for n, g in zip(prompts, generated))
    assert ruler["prompt_tokens_squared"] == sum(n * n for n in prompts)
    assert rows["lch_ruler_niah_single_1"]["seconds_at_run_tokens"] == pytest.approx(at_run, rel=1e-12)
    assert rows["ppl_govreport"]["seconds_at_run_tokens"] == pytest.approx(rows["ppl_govreport"]["seconds_estimated"])


def test_a_longppl_plan_never_runs_the_evaluator_and_says_whether_its_key_tokens_are_cached(
    tiny_model_dir, reports, tmp_path, monkeypatch
):
    """LongPPL scores each document whole without special tokens (the reference's convention): its prompt tokens are
    the tokenizer's count of each text without them, n - 1 scored. Its key tokens come from an evaluator model: the
    plan never loads it (its loader raises here), and says whether they are cached: not before the key tokens are
    found, yes after."""
    from transformers import AutoTokenizer

    import harness.longppl.keytokens as keytokens
    from harness.longppl.corpus import CorpusOptions, corpus_documents
    from harness.longppl.formulas import EvaluatorRun
    from harness.longppl.keytokens import KeyTokenOptions, attach_key_tokens

    path, texts = reports
    meta = {
        "data_files": str(path),
        "min_tokens": 1,
        "num_docs": 3,
        "evaluator": str(tiny_model_dir),
        "trunc_len": 64,
        "sliding_window": 32,
        "key_cache_dir": str(tmp_path / "keys"),
    }
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    counts = [len(tokenizer(t, add_special_tokens=False)["input_ids"]) for t in texts]

    def never(*args, **kwargs):
        raise AssertionError("lch plan ran the evaluator")

    with monkeypatch.context() as patched:
        patched.setattr(keytokens, "load_evaluator", never)
        (cell,) = _plan(tiny_model_dir, ["longppl_govreport"], meta).cells
    assert (cell.task, sorted(cell.prompts), cell.budgets, cell.cached) == (
        "longppl_govreport",
        sorted(counts),
        (0, 0, 0),
        False,
    )
    assert cell.scored_tokens == sum(counts) - 3
    # the evaluator as the run would load it: the longest document in its own tokens (special tokens included, as it
    # reads them), K and d, for the plan's memory
    longest = max(len(tokenizer(t)["input_ids"]) for t in texts)
    assert cell.helper == EvaluatorRun(str(tiny_model_dir), "auto", longest, 64, 32)
    corpus = CorpusOptions(data_files=str(path), min_tokens=1, num_docs=3, evaluator=str(tiny_model_dir))
    attach_key_tokens(
        corpus_documents(corpus),
        str(tiny_model_dir),  # found and cached, as a run finds them
        KeyTokenOptions(trunc_len=64, sliding_window=32, key_cache_dir=str(tmp_path / "keys")),
    )
    (cell,) = _plan(tiny_model_dir, ["longppl_govreport"], meta).cells
    assert cell.cached is True and sorted(cell.prompts) == sorted(counts) and cell.helper.tokens == longest
    (first,) = _plan(tiny_model_dir, ["longppl_govreport"], meta, limit=1.0).cells
    assert first.samples == 1


def test_a_run_records_the_evaluator_it_ran_and_its_plan_counts_it_after_the_key_tokens_are_cached(
    tiny_model_dir, reports, tmp_path
):
    """A LongPPL run whose key tokens are not cached runs its evaluator (here a Gemma 3 of its own vocabulary) and says
    so in its cost (``helpers``); the same run again finds them cached and runs none. Planned again afterwards (its key
    tokens cached by then), the first run's plan counts the evaluator it held (its weights above the evaluated
    model's), the second's does not."""
    from harness.cli import main
    from harness.core import results as keys
    from harness.models.memory import meta_model, request_need, weight_bytes
    from harness.models.tiny import build_tiny_model
    from harness.plugin.in_process import evaluate, save_run, task_manager

    evaluator = str(build_tiny_model(arch="gemma3_text", vocab_size=300, hidden=96, layers=3, heads=4, kv_heads=1))
    path, _ = reports
    meta = {
        "data_files": str(path),
        "min_tokens": 1,
        "num_docs": 3,
        "evaluator": evaluator,
        "evaluator_dtype": "float32",
        "trunc_len": 64,
        "sliding_window": 32,
        "key_cache_dir": str(tmp_path / "k"),
        "alpha": -100.0,
        "beta": -100.0,
    }  # an untrained evaluator: every token past K is key
    model_args = {"pretrained": str(tiny_model_dir), "dtype": "float32"}
    planned = []
    for run in ("first", "again"):
        out = evaluate(
            model_args,
            ["longppl_govreport"],
            task_manager(metadata={**model_args, **meta}, ours_only=True),
            device="cpu",
            batch_size=1,
        )
        assert out[keys.COST]["helpers"] == ([{"model": evaluator, "dtype": "float32"}] if run == "first" else [])
        save_run(out, tmp_path / run)
        assert main(["plan", "--against", str(tmp_path / run), "--json", str(tmp_path / f"{run}.json")]) == 0
        plan = json.loads((tmp_path / f"{run}.json").read_text())
        (cell,) = plan["cells"]
        assert cell["cached"] is True
        planned.append(cell["memory"] - plan["memory"]["runtime"])
    evaluated = meta_model(str(tiny_model_dir), "float32")
    assert planned[1] == request_need(evaluated, max_prompt(tmp_path / "again.json"), scores=True).resident("cpu")
    assert weight_bytes(meta_model(evaluator, "float32")) > weight_bytes(evaluated) and planned[0] > planned[1]


def max_prompt(plan_json):
    return json.loads(plan_json.read_text())["cells"][0]["longest_prompt"]


def test_a_judged_tasks_plan_counts_each_judge_call_at_most(tiny_model_dir, tmp_path, monkeypatch):
    """LongBench-Write: each sample is judged once; its judge call takes at most the judge prompt filled with the
    instruction and an empty response, counted here, plus the response at its budget (48) and the judge's
    max_tokens (100). Without the judge prompt at hand the plan says it cannot count them and downloads nothing."""
    import urllib.request

    from transformers import AutoTokenizer

    data = tmp_path / "lbw.jsonl"
    rows = [{"prompt": f"Write a 3000-word report on topic {i}.", "type": "Report", "length": 3000} for i in range(2)]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    prompt = tmp_path / "judge.txt"
    prompt.write_text("Grade the response to the instruction.\n[Instruction]\n$INST$\n[Response]\n$RESPONSE$\n[End]")
    meta = {"longbench_write_data": str(data), "limit_docs": 2, "max_gen_toks": 48, "judge_max_tokens": 100}
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    filled = [prompt.read_text().replace("$INST$", r["prompt"]).replace("$RESPONSE$", "") for r in rows]
    expected = sum(len(tokenizer(text, add_special_tokens=False)["input_ids"]) + 48 + 100 for text in filled)
    (cell,) = _plan(tiny_model_dir, ["longbench_write"], {**meta, "judge_prompt": str(prompt)}).cells
    assert (cell.judge_calls, cell.judge_tokens, cell.budgets) == (2, expected, (48, 48))

    def offline(*args, **kwargs):
        raise AssertionError("lch plan downloaded the judge prompt")

    monkeypatch.setattr(urllib.request, "urlopen", offline)
    monkeypatch.setenv("LCH_CACHE", str(tmp_path / "empty-cache"))
    (cell,) = _plan(tiny_model_dir, ["longbench_write"], meta).cells
    assert (cell.judge_calls, cell.judge_tokens) == (2, None)


def test_a_users_group_of_our_tasks_is_planned_and_one_holding_others_refused(tiny_model_dir, reports, tmp_path):
    """A group YAML of the user's (``--include_path``, as the demo's) whose members are ours is planned as its tasks;
    one that holds a task of another harness is refused in one line, as the other's own tasks are."""
    from harness.core.errors import UsageError

    path, texts = reports
    folder = tmp_path / "tasks"
    folder.mkdir()
    (folder / "mine.yaml").write_text("group: mine\ntask:\n  - ppl_govreport\n  - inner\n")
    (folder / "inner.yaml").write_text("group: inner\ntask:\n  - lch_ruler_niah_single_1\n")
    (folder / "mixed.yaml").write_text("group: mixed\ntask:\n  - ppl_govreport\n  - hellaswag\n")
    meta = {
        "data_files": str(path),
        "min_tokens": 1,
        "num_docs": 3,
        **_ruler_meta(seed=778),
        "lengths": [512],
        "num_samples": 2,
    }
    plan = _plan(tiny_model_dir, ["mine"], meta, include_path=str(folder))
    assert [(c.task, c.length, c.samples) for c in plan.cells] == [
        ("ppl_govreport", "-", 3),
        ("lch_ruler_niah_single_1", "512", 2),
    ]
    with pytest.raises(UsageError, match="mixed holds others"):
        _plan(tiny_model_dir, ["mixed"], meta, include_path=str(folder))
