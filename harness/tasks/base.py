"""The one base of our lm-eval task classes: the plumbing every task of ours shares, written once.

lm-eval builds a task from its YAML (``class: !function utils.<Class>``) and then asks it for requests,
per-document metrics and aggregations. :class:`LchTask` owns what all our tasks need from that:

* the YAML's ``class`` key is dropped before lm-eval validates the config;
* options: the class names its options dataclass (``OPTIONS``, composed of the data layer's, the
  models layer's and its own), parsed once per task and run from the task metadata into
  :attr:`LchTask.options` (a wrong value fails in one line naming the task, the key and the type; the preflight's
  parse of the same metadata is reused); the options in effect are written back into the metadata, so the results
  JSON records them;
* the dataset: the YAML's ``custom_dataset`` names a builder that takes the parsed options and the model keys
  (:meth:`LchTask.download`), never the raw metadata;
* per-document metrics come from :meth:`LchTask.document_metrics` = :meth:`score_document` (or the
  YAML's own ``process_results``) plus :meth:`LchTask.extra_document_metrics` (length honesty);
  metrics a class adds itself are declared by :meth:`LchTask.extra_metrics`;
* in a task whose documents do not all have every metric (``PARTIAL``: per-length scores, depth cells, samples left
  unscored), every document reports every metric the task declares, ``None`` where the metric is not the document's,
  and each aggregation takes the documents that have it (:class:`PresentItems`): the metric keys of a run depend on
  the task's options, never on which documents a process drew, which lm-eval's data parallelism needs (it gathers
  every key of the first process from every process);
* requests: ``REQUEST_TYPE = None`` keeps lm-eval's own request for the YAML's ``output_type``
  (``generate_until`` ...); otherwise ``REQUEST_TYPE`` names one of our declared request types
  (:data:`harness.engines.requests.REQUESTS`; checked when the class is defined), the config's
  ``output_type`` is the lm-eval type it stands in for (filled in here: the YAML states none), and each
  document sends one request built by the declaration from :meth:`request_text` and :meth:`request_options`;
* the generation budget lives in one place, ``generation_kwargs["max_gen_toks"]``, set by
  :meth:`configure` and read by :meth:`generation_budget`;
* what each metric rests on (:meth:`LchTask.support`: samples, documents, key tokens) is declared in the results
  metadata, and the run's results carry a caution where that is too little (:mod:`harness.metrics.support`);
* length honesty (``COUNTS_PROMPT``): every prompt lm-eval built (chat template included) is counted in
  the evaluated model's tokenizer and reported as ``sample_tokens`` (as built) / ``prompt_tokens`` (as sent, after
  a truncation policy) / ``over_length`` (and ``over_target`` for samples fitted to a length, ``TARGETED``).
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass
import json
import logging
from pathlib import Path
from typing import Any, ClassVar

from lm_eval.api.instance import Instance
from lm_eval.api.task import ConfigurableTask

from harness.data.prompt_tokens import ModelKeys
from harness.engines.requests import REQUESTS, RequestOptions, RequestType
from harness.metrics.catalogue import metric_role
from harness.metrics.support import Support, documents_support, samples_support
from harness.core.cache_keys import undeclared_shapes
from harness.core.options import parse_options
from harness.core import results as keys
from harness.tasks.metric_lists import HONESTY_METRICS, TARGET_METRIC, PresentItems, described
from harness.tasks.prompt_lengths import PromptLengths

log = logging.getLogger(__name__)
_PARSED: dict[tuple, tuple] = {}  # (class, task, metadata JSON) -> (model keys, options): parsed once per process

NO_LENGTH = "-"  # the length of a sample that was not fitted to one (a plan's cell of a task without lengths)


@dataclass(frozen=True)
class CachedCounts:
    """A task's samples of one length (:data:`NO_LENGTH`: samples not fitted to one) as it caches them: each sample's
    prompt tokens as a run sends them and its generation budget, whether what the run needs of them was cached before
    (False: made just now, or to be made by the run), the tokens whose log-probabilities are scored, and the model
    the run loads beside the evaluated one to make what is not cached (``(name, dtype)``: LongPPL's evaluator)."""

    length: str
    prompts: tuple[int, ...]
    budgets: tuple[int, ...]
    cached: bool
    scored_tokens: int = 0
    helper: tuple[str, str] | None = None


class LchTask(ConfigurableTask):
    """Base of every task class of ours (module docstring)."""

    OPTIONS: ClassVar[type | None] = None  # the task's options dataclass (None: no options of its own)
    REQUEST_TYPE: ClassVar[str | None] = None  # a key of REQUESTS; None: lm-eval's own request for the YAML output_type
    COUNTS_PROMPT = False  # count each prompt lm-eval built (length honesty)
    PARTIAL = False  # some documents lack some declared metric: each reports them all, None where not its own
    TARGETED = False  # samples carry the token length they were fitted to (doc["prompt_budget"])
    DEFAULT_MAX_GEN_TOKS = 256  # lm-eval's HF default, for generating tasks whose config sets none
    # the task caches data generated from its options, keyed by them (harness.core.cache_keys.data_key): every field of
    # OPTIONS declares how it shapes that data, checked when the class is built
    KEYED_OPTIONS = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.KEYED_OPTIONS and cls.OPTIONS is not None and undeclared_shapes(cls.OPTIONS):
            raise TypeError(f"{cls.__name__} caches data keyed by its options, but {cls.OPTIONS.__name__}'s "
                            f"{', '.join(undeclared_shapes(cls.OPTIONS))} declare no shapes= (how each changes the data)")
        if cls.REQUEST_TYPE is not None and cls.REQUEST_TYPE not in REQUESTS:
            raise TypeError(f"{cls.__name__}.REQUEST_TYPE {cls.REQUEST_TYPE!r} is not a declared request type "
                            f"({', '.join(REQUESTS)})")

    @classmethod
    def request_declaration(cls) -> RequestType | None:
        """The declaration of the request type this class sends (None: lm-eval's own)."""
        return None if cls.REQUEST_TYPE is None else REQUESTS[cls.REQUEST_TYPE]

    def __init__(self, config: dict | None = None, **kwargs: Any) -> None:
        config = {k: v for k, v in (config or {}).items() if k != "class"}
        declaration = self.request_declaration()
        if declaration is not None:  # lm-eval validates output_type; ours stands in for one of its types
            config["output_type"] = declaration.output_type
        yaml_scorer = config.get("process_results")
        self._yaml_scorer = yaml_scorer if callable(yaml_scorer) else None
        # Routing process_results through the config tells lm-eval the metrics are computed here, so it
        # does not look our metric names up in its registry (and in HF evaluate) one by one.
        config["process_results"] = self.process_document
        meta = dict(config.get("metadata") or {})
        self.model_keys, options = self.read_options(meta, config.get("task"))
        self.options = self.resolved_options(options)
        config["metadata"] = {**meta, **self.options_in_effect(), keys.CONFIGURATION: self.configuration(meta.get("version"))}
        self.configure(config)
        config["metric_list"] = described(list(config.get("metric_list") or []) + self.extra_metrics(dict(config["metadata"])),
                                          config.get("task"))
        names = [m["metric"] for m in config["metric_list"]]
        config["metadata"][keys.METRIC_ROLES] = {name: metric_role(name) for name in names}
        config["metadata"][keys.SUPPORT] = [support.to_json() for support in self.support(names)]
        super().__init__(config=config, **kwargs)
        if self.REQUEST_TYPE is not None:
            self.OUTPUT_TYPE = self.REQUEST_TYPE  # lm-eval's multi-rank padding keys on this

    @classmethod
    def read_options(cls, metadata: dict | None, task: str | None = None) -> tuple[ModelKeys, Any]:
        """``(model keys, OPTIONS)`` parsed from a task's metadata; :class:`~harness.core.errors.UsageError` in
        one line for a value of the wrong type (the preflight calls this before any model loads, and the task
        reuses that parse: one per task, metadata and process)."""
        key = (cls, task, json.dumps(metadata or {}, sort_keys=True, default=str))
        if key not in _PARSED:
            options = parse_options(cls.OPTIONS, metadata, task) if cls.OPTIONS is not None else None
            _PARSED[key] = (parse_options(ModelKeys, metadata, task), options)
        return _PARSED[key]

    @staticmethod
    def resolved_options(options: Any) -> Any:
        """``options`` with the defaults that depend on the run settled: a ``chat_template`` left unset fits the
        samples as the run renders its prompts (``--apply_chat_template``)."""
        if getattr(options, "chat_template", False) is None:
            from harness.core.run_record import run_applies_chat_template

            return dataclasses.replace(options, chat_template=bool(run_applies_chat_template()))
        return options

    @classmethod
    def plan_from_cache(cls, model_keys: ModelKeys, options: Any, limit: float | None) -> list[CachedCounts] | None:
        """What ``lch plan`` needs of this task without building its requests (one :class:`CachedCounts` per sample
        length), when the task can give it exactly from what it caches; None (the default): the plan builds the
        task's requests and counts them (:mod:`harness.plan.requests`)."""
        return None

    @classmethod
    def check_before_loading(cls, model_keys: ModelKeys, options: Any) -> None:
        """What the preflight checks of this task's data once its inputs are there, before any model loads (a
        one-line :class:`~harness.core.errors.LchError`); nothing by default."""

    def download(self, dataset_kwargs: dict | None = None, **kwargs: Any) -> None:
        """The dataset from the YAML's ``custom_dataset`` builder, given the parsed options and model keys (lm-eval
        would hand it the raw metadata, after advice about ``--metadata`` keys that none of our tasks has)."""
        build = self.config.custom_dataset
        if callable(build):
            self.dataset = build(self.options, self.model_keys)
        else:
            super().download(dataset_kwargs, **kwargs)

    def options_in_effect(self) -> dict:
        """The task's options (not the model's keys) as JSON values, None left out, and those of a source the task
        does not read (the options' ``unused()``: the HF dataset's name beside local ``data_files``)."""
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
        """What the task measured with, for reports that refuse to compare runs of different configurations
        (``lch regress``): the options in effect (:meth:`options_in_effect`) without those that only say where
        something is kept (declared ``location=True``: cache folders) or how the run reacts rather than what it
        measures (``measures=False``: whether fewer documents may do), files and folders by their names (declared
        ``path=True``: the same data elsewhere is the same configuration), and the YAML's ``version``."""
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
        """What each of ``metrics`` rests on (:mod:`harness.metrics.support`; the run's results carry a caution for
        each shortfall): a score on the samples scored; a perplexity on the ``num_docs`` documents asked for, when
        the task has that option and reports ``n_docs``."""
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

    def request_arguments(self, doc: dict, ctx: Any) -> tuple:
        """Arguments of the ``REQUEST_TYPE`` request of one document, built by its declaration."""
        declaration = self.request_declaration()
        assert declaration is not None, "only classes with a REQUEST_TYPE build requests of ours"
        return declaration.arguments(self.request_text(doc, ctx), self.request_options(doc))

    def prompt_to_send(self, doc: dict, ctx: Any) -> Any:
        """The prompt sent for ``doc`` once lm-eval built ``ctx`` and it was counted (default: ``ctx``; tasks that
        cut over-long prompts themselves return the cut one)."""
        return ctx

    def request_text(self, doc: dict, ctx: Any) -> str:
        """The text of one document's request (default: the YAML's ``doc_to_target``)."""
        return self.doc_to_target(doc)

    def request_options(self, doc: dict) -> RequestOptions | None:
        """The options of one document's request: the declaration's options dataclass (None: defaults)."""
        return None

    # ------------------------------------------------------------------ plumbing

    @property
    def task_metadata(self) -> dict:
        return dict(self.config.metadata or {})

    @functools.cached_property
    def max_length(self) -> int:
        """The evaluated model's max length, resolved as lm-eval's HF model does."""
        from harness.data.prompt_tokens import model_max_length

        return model_max_length(self.model_keys)

    def aggregation(self) -> dict:
        """lm-eval's aggregations of the declared metrics; in a ``PARTIAL`` task each over the documents that have it
        (:class:`PresentItems`)."""
        if not self.PARTIAL:
            return super().aggregation()
        if getattr(self, "_present", None) is None:
            self._present = {name: PresentItems(fn, name, self._record_aggregate)
                             for name, fn in super().aggregation().items()}
        return self._present

    def _record_aggregate(self, metric: str, n: int, stderr: float | None) -> None:
        if isinstance(self.config.metadata, dict):
            self.config.metadata.setdefault(keys.AGGREGATED, {})[metric] = {"n": n, "stderr": stderr}

    def process_document(self, doc: dict, results: list) -> dict:
        """The metrics of ``doc`` (:meth:`document_metrics`); in a ``PARTIAL`` task every declared one, None for those
        it does not have (module docstring)."""
        found = self.document_metrics(doc, results)
        return {**dict.fromkeys(self.aggregation()), **found} if self.PARTIAL else found

    def document_metrics(self, doc: dict, results: list) -> dict:
        """The metrics ``doc`` has: its score (:meth:`score_document` or the YAML's ``process_results``) and
        :meth:`extra_document_metrics`."""
        scorer = self._yaml_scorer or self.score_document
        return {**scorer(doc, results), **self.extra_document_metrics(doc, results)}

    def generation_budget(self) -> int:
        """``max_gen_toks`` of this task's generations (set in :meth:`configure`)."""
        return int((self.config.generation_kwargs or {}).get("max_gen_toks", self.DEFAULT_MAX_GEN_TOKS))

    def build_all_requests(self, *, cache_requests: bool = False, rewrite_requests_cache: bool = False,
                           **kwargs: Any) -> None:
        """lm-eval's, without its request cache for tasks that count their prompts: the counts and the cuts of the
        truncation policy are made while the requests are built (:meth:`construct_requests`), and lm-eval's cache key
        holds none of the task's options (a cache of another ``truncation`` or ``max_length`` would be reused)."""
        if self.COUNTS_PROMPT and (cache_requests or rewrite_requests_cache):
            log.warning("%s builds its requests anew: its prompt counts and cuts are made while building them, so "
                        "lm-eval's --cache_requests is not used for it", self.config.task)
            cache_requests = rewrite_requests_cache = False
        super().build_all_requests(cache_requests=cache_requests, rewrite_requests_cache=rewrite_requests_cache,
                                   **kwargs)

    def construct_requests(self, doc: dict, ctx: Any, **kwargs: Any) -> Any:
        if self.COUNTS_PROMPT:
            self.prompt_lengths.record(doc, ctx)
            ctx = self.prompt_to_send(doc, ctx)
        if self.REQUEST_TYPE is None:
            return super().construct_requests(doc, ctx, **kwargs)
        for key in ("apply_chat_template", "chat_template"):  # lm-eval passes them; our requests take none
            kwargs.pop(key, None)
        return Instance(request_type=self.REQUEST_TYPE, doc=doc, arguments=self.request_arguments(doc, ctx), idx=0,
                        **kwargs)

    # ------------------------------------------------------------------ length honesty

    @functools.cached_property
    def prompt_lengths(self) -> PromptLengths:
        """The counts of the prompts lm-eval built for this task (``COUNTS_PROMPT``), in the evaluated model's
        tokenizer (:class:`~harness.tasks.prompt_lengths.PromptLengths`)."""
        return PromptLengths(self.config.task, self.model_keys)

    def sent_tokens(self, doc: dict, built: int) -> int:
        """The tokens of the prompt sent for ``doc``, whose prompt as built had ``built`` (the same here; a task
        that cuts prompts says what it cut)."""
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
