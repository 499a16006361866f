"""Resumable runs for our request types through lm-eval's response cache (``--use_cache PATH``):
:func:`answer_with_cache` reuses cached responses and stores each new one at once (never sampled ones; a cached entry
of the wrong shape is recomputed). lm-eval keys a response by its request alone, so a database is claimed by its first
run's :class:`CacheOwner` and a run of any other owner is refused in one line (:class:`ClaimsResponseCache`)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from lm_eval.api.model import hash_args

from harness.core.errors import UsageError
from harness.core.run_record import RunRecord, chat_template_field
from harness.engines.metering import meter
from harness.engines.requests import check_response
from harness.models import model_check

OWNER_KEY = "lch:owner"  # the database entry naming the run its responses belong to (lm-eval's keys are hex hashes)


@dataclass(frozen=True)
class CacheOwner:
    """What every response in a response cache depends on besides its request: engine, model and adapter content,
    tokenizer, inference, dtype, the other model args that change an answer, and library versions."""

    engine: str
    model: str
    adapter: str | None
    tokenizer: str
    inference: str
    dtype: str
    settings: str
    libraries: str

    def differences(self, other: CacheOwner) -> list[str]:
        """``<field> <this owner's> (this run: <other's>)`` for each field that differs."""
        return [
            f"{f.name} {getattr(self, f.name)} (this run: {getattr(other, f.name)})"
            for f in fields(self)
            if getattr(self, f.name) != getattr(other, f.name)
        ]

    @classmethod
    def recorded(cls, record: dict) -> CacheOwner:
        """The owner a database recorded; a field it lacks reads as not recorded (so it differs)."""
        return cls(**{f.name: record.get(f.name, "not recorded (an older lch)") for f in fields(cls)})


# model args that change how a run is computed but none of its answers (batching, placement, memory)
NOT_IN_ANSWERS = frozenset(
    {
        "pretrained",
        "peft",
        "lora_local_path",
        "checkpoint",
        "tokenizer",
        "dtype",
        "batch_size",
        "max_batch_size",
        "device",
        "parallelize",
        "device_map",
        "gpu_memory_utilization",
        "swap_space",
        "trust_remote_code",
    }
)


def answer_settings(model_args: dict) -> str:
    """``k=v, ...`` of the model args that may change a response (every one but :data:`NOT_IN_ANSWERS`, which have
    fields of their own or change no answer), sorted; ``none`` when there is none."""
    kept = {k: v for k, v in model_args.items() if k not in NOT_IN_ANSWERS}
    return ", ".join(f"{k}={v}" for k, v in sorted(kept.items(), key=lambda kv: str(kv[0]))) or "none"


def tokenizer_identity(source: Any, tokenizer: Any) -> str:
    """The tokenizer a run encodes with: its folder's content (:func:`~harness.models.identity.model_identity`; a hub
    name as itself) and a digest of its chat template (``none`` without one)."""
    import hashlib
    import json

    from harness.models.identity import model_identity

    template = getattr(tokenizer, "chat_template", None)
    digest = hashlib.sha256(json.dumps(template, sort_keys=True).encode()).hexdigest()[:16] if template else "none"
    files = model_identity(source) if isinstance(source, (str, Path)) else type(source).__name__
    return f"{files}; chat template {digest}"


def libraries_in_words(*names: str) -> str:
    """``name version, ...`` of the installed libraries among ``names``."""
    return ", ".join(f"{name} {version}" for name, version in model_check.library_versions(*names).items())


def claim_response_cache(hook: Any, owner: CacheOwner) -> None:
    """Record ``owner`` in the database behind lm-eval's cache ``hook`` (none: nothing to do), or refuse, in one
    line, a database holding another owner's responses; one with no owner recorded is claimed with a warning."""
    db = getattr(hook, "dbdict", None)
    if db is None:
        return
    where = getattr(db, "filename", "the response cache")
    recorded = db.get(OWNER_KEY)
    if recorded is None:
        if len(db):
            print(
                f"{where}: its responses carry no record of the model that computed them (an older lch); reusing "
                "them as they are",
                file=sys.stderr,
            )
        db[OWNER_KEY] = asdict(owner)
        return
    theirs = CacheOwner.recorded(recorded) if isinstance(recorded, dict) else None
    if theirs != owner:
        why = "; ".join(theirs.differences(owner)) if theirs is not None else "an unreadable owner record"
        raise UsageError(
            f"--use_cache {where} holds the responses of another run ({why}): give this run its own "
            f"--use_cache path, or delete {where} to start it afresh"
        )


class ClaimsResponseCache:
    """Mixin of our lm-eval models: claims lm-eval's response cache for :meth:`cache_owner` when lm-eval sets the
    cache hook (once, before any request), and records :meth:`run_record` in lm-eval's results."""

    def cache_owner(self) -> CacheOwner:
        raise NotImplementedError

    def run_device(self) -> str:
        """The device the model actually runs on (not lm-eval's ``--device``, which says cuda:0 on a CPU too)."""
        raise NotImplementedError

    def model_folder(self) -> Any:
        """The base model's folder (or hub id, or object) this model was built from."""
        raise NotImplementedError

    def run_record(self) -> RunRecord:
        """What this model runs with (:class:`harness.core.run_record.RunRecord`); lm-eval adds batch size and seeds."""
        from harness.models.folders import describe_architecture

        owner = self.cache_owner()
        max_length = getattr(self, "max_length", None)
        template_of = getattr(self, "chat_template", None)  # lm-eval's TemplateLM: the text for a setting
        return RunRecord(
            engine=owner.engine,
            dtype=owner.dtype,
            device=self.run_device(),
            max_length=None if max_length is None else str(max_length),
            inference=owner.inference,
            model=owner.model,
            architecture=describe_architecture(self.model_folder()),
            adapter=owner.adapter,
            libraries=owner.libraries,
            chat_template=chat_template_field(template_of) if callable(template_of) else None,
        )

    def get_model_info(self) -> dict:
        """lm-eval's model info (of the class below this mixin) plus :meth:`run_record` under ``lch_run``."""
        base = super().get_model_info() if hasattr(super(), "get_model_info") else {}  # type: ignore[misc]
        return {**base, **self.run_record().as_info()}

    def set_cache_hook(self, cache_hook: Any) -> None:
        claim_response_cache(cache_hook, self.cache_owner())
        super().set_cache_hook(cache_hook)  # type: ignore[misc]


# compute(requests, done): runs the model on requests and calls done(index, response) for each one
Compute = Callable[[list, Callable[[int, Any], None]], None]


def _cacheable(request: Any) -> bool:
    options = request.args[1] if len(request.args) > 1 and isinstance(request.args[1], dict) else {}
    return not options.get("do_sample", False)


def _checked(request_type: str, cached: Any) -> Any:
    """A cached response, or None (a miss) when there is none or it is of the wrong shape."""
    if cached is None:
        return None
    try:
        check_response(request_type, cached)
    except ValueError as err:
        print(f"{request_type}: a cached response of the wrong shape is recomputed ({err})", file=sys.stderr)
        return None
    return cached


def answer_with_cache(lm: Any, request_type: str, requests: list, compute: Compute) -> list:
    """Responses to ``requests``, from lm-eval's response cache where present, else from ``compute``."""
    hook = getattr(lm, "cache_hook", None)
    db = getattr(hook, "dbdict", None)
    results: list[Any] = [None] * len(requests)
    if db is not None:
        for i, req in enumerate(requests):
            if _cacheable(req):
                results[i] = _checked(request_type, db.get(hash_args(request_type, req.args)))
    todo = [i for i, r in enumerate(results) if r is None]
    if db is not None:
        print(
            f"{request_type}: {len(requests) - len(todo)} of {len(requests)} responses from the response cache",
            file=sys.stderr,
        )
    if not todo:
        return results

    def done(j: int, response: Any) -> None:
        i = todo[j]
        results[i] = response
        if hook is not None and db is not None and _cacheable(requests[i]):
            hook.add_partial(request_type, requests[i].args, response)

    computing = [requests[i] for i in todo]

    def computed() -> list:
        compute(computing, done)
        return [results[i] for i in todo]

    meter(lm, request_type, computing, computed)  # the run's cost: what was computed (harness.engines.metering)
    missing = [i for i in todo if results[i] is None]
    if missing:
        raise RuntimeError(f"{request_type}: no response computed for {len(missing)} requests")
    return results
