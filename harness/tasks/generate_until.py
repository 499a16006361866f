"""lm-eval ``generate_until`` tasks with length honesty and per-length scores (RULER, BABILong, MRQA). A prompt over
``max_length - max_gen_toks`` is cut in its context by the ``truncation`` option before the request is built, on every
engine alike, and counted: ``n_truncated``, ``n_truncated_tokens``, ``n_skipped`` (unscored; a
:data:`SKIP_PLACEHOLDER_TOKENS`-token placeholder is sent: lm-eval wants a response)."""

from __future__ import annotations

from typing import Any

from lm_eval.api.metrics import mean as lm_eval_mean

from harness.data.lengths import length_tokens
from harness.data.truncation import Fitted, PromptParts, prompt_fitter
from harness.metrics.catalogue import TRUNCATION_COUNTS
from harness.metrics.pooling import total
from harness.metrics.support import Support, samples_support
from harness.tasks.base import LchTask
from harness.tasks.lm_eval_api import task_base
from harness.tasks.prompt_lengths import doc_key

SKIP_PLACEHOLDER_TOKENS = 16


# lm-eval's task class for the output type, chosen at run time (lm-eval ships no types)
_GenerateUntilBase: Any = task_base("generate_until")


class HonestGenerationTask(LchTask, _GenerateUntilBase):
    """``generate_until`` with length honesty, its over-long prompts cut by the ``truncation`` option and counted;
    subclasses implement :meth:`score_document`, or the YAML gives ``process_results``."""

    COUNTS_PROMPT = True
    PARTIAL = True  # a skipped sample has no score (and a per-length score or depth cell is its samples' only)

    def extra_metrics(self, meta: dict) -> list[dict]:
        return super().extra_metrics(meta) + [{"metric": name, "aggregation": total} for name in TRUNCATION_COUNTS]

    def prompt_to_send(self, doc: dict, ctx: Any) -> Any:
        """``ctx`` cut to ``max_length - max_gen_toks`` tokens by the ``truncation`` policy (a placeholder when
        skipped); unchanged when the run names no tokenizer (then nothing was counted either)."""
        counter = self.prompt_lengths.counter
        if counter is None or not isinstance(ctx, str):
            return ctx
        if getattr(self, "_fit", None) is None:
            self._fitted: dict[str, Fitted] = {}
            self._sent_tokens: dict[str, int] = {}
            self._fit = prompt_fitter(counter.tokenizer, lambda text: counter.count_rendered([text])[0])
        fitted = self._fit(
            ctx, self.prompt_parts(doc), self.max_length - self.generation_budget(), self.options.truncation
        )
        self._fitted[doc_key(doc)] = fitted
        sent = fitted.text
        if fitted.skipped:
            ids = counter.tokenizer(ctx, add_special_tokens=False)["input_ids"][:SKIP_PLACEHOLDER_TOKENS]
            sent = counter.tokenizer.decode(ids)
        if fitted.skipped or fitted.truncated:  # counted as sent, as lch plan and lch_cost count it
            self._sent_tokens[doc_key(doc)] = counter.count_rendered([sent])[0]
        return sent

    def prompt_parts(self, doc: dict) -> PromptParts:
        """``doc``'s text as instruction, context and question (only the context may be cut): from its ``context_span``
        (``[start, end)`` characters: RULER, BABILong), else its ``context`` field found once in the text (MRQA), else
        no context (an over-long prompt is then skipped)."""
        text = self.doc_to_text(doc)
        span = doc.get("context_span")
        if span is not None:
            return PromptParts.split(text, int(span[0]), int(span[1]))
        context = doc.get("context")
        if isinstance(context, str) and context and text.count(context) == 1:
            start = text.find(context)
            return PromptParts.split(text, start, start + len(context))
        return PromptParts(text, "", "")

    def construct_requests(self, doc: dict, ctx: Any, **kwargs: Any) -> Any:
        request = super().construct_requests(doc, ctx, **kwargs)
        fitted = self.fitted(doc)
        if fitted is not None and fitted.skipped:  # the placeholder generates one token, never scored
            for instance in request if isinstance(request, list) else [request]:
                text, generation = instance.arguments
                instance.arguments = (text, {**generation, "max_gen_toks": 1})
        return request

    def fitted(self, doc: dict) -> Fitted | None:
        """How ``doc``'s prompt was sent (None: not counted in this process)."""
        return getattr(self, "_fitted", {}).get(doc_key(doc))

    def sent_tokens(self, doc: dict, built: int) -> int:
        """What was sent: the prompt the policy cut, or the placeholder of a skipped sample, counted."""
        return getattr(self, "_sent_tokens", {}).get(doc_key(doc), built)

    def document_metrics(self, doc: dict, results: list) -> dict:
        fitted = self.fitted(doc)
        if fitted is not None and fitted.skipped:  # unscored: only what describes the run
            return self.extra_document_metrics(doc, results)
        return super().document_metrics(doc, results)

    def extra_document_metrics(self, doc: dict, results: list) -> dict:
        out = super().extra_document_metrics(doc, results)
        fitted = self.fitted(doc)
        if fitted is not None:
            out.update(zip(TRUNCATION_COUNTS, (int(fitted.truncated), fitted.removed, int(fitted.skipped))))
        return out


class PerLengthTask(HonestGenerationTask):
    """Scores ``score`` and ``len_<length>`` (mean x 100 each) for documents carrying ``doc["length"]``;
    the options have ``length_list()``."""

    TARGETED = True

    @staticmethod
    def label(length: Any) -> Any:
        """How this task names a length (in ``len_<label>`` and ``doc["length"]``)."""
        return length_tokens(length)

    def extra_metrics(self, meta: dict) -> list[dict]:
        # lm-eval's own mean, whose stderr lm-eval knows; a len_<L> sees only its own samples, never an empty list
        lengths = [self.label(x) for x in self.options.length_list()]
        out = [{"metric": "score", "aggregation": lm_eval_mean}]
        out += [{"metric": f"len_{n}", "aggregation": lm_eval_mean} for n in lengths]
        out += [{"metric": f"n_len_{n}", "aggregation": total} for n in lengths]
        out += [{"metric": f"{name}_len_{n}", "aggregation": total} for name in TRUNCATION_COUNTS for n in lengths]
        return out + super().extra_metrics(meta)

    def extra_document_metrics(self, doc: dict, results: list) -> dict:
        out = super().extra_document_metrics(doc, results)
        out.update({f"{name}_len_{doc['length']}": out[name] for name in TRUNCATION_COUNTS if name in out})
        return out

    def support(self, metrics: list[str]) -> list[Support]:
        """A per-length score rests on the samples of its length (``n_len_<L>``), the others as every task's."""
        return [
            samples_support(s.metric, f"n_{s.metric}") if s.metric.startswith("len_") else s
            for s in super().support(metrics)
        ]

    def score_sample(self, doc: dict, prediction: str) -> float:
        raise NotImplementedError

    def score_document(self, doc: dict, results: list) -> dict:
        value = self.score_sample(doc, results[0])
        return {"score": value, f"len_{doc['length']}": value, f"n_len_{doc['length']}": 1}
