"""RULER data generation (determinism, cache, exact fitting), scoring, and the lch_ruler tasks in lm-eval."""

from __future__ import annotations

import json
import random
import re
from dataclasses import asdict

import pytest

from harness.data.prompt_tokens import PromptCounter, load_tokenizer
from harness.tasks.lch_ruler import dataset as ruler
from harness.tasks.lch_ruler.builders import niah_builder
from harness.tasks.lch_ruler.fitting import fit_additive, fit_full
from harness.tasks.lch_ruler.task import RulerTask

SYNTHETIC = ruler.Sources(essays="synthetic", squad="synthetic", hotpotqa="synthetic")


@pytest.fixture(scope="module")
def counter(tiny_model_dir):
    return PromptCounter(load_tokenizer(str(tiny_model_dir)))


def check_context_span(row: dict, kind: str) -> None:
    """``context_span`` splits the input into the instruction (before it), the context a truncation may cut, and the
    question (after it): the question part asks (it ends the input with a question mark), the instruction holds no
    haystack, and what the answer is drawn from lies in the context (the needles, the variable chain's value, the
    gold paragraph, the words counted)."""
    start, end = row["context_span"]
    instruction, context, question = row["input"][:start], row["input"][start:end], row["input"][end:]
    assert 0 < start < end < len(row["input"]) and question.rstrip().endswith("?")
    # qa repeats its instruction after the documents, before the question (RULER's layout): both stay whole
    asks = question.split("\n\n")[-1] if kind == "qa" else question.lstrip()
    assert asks.startswith("Question:" if kind in ("vt", "cwe", "fwe", "qa") else "What")
    if kind == "niah":
        assert "One special magic" not in instruction and "One special magic" not in question
        for value in row["outputs"]:
            assert f"is: {value}." in context
    elif kind == "vt":
        assert all(f"VAR {name} =" in context for name in row["outputs"])
    elif kind == "qa":
        assert any(answer in context for answer in row["outputs"]) and "Document 1:" in context
    else:  # cwe, fwe: the answer words are counted in the context (and not spelled out in the question)
        assert all(word in context for word in row["outputs"])
        assert not any(word in question for word in row["outputs"])


@pytest.mark.parametrize("task", list(ruler.TASKS))
def test_every_task_fits_its_length_exactly(task, counter):
    length = 2048
    spec = ruler.TASKS[task]
    rows = ruler.generate(
        ruler.RulerOptions(ruler_task=task, num_samples=3, seed=7, **asdict(SYNTHETIC)),
        length,
        counter,
        use_cache=False,
    )
    assert len(rows) == 3
    for i, row in enumerate(rows):
        # counted independently: the prompt exactly as lm-eval joins text and answer prefix
        prompt = f"{row['input']} {row['gen_prefix']}"
        tokens = len(counter.tokenizer(prompt)["input_ids"])
        assert tokens == row["prompt_tokens"]
        assert tokens + spec.budget <= length
        assert row["max_gen_toks"] == spec.budget
        # and close to the budget: less than two average haystack units left over
        builder = ruler.BUILDERS[spec.kind](
            {**spec.params, **({"freq_common": row["freq_common"]} if "freq_common" in row else {})},
            random.Random(f"{task}-{length}-{i}-7"),
            length,
            SYNTHETIC,
            row["icl_example"],
        )
        n, n0 = row["n_units"], builder.n_min
        text0, _, prefix0 = builder.build(n0)
        assert builder.build(n)[0] == row["input"]
        if n > n0:
            per_unit = (tokens - counter(text0, prefix0)) / (n - n0)
            assert length - spec.budget - tokens < 2 * per_unit + 1
        for answer in row["outputs"]:
            assert answer in row["input"] or spec.kind == "fwe" or spec.kind == "cwe"
        check_context_span(row, spec.kind)


def test_needles_answers_and_kinds(counter):
    rows = ruler.generate(
        ruler.RulerOptions(ruler_task="niah_multivalue", num_samples=2, **asdict(SYNTHETIC)),
        2048,
        counter,
        use_cache=False,
    )
    for row in rows:
        assert len(row["outputs"]) == 4 and all(v.isdigit() and len(v) == 7 for v in row["outputs"])
        for value in row["outputs"]:
            assert f"is: {value}." in row["input"]
        assert row["gen_prefix"].endswith("are")
    row = ruler.generate(
        ruler.RulerOptions(ruler_task="niah_single_3", num_samples=1, **asdict(SYNTHETIC)),
        2048,
        counter,
        use_cache=False,
    )[0]
    assert len(row["outputs"]) == 1 and row["outputs"][0].count("-") == 4  # a UUID
    assert row["gen_prefix"].endswith(" is")
    row = ruler.generate(
        ruler.RulerOptions(ruler_task="niah_multiquery", num_samples=1, **asdict(SYNTHETIC)),
        2048,
        counter,
        use_cache=False,
    )[0]
    assert len(row["outputs"]) == 4 and ", and " in row["gen_prefix"]


def test_vt_cwe_fwe_answers_are_right(counter):
    vt = ruler.generate(
        ruler.RulerOptions(ruler_task="vt", num_samples=1, **asdict(SYNTHETIC)), 2048, counter, use_cache=False
    )[0]
    text = vt["input"].split("\n\n")[-1]  # after the worked example
    value = vt["gen_prefix"].split("value ")[1].split(" ")[0]
    assert f"VAR {vt['outputs'][0]} = {value}" in text
    for a, b in zip(vt["outputs"], vt["outputs"][1:]):
        assert f"VAR {b} = VAR {a}" in text
    cwe = ruler.generate(
        ruler.RulerOptions(ruler_task="cwe", num_samples=1, **asdict(SYNTHETIC)), 2048, counter, use_cache=False
    )[0]
    listing = [line.split(". ", 1)[1] for line in cwe["input"].split("Question:")[-2].split("\n") if ". " in line]
    counts = {w: listing.count(w) for w in set(listing)}
    top = sorted(counts, key=lambda w: -counts[w])[:10]
    assert set(top) == set(cwe["outputs"]) and min(counts[w] for w in top) > max(
        c for w, c in counts.items() if w not in top
    )
    fwe = ruler.generate(
        ruler.RulerOptions(ruler_task="fwe", num_samples=1, **asdict(SYNTHETIC)), 2048, counter, use_cache=False
    )[0]
    words = fwe["input"].split("\n")[-2].split()
    counts = {w: words.count(w) for w in set(words)}
    ranked = sorted(counts.values(), reverse=True)
    assert [counts[w] for w in fwe["outputs"]] == ranked[:3] and ranked[2] > ranked[3]


def test_generation_is_seeded_and_cached(counter, monkeypatch):
    first = ruler.generate(
        ruler.RulerOptions(ruler_task="niah_single_1", num_samples=3, seed=3, **asdict(SYNTHETIC)), 1024, counter
    )
    again = ruler.generate(
        ruler.RulerOptions(ruler_task="niah_single_1", num_samples=3, seed=3, **asdict(SYNTHETIC)),
        1024,
        counter,
        use_cache=False,
    )
    assert first == again
    other = ruler.generate(
        ruler.RulerOptions(ruler_task="niah_single_1", num_samples=3, seed=4, **asdict(SYNTHETIC)),
        1024,
        counter,
        use_cache=False,
    )
    assert [r["outputs"] for r in other] != [r["outputs"] for r in first]

    def no_generation(*args, **kwargs):
        raise AssertionError("a cached dataset was generated again")

    from harness.tasks.lch_ruler import fitting

    monkeypatch.setattr(fitting, "fit_full", no_generation)
    monkeypatch.setattr(fitting, "fit_additive", no_generation)
    assert (
        ruler.generate(
            ruler.RulerOptions(ruler_task="niah_single_1", num_samples=3, seed=3, **asdict(SYNTHETIC)), 1024, counter
        )
        == first
    )
    with pytest.raises(AssertionError, match="generated again"):  # anything the data depends on is in the key
        ruler.generate(
            ruler.RulerOptions(
                ruler_task="niah_single_1", num_samples=3, seed=3, icl_example=False, **asdict(SYNTHETIC)
            ),
            1024,
            counter,
        )


def test_chat_template_is_counted(counter):
    tok = counter.tokenizer
    tok.chat_template = "{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}\n{% endfor %}"
    try:
        chat = PromptCounter(tok, chat_template=True)
        rows = ruler.generate(
            ruler.RulerOptions(ruler_task="niah_single_1", num_samples=2, **asdict(SYNTHETIC)),
            1024,
            chat,
            use_cache=False,
        )
        for row in rows:
            rendered = tok.apply_chat_template(
                [{"role": "user", "content": row["input"]}, {"role": "assistant", "content": row["gen_prefix"]}],
                tokenize=False,
                continue_final_message=True,
            )
            assert "<|user|>" in rendered and rendered.rstrip().endswith(row["gen_prefix"])
            assert len(tok(rendered)["input_ids"]) == row["prompt_tokens"] <= 1024 - 128
    finally:
        tok.chat_template = None


def test_qa_from_official_files(tmp_path, counter):
    squad = {
        "data": [
            {
                "title": "t",
                "paragraphs": [
                    {
                        "context": f"Paragraph {i} says the colour number {i} is {c}.",
                        "qas": [
                            {
                                "question": f"What is colour number {i}?",
                                "is_impossible": False,
                                "answers": [{"text": c}, {"text": c.upper()}],
                            },
                            {"question": "Unanswerable?", "is_impossible": True, "answers": []},
                        ],
                    }
                    for i, c in enumerate(["red", "green", "blue", "cyan", "pink"] * 8)
                ],
            }
        ]
    }
    hotpot = [
        {
            "question": f"Q{i}?",
            "answer": f"A{i}",
            "context": [[f"T{i}", [f"S{i} one. ", f"A{i} two."]], [f"U{i}", ["x."]]],
        }
        for i in range(30)
    ]
    (tmp_path / "squad.json").write_text(json.dumps(squad))
    (tmp_path / "hotpot.json").write_text(json.dumps(hotpot))
    sources = ruler.Sources(
        essays="synthetic", squad=str(tmp_path / "squad.json"), hotpotqa=str(tmp_path / "hotpot.json")
    )
    row = ruler.generate(
        ruler.RulerOptions(ruler_task="qa_squad", num_samples=1, **asdict(sources)), 1024, counter, use_cache=False
    )[0]
    assert len(row["outputs"]) == 2 and row["outputs"][0].upper() == row["outputs"][1]
    # as many documents as fit: the largest n whose prompt (as lm-eval joins it) fits, found by trying every n
    builder = ruler.BUILDERS["qa"](
        ruler.TASKS["qa_squad"].params, random.Random("qa_squad-1024-0-42"), 1024, sources, True
    )
    prompts = {n: "{0} {2}".format(*builder.build(n)) for n in range(builder.n_min, builder.n_max + 1)}
    most = max(n for n, prompt in prompts.items() if len(counter.tokenizer(prompt)["input_ids"]) <= 1024 - 32)
    shown = [p["context"] for p in squad["data"][0]["paragraphs"] if p["context"] in row["input"]]
    assert row["input"].count("Document ") == len(shown) == most
    gold = int(row["input"].rsplit("colour number ", 1)[1].rstrip("?"))  # the question's paragraph
    assert f"Paragraph {gold} says" in row["input"] and "Unanswerable" not in row["input"]
    row = ruler.generate(
        ruler.RulerOptions(ruler_task="qa_hotpot", num_samples=1, **asdict(sources)), 1024, counter, use_cache=False
    )[0]
    q = row["input"].rsplit("Question: ", 1)[1]
    i = q[1:-1]
    assert row["outputs"] == [f"A{i}"] and f"T{i}\nS{i} one. A{i} two." in row["input"] and f"U{i}\nx." in row["input"]


def test_a_qa_source_that_cannot_reach_the_length_is_refused(tmp_path, counter):
    """Three paragraphs make a prompt of about a hundred tokens: a 1024-token sample would run short of its length
    (as the synthetic QA set did at 128k), so it is refused, saying how far the source reaches."""
    squad = {
        "data": [
            {
                "title": "t",
                "paragraphs": [
                    {
                        "context": f"Paragraph {i} says the colour number {i} is {c}.",
                        "qas": [
                            {
                                "question": f"What is colour number {i}?",
                                "is_impossible": False,
                                "answers": [{"text": c}],
                            }
                        ],
                    }
                    for i, c in enumerate(["red", "green", "blue"])
                ],
            }
        ]
    }
    (tmp_path / "squad.json").write_text(json.dumps(squad))
    options = ruler.RulerOptions(
        ruler_task="qa_squad", num_samples=2, essays="synthetic", squad=str(tmp_path / "squad.json")
    )
    with pytest.raises(ruler.SourceTooShortError) as refused:
        ruler.generate(options, 1024, counter, use_cache=False)
    builder = ruler.BUILDERS["qa"](
        ruler.TASKS["qa_squad"].params, random.Random("qa_squad-1024-0-42"), 1024, options, True
    )
    whole = counter.count_rendered(["{0} {2}".format(*builder.build(builder.n_max))])[0]  # every paragraph shown
    message = str(refused.value)
    assert message.startswith(
        f"RULER qa_squad at length 1024: its source (squad={tmp_path / 'squad.json'}) reaches "
        f"only {whole} prompt tokens of the {1024 - ruler.TASKS['qa_squad'].budget} asked"
    )
    assert "\n" not in message


def test_missing_essays_say_what_to_fetch(counter, monkeypatch):
    from harness.data.documents import MissingDataError

    with pytest.raises(MissingDataError, match="essays"):
        ruler.generate(
            ruler.RulerOptions(ruler_task="niah_single_2", num_samples=1, essays="/nonexistent/essays"),
            1024,
            counter,
            use_cache=False,
        )


def test_ruler_scores_follow_the_official_definitions():
    score = RulerTask.score_sample
    all_task = type("T", (), {"spec": ruler.TASKS["niah_multivalue"]})()
    part_task = type("T", (), {"spec": ruler.TASKS["qa_squad"]})()
    doc = {"outputs": ["1234567", "7654321", "Apple", "pear"]}
    assert score(all_task, doc, " 1234567 and APPLE\x01") == 50.0  # case-insensitive, fraction of references
    assert score(part_task, doc, "apple") == 100.0  # any reference
    assert score(part_task, doc, "banana") == 0.0
    assert score(all_task, {"outputs": ["a b"]}, "a\nb") == 0.0  # control characters become newlines


def _ruler_match(prediction: str, references: list[str], part: bool) -> float:
    """RULER's scoring written out: control characters become newlines, then case-insensitive containment of
    each reference; string_match_part scores 100 if any reference is contained, string_match_all the
    percentage of references contained."""
    pred = re.sub(r"[\x00-\x1f]", "\n", prediction.strip()).strip().lower()
    found = [ref.lower() in pred for ref in references]
    return 100.0 * (float(any(found)) if part else sum(found) / len(found))


def run_lch_eval(tmp_path, model_args: str, tasks: str, metadata: dict) -> dict:
    """``lch eval`` in a subprocess, as a user runs it; returns the results JSON."""
    import glob
    import subprocess
    import sys
    from pathlib import Path

    subprocess.run(
        [
            str(Path(sys.executable).parent / "lch"),
            "eval",
            "--model",
            "hf-pic",
            "--model_args",
            model_args,
            "--device",
            "cpu",
            "--tasks",
            tasks,
            "--log_samples",
            "--output_path",
            str(tmp_path),
            "--metadata",
            json.dumps(metadata),
        ],
        check=True,
        capture_output=True,
    )
    return json.loads(Path(glob.glob(str(tmp_path / "**" / "results_*.json"), recursive=True)[0]).read_text())


def test_lch_ruler_in_lm_eval_two_lengths(tiny_model_dir, tmp_path):
    metadata = {
        "lengths": [1024, 2048],
        "num_samples": 1,
        "essays": "synthetic",
        "squad": "synthetic",
        "hotpotqa": "synthetic",
    }
    results = run_lch_eval(tmp_path, f"pretrained={tiny_model_dir},max_length=1500", "lch_ruler", metadata)["results"]
    leaves = [t for t in results if t.startswith("lch_ruler_") and t != "lch_ruler_niah_m"]
    assert len(leaves) == 13
    for name in leaves:
        r = results[name]
        # every score re-derived from the logged generations: one sample per length, RULER's string match
        samples = [
            json.loads(line)
            for path in tmp_path.rglob(f"samples_{name}_*.jsonl")
            if re.fullmatch(rf"samples_{name}_\d{{4}}-.*\.jsonl", path.name)
            for line in path.read_text().splitlines()
        ]
        assert sorted(s["doc"]["length"] for s in samples) == [1024, 2048]
        part = name in ("lch_ruler_qa_squad", "lch_ruler_qa_hotpot")
        expected = {
            s["doc"]["length"]: _ruler_match(s["filtered_resps"][0], s["doc"]["outputs"], part) for s in samples
        }
        assert r["len_1024,none"] == pytest.approx(expected[1024])
        assert r["len_2048,none"] == pytest.approx(expected[2048])
        assert r["score,none"] == pytest.approx((expected[1024] + expected[2048]) / 2)
        assert r["score,none"] == pytest.approx((r["len_1024,none"] + r["len_2048,none"]) / 2)
        # max_length=1500: the 1024 prompts fit, every 2048 prompt is cut by the truncation policy (counted), so
        # nothing sent is over the length
        assert r["n_truncated,none"] == 1.0 and r["n_truncated_len_2048,none"] == 1.0, name
        assert r["over_length,none"] == 0.0, name
        assert r["over_target,none"] == 0.0
        # the needle tasks also score each sample's depth bucket at its length; cells without samples are left out
        depth = {k for k in r if k.startswith(("depth_", "n_depth_")) and "_stderr," not in k}
        cells = {
            f"depth_{s['doc']['depth_bucket']}_len_{s['doc']['length']}": s["doc"]["length"]
            for s in samples
            if name.startswith("lch_ruler_niah")
        }
        assert depth == {f"{count}{cell},none" for cell in cells for count in ("", "n_")}
        for cell, length in cells.items():
            assert r[f"{cell},none"] == pytest.approx(expected[length]) and r[f"n_{cell},none"] == 1
    import yaml

    from harness.tasks import TASKS_PATH

    niah_m = yaml.safe_load((TASKS_PATH / "lch_ruler" / "lch_ruler_niah_m.yaml").read_text())["task"]  # its one home
    for group, members in (("lch_ruler", leaves), ("lch_ruler_niah_m", niah_m)):
        for key in ("len_1024,none", "len_2048,none"):
            assert results[group][key] == pytest.approx(sum(results[m][key] for m in members) / len(members))


def test_additive_counts_equal_full_tokenization(counter):
    """The segment-sum path agrees with whole-prompt tokenization, and a dirty junction is refused."""
    seg = ruler.SegmentCounter(counter)
    b = niah_builder(ruler.TASKS["niah_multivalue"].params, random.Random(1), 2048, SYNTHETIC, True)
    for n in (0, 5, 40):
        text, _, prefix = b.build(n)
        assert seg.count(b.parts(n), prefix) == counter(text, prefix)
    # a junction is used only where the halves tokenize to the whole; elsewhere there is no additive answer
    sentence, dirty = "The special magic number is here, there and everywhere.", set()
    for i in range(1, len(sentence)):
        whole = len(counter.tokenizer(sentence)["input_ids"])
        got = seg.count([sentence[:i], sentence[i:]], "")
        halves = sum(
            len(counter.tokenizer(x, add_special_tokens=False)["input_ids"]) for x in (sentence[:i], sentence[i:])
        )
        assert got == (whole if halves + 1 == whole else None)  # + 1: the BOS
        if got is None:
            dirty.add(i)
    # expected from the pre-tokenizer alone: byte-level BPE never merges across pre-tokens, so every cut between
    # two pre-tokens is clean, and cutting a word that is one token makes two tokens of it, so those cuts are dirty
    pieces = counter.tokenizer.backend_tokenizer.pre_tokenizer.pre_tokenize_str(sentence)
    assert dirty.isdisjoint(end for _, (_, end) in pieces)
    one_token = [
        (a, b)
        for _, (a, b) in pieces
        if len(counter.tokenizer(sentence[a:b], add_special_tokens=False)["input_ids"]) == 1
    ]
    cuts = {i for a, b in one_token for i in range(a + 1, b)}
    assert cuts == {1, 2} and cuts <= dirty  # "The" is one token here
    # and the additive fit lands where the full-tokenization search does, or one unit apart at most
    builders = [
        niah_builder(ruler.TASKS["niah_single_2"].params, random.Random(f"x{i}"), 2048, SYNTHETIC, True)
        for i in range(4)
    ]
    additive = fit_additive(builders, ruler.SegmentCounter(counter), 1900)
    full = fit_full(builders, counter, 1900)
    for (n_a, c_a), (n_f, _c_f), b in zip(additive, full, builders):
        assert c_a == counter(b.build(n_a)[0], b.build(n_a)[2]) <= 1900
        assert counter(b.build(n_a + 1)[0], b.build(n_a + 1)[2]) > 1900  # the largest n that fits
        assert n_f <= n_a


def test_essays_from_a_local_folder_and_qa_from_hf_rows(tmp_path, counter, monkeypatch):
    (tmp_path / "essays").mkdir()
    (tmp_path / "essays" / "a.txt").write_text("Zebras graze on the open plain. " * 30 + "Owls hunt at night. " * 30)
    row = ruler.generate(
        ruler.RulerOptions(ruler_task="niah_single_2", num_samples=1, essays=str(tmp_path / "essays")),
        1024,
        counter,
        use_cache=False,
    )[0]
    assert "Zebras graze on the open plain." in row["input"] and row["outputs"][0] in row["input"]

    import datasets

    from harness.data import haystacks

    def fake_hf(name, config=None, split=None):  # the HF column layouts of both datasets
        if name == haystacks.SQUAD_HF[0]:
            return [
                {
                    "question": f"Q{i}?",
                    "context": f"Doc {i} says A{i}.",
                    "answers": {"text": [f"A{i}"], "answer_start": [0]},
                }
                for i in range(20)
            ] + [{"question": "none?", "context": "x", "answers": {"text": [], "answer_start": []}}]
        return [
            {
                "question": f"H{i}?",
                "answer": f"B{i}",
                "context": {"title": [f"T{i}", f"U{i}"], "sentences": [[f"B{i} is ", "here."], ["y."]]},
            }
            for i in range(20)
        ]

    monkeypatch.setattr(datasets, "load_dataset", fake_hf)
    haystacks.load_qa.cache_clear()
    squad = haystacks.load_qa("squad")
    assert len(squad.questions) == 20 and squad.questions[3] == ("Q3?", ("A3",), (3,))
    hotpot = haystacks.load_qa("hotpotqa")
    assert (
        hotpot.questions[2][:2] == ("H2?", ("B2",)) and hotpot.documents[hotpot.questions[2][2][0]] == "T2\nB2 is here."
    )
    haystacks.load_qa.cache_clear()
