"""What a score rests on: the samples it was computed from, not those its task left unscored."""

from harness.metrics.support import SAMPLES_WHY, samples_support, task_cautions


def test_a_score_rests_on_the_samples_left_after_the_skipped_ones():
    """17 samples, 7 skipped as over-long (truncation=skip): em rests on 10; with none skipped, on 17."""
    supports = [samples_support("em"), samples_support("f1")]
    values = {"em,none": 10.0, "f1,none": 12.8, "sample_len": 17, "n_skipped,none": 7}
    assert task_cautions("mrqa_newsqa", values, supports) == [
        f"mrqa_newsqa: em rests on 10 samples, f1 on 10; fewer than 25 each: {SAMPLES_WHY}"
    ]
    assert task_cautions("t", {"em,none": 1.0, "sample_len": 17}, supports[:1]) == [
        f"t/em rests on 17 samples, fewer than 25: {SAMPLES_WHY}"
    ]
    assert task_cautions("t", {"em,none": 1.0, "sample_len": 30, "n_skipped,none": 30}, supports[:1]) == [
        "t/em rests on no samples: it means nothing"
    ]
