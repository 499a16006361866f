"""The one base of our lm-eval task classes, :class:`LchTask`: options parsed once from the task metadata (``OPTIONS``),
the dataset built from them, per-document metrics and their aggregations, our request types (``REQUEST_TYPE``), the
generation budget, what each metric rests on, and length honesty (``COUNTS_PROMPT``)."""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from lm_eval.api.task import ConfigurableTask

from harness.core import results as keys
from harness.core.cache_keys import undeclared_cache_key
from harness.core.options import parse_options
from harness.data.prompt_tokens import ModelKeys
from harness.engines.requests import REQUESTS, RequestOptions
from harness.longppl.formulas import EvaluatorRun
from harness.metrics.catalogue import metric_role
from harness.metrics.support import Support, documents_support, samples_support
from harness.tasks.lm_eval_api import bypass_scorers, task_base, task_scorer
from harness.tasks.metric_lists import HONESTY_METRICS, TARGET_METRIC, PresentItems, described, pooling_of
from harness.tasks.prompt_lengths import PromptLengths

log = logging.getLogger(__name__)
_PARSED: dict[tuple, tuple] = {}  # (class, task, metadata JSON) -> (model keys, options): parsed once per process

NO_LENGTH = "-"  # the length of a sample that was not fitted to one (a plan's cell of a task without lengths)


@dataclass(frozen=True)
class CachedCounts:
    """A task's samples of one length (:data:`NO_LENGTH`: not fitted to one) as cached: each sample's prompt tokens as
    sent and its generation budget, ``cached`` (False: made now, or to be made by the run), the scored tokens, and the
    model loaded beside the evaluated one to make what is not cached (LongPPL's evaluator:
    :class:`~harness.longppl.formulas.EvaluatorRun`)."""

    length: str
    prompts: tuple[int, ...]
    budgets: tuple[int, ...]
    cached: bool
    scored_tokens: int = 0
    helper: EvaluatorRun | None = None


class LchTask(ConfigurableTask):
    """Base of every task class of ours (module docstring)."""

    OPTIONS: ClassVar[type | None] = None  # the task's options dataclass (None: no options of its own)
    REQUEST_TYPE: ClassVar[str | None] = None  # a key of REQUESTS; None: lm-eval's own request for the YAML output_type
    COUNTS_PROMPT = False  # count each prompt lm-eval built (length honesty)
    PARTIAL = False  # some documents lack some declared metric: each reports them all, None where not its own
    TARGETED = False  # samples carry the token length they were fitted to (doc["prompt_budget"])
    DEFAULT_MAX_GEN_TOKS = 256  # lm-eval's HF default, for generating tasks whose config sets none
    # caches data keyed by OPTIONS (harness.core.cache_keys.data_key): each field declares cache_key=, checked at build
    KEYED_OPTIONS = False
    _present: dict[str, PresentItems] | None = None  # a PARTIAL task's aggregations, made on first use

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.KEYED_OPTIONS and cls.OPTIONS is not None and undeclared_cache_key(cls.OPTIONS):
            raise TypeError(
                f"{cls.__name__} caches data keyed by its options, but {cls.OPTIONS.__name__}'s "
                f"{', '.join(undeclared_cache_key(cls.OPTIONS))} declare no cache_key= (how each changes "
                "the data)"
            )
        if cls.REQUEST_TYPE is not None and cls.REQUEST_TYPE not in REQUESTS:
            raise TypeError(
                f"{cls.__name__}.REQUEST_TYPE {cls.REQUEST_TYPE!r} is not a declared request type "
                f"({', '.join(REQUESTS)})"
            )

    def __init__(self, config: dict | None = None, **kwargs: Any) -> None:
        config = {k: v for k, v in (config or {}).items() if k != "class"}
        if self.REQUEST_TYPE is not None:  # lm-eval validates output_type; ours stands in for one of its types
            config["output_type"] = REQUESTS[self.REQUEST_TYPE].output_type
        if config.get("output_type") and not isinstance(self, task_base(config["output_type"])):
            raise TypeError(
                f"{type(self).__name__} ({config.get('task')}) builds {config['output_type']} requests: "
                f"derive it from harness.tasks.lm_eval_api.task_base({config['output_type']!r}) too"
            )
        yaml_scorer = config.get("process_results")
        self._yaml_scorer = yaml_scorer if callable(yaml_scorer) else None
        # set in the config, lm-eval does not look our metric names up in its registry (and HF evaluate) one by one
        config["process_results"] = self.process_document
        meta = dict(config.get("metadata") or {})
        self.model_keys, options = self.read_options(meta, config.get("task"))
        self.options = self.resolved_options(options)
        config["metadata"] = {
            **meta,
            **self.options_in_effect(),
            keys.CONFIGURATION: self.configuration(meta.get("version")),
        }
        self.configure(config)
        config["metric_list"] = described(
            list(config.get("metric_list") or []) + self.extra_metrics(dict(config["metadata"])), config.get("task")
        )
        names = [m["metric"] for m in config["metric_list"]]
        config["metadata"][keys.METRIC_ROLES] = {name: metric_role(name) for name in names}
        config["metadata"][keys.METRIC_POOLING] = {
            m["metric"]: pooling_of(m, config.get("task")) for m in config["metric_list"]
        }
        config["metadata"][keys.SUPPORT] = [support.to_json() for support in self.support(names)]
        scorer = task_scorer()
        if scorer is not None:  # where lm-eval's tasks score through scorers, ours aggregates as 0.4.13 does
            config["scorer"] = scorer
        super().__init__(config=config, **kwargs)
        if self.REQUEST_TYPE is not None:
            self.OUTPUT_TYPE = self.REQUEST_TYPE  # lm-eval's multi-rank padding keys on this

    @classmethod
    def read_options(cls, metadata: dict | None, task: str | None = None) -> tuple[ModelKeys, Any]:
        """``(model keys, OPTIONS)`` parsed from a task's metadata, once per task, metadata and process (the preflight's
        parse is reused); a value of the wrong type is a one-line :class:`~harness.core.errors.UsageError`."""
        key = (cls, task, json.dumps(metadata or {}, sort_keys=True, default=str))
        if key not in _PARSED:
            options = parse_options(cls.OPTIONS, metadata, task) if cls.OPTIONS is not None else None
            _PARSED[key] = (parse_options(ModelKeys, metadata, task), options)
        return _PARSED[key]

    @staticmethod
    def resolved_options(options: Any) -> Any:
        """``options`` with an unset ``chat_template`` settled as the run renders its prompts."""
        if getattr(options, "chat_template", False) is None:
            from harness.core.run_record import run_applies_chat_template

            return dataclasses.replace(options, chat_template=bool(run_applies_chat_template()))
        return options

    @classmethod
    def plan_from_cache(cls, model_keys: ModelKeys, options: Any, limit: float | None) -> list[CachedCounts] | None:
        """What ``lch plan`` needs of this task (one :class:`CachedCounts` per length) when its cache gives it exactly;
        None (the default): the plan builds and counts the task's requests (:mod:`harness.plan.requests`)."""
        return None

    @classmethod
    def check_before_loading(cls, model_keys: ModelKeys, options: Any) -> None:
        """What the preflight checks of this task's data before any model loads (a one-line LchError); none by
        default."""

    def download(self, dataset_kwargs: dict | None = None, **kwargs: Any) -> None:
        """The dataset: the YAML's ``custom_dataset`` builder called with the parsed options and model keys."""
        build = self.config.custom_dataset
        if callable(build):
            self.dataset = build(self.options, self.model_keys)
        else:
            super().download(dataset_kwargs, **kwargs)

    def options_in_effect(self) -> dict:
        """The task's options (not the model keys) as JSON values, without None and the options' ``unused()``."""
        if self.options is None:
            return {}
        model_keys = {f.name for f in dataclasses.fields(ModelKeys)}
        unused = self.options.unused() if callable(getattr(self.options, "unused", None)) else set()
        out = {}
        for f in dataclasses.fields(self.options):
            value = getattr(self.options, f.name)
            if f.name not in model_keys and f.name not in unused and value is not None:
                out[f.name] = list(value) if isinstance(value, tuple) else value
        length_list = getattr(self.options, "length_list", None)
        if callable(length_list):  # RULER / BABILong: the lengths run, whichever key (and spelling) gave them
            out.pop("max_seq_lengths", None)
            out["lengths"] = list(length_list())
        return out

    def configuration(self, version: Any = None) -> dict:
        """What the task measured with, for reports that refuse to compare unlike runs (``lch regress``): the options in
        effect less those declared ``location=True`` or ``measures=False``, ``path=True`` ones by file name only, and
        the YAML's ``version``."""
        out: dict[str, Any] = {} if version is None else {"version": version}
        fields = {f.name: f for f in dataclasses.fields(self.options)} if self.options is not None else {}
        for name, value in self.options_in_effect().items():
            meta = fields[name].metadata
            if meta.get("location") or meta.get("measures") is False:
                continue
            if meta.get("path"):
                value = [Path(str(v)).name for v in value] if isinstance(value, list) else Path(str(value)).name
            out[name] = value
        return out

    # ------------------------------------------------------------------ hooks for subclasses

    def configure(self, config: dict) -> None:
        """Adjust the config (in place) before lm-eval reads it, e.g. set ``generation_kwargs``."""

    def extra_metrics(self, meta: dict) -> list[dict]:
        """Metric specs the class adds to the YAML's ``metric_list``."""
        specs = list(HONESTY_METRICS) if self.COUNTS_PROMPT else []
        return specs + ([TARGET_METRIC] if self.TARGETED else [])

    def support(self, metrics: list[str]) -> list[Support]:
        """What each of ``metrics`` rests on (:mod:`harness.metrics.support`): a score on the samples scored; a
        perplexity on the ``num_docs`` documents asked for, when the task has that option and reports ``n_docs``."""
        rules = [samples_support(m) for m in metrics if metric_role(m) == "score"]
        asked = getattr(self.options, "num_docs", None)
        if asked and "n_docs" in metrics:
            rules += [documents_support(m, int(asked)) for m in metrics if metric_role(m) == "perplexity"]
        return rules

    def score_document(self, doc: dict, results: list) -> dict:
        """Metrics of one document from its response(s)."""
        raise NotImplementedError(f"{type(self).__name__} needs score_document or a YAML process_results")

    def extra_document_metrics(self, doc: dict, results: list) -> dict:
        """Metrics every document gets besides its score (length honesty)."""
        return self.honesty(doc) if self.COUNTS_PROMPT else {}

    def prompt_to_send(self, doc: dict, ctx: Any) -> Any:
        """The prompt sent for ``doc`` once ``ctx`` was built and counted (``ctx``; tasks that cut prompts cut it)."""
        return ctx

    def request_text(self, doc: dict, ctx: Any) -> str:
        """The text of one document's request (default: the YAML's ``doc_to_target``)."""
        return self.doc_to_target(doc)

    def request_options(self, doc: dict) -> RequestOptions | None:
        """The options of one document's request: the declaration's options dataclass (None: defaults)."""
        return None

    # ------------------------------------------------------------------ plumbing

    @functools.cached_property
    def max_length(self) -> int:
        """The evaluated model's max length, resolved as lm-eval's HF model does."""
        from harness.data.prompt_tokens import model_max_length

        return model_max_length(self.model_keys)

    def aggregation(self) -> dict:
        """lm-eval's aggregations; in a ``PARTIAL`` task each over the documents that have the metric."""
        if not self.PARTIAL:
            return super().aggregation()
        present = self._present
        if present is None:
            present = {
                name: PresentItems(fn, name, self._record_aggregate) for name, fn in super().aggregation().items()
            }
            self._present = present
        return present

    def _record_aggregate(self, metric: str, n: int, stderr: float | None) -> None:
        if isinstance(self.config.metadata, dict):
            self.config.metadata.setdefault(keys.AGGREGATED, {})[metric] = {"n": n, "stderr": stderr}

    def override_metric(self, metric_name: str) -> None:
        """lm-eval's ``--predict_only``: ``metric_name`` alone (its ``bypass``), None for every document as in
        lm-eval's own tasks; our scorers do not run (a prediction-only run need not have what they read)."""
        scorers = bypass_scorers(metric_name, self.OUTPUT_TYPE)
        if scorers is None:  # 0.4.13: its evaluator aggregates by aggregation()
            super().override_metric(metric_name)
        else:
            self._scorers = scorers
        self._config.process_results = lambda doc, results: {metric_name: None}
        self._present = None

    def process_document(self, doc: dict, results: list) -> dict:
        """The metrics of ``doc``; in a ``PARTIAL`` task every declared one, None where not its own, so that every
        process of a data-parallel run reports the same keys (lm-eval gathers the first process's keys from all)."""
        found = self.document_metrics(doc, results)
        return {**dict.fromkeys(self.aggregation()), **found} if self.PARTIAL else found

    def document_metrics(self, doc: dict, results: list) -> dict:
        """The metrics ``doc`` has: its score (``score_document`` or the YAML's) and :meth:`extra_document_metrics`."""
        scorer = self._yaml_scorer or self.score_document
        return {**scorer(doc, results), **self.extra_document_metrics(doc, results)}

    def generation_budget(self) -> int:
        """``max_gen_toks`` of this task's generations (set in :meth:`configure`)."""
        return int((self.config.generation_kwargs or {}).get("max_gen_toks", self.DEFAULT_MAX_GEN_TOKS))

    def build_all_requests(
        self, *, cache_requests: bool = False, rewrite_requests_cache: bool = False, **kwargs: Any
    ) -> None:
        """lm-eval's, without its request cache for tasks that count prompts: the counts and cuts are made while the
        requests are built, and lm-eval's cache key holds none of the task's options."""
        if self.COUNTS_PROMPT and (cache_requests or rewrite_requests_cache):
            log.warning(
                "%s builds its requests anew: its prompt counts and cuts are made while building them, so "
                "lm-eval's --cache_requests is not used for it",
                self.config.task,
            )
            cache_requests = rewrite_requests_cache = False
        super().build_all_requests(
            cache_requests=cache_requests, rewrite_requests_cache=rewrite_requests_cache, **kwargs
        )

    def construct_requests(self, doc: dict, ctx: Any, **kwargs: Any) -> Any:
        """lm-eval's requests of the output type (its own constructor fills every field its ``Instance`` has); with a
        ``REQUEST_TYPE``, each made ours: that type, and its arguments."""
        if self.COUNTS_PROMPT:
            self.prompt_lengths.record(doc, ctx)
            ctx = self.prompt_to_send(doc, ctx)
        if self.REQUEST_TYPE is None:
            return super().construct_requests(doc, ctx, **kwargs)
        self.OUTPUT_TYPE = self.config.output_type  # what lm-eval's constructor builds (0.4.13 branches on it)
        try:
            built = super().construct_requests(doc, ctx, **kwargs)
        finally:
            self.OUTPUT_TYPE = self.REQUEST_TYPE
        if built is None:
            return built
        arguments = REQUESTS[self.REQUEST_TYPE].arguments(self.request_text(doc, ctx), self.request_options(doc))
        for instance in built if isinstance(built, list) else [built]:
            instance.request_type, instance.arguments = self.REQUEST_TYPE, arguments
        return built

    # ------------------------------------------------------------------ length honesty

    @functools.cached_property
    def prompt_lengths(self) -> PromptLengths:
        """Counts of the prompts lm-eval built for this task, in the evaluated model's tokenizer."""
        return PromptLengths(self.config.task, self.model_keys)

    def sent_tokens(self, doc: dict, built: int) -> int:
        """Tokens of the prompt sent for ``doc``, whose built prompt had ``built`` (tasks that cut prompts override)."""
        return built

    def honesty(self, doc: dict) -> dict:
        """``sample_tokens`` (the prompt lm-eval built), ``prompt_tokens`` (the prompt sent: :meth:`sent_tokens`);
        ``over_length`` = sent + budget > max_length; ``over_target`` = sample + budget > the length the sample was
        fitted to (TARGETED tasks); nothing for a prompt not counted."""
        n = self.prompt_lengths.tokens(doc)
        if n is None:
            return {}
        budget = self.generation_budget()
        sent = self.sent_tokens(doc, n)
        out = {"prompt_tokens": sent, "sample_tokens": n, "over_length": int(sent + budget > self.max_length)}
        if self.TARGETED and doc.get("prompt_budget"):
            out["over_target"] = int(n + budget > int(doc["prompt_budget"]))
        return out
