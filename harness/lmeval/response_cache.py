"""Resumable runs for our request types through lm-eval's own response cache (``--use_cache PATH``).

lm-eval's ``CachingLM`` caches only ``loglikelihood``, ``loglikelihood_rolling`` and ``generate_until``,
and passes other request types straight to the model; it still hands the model its cache hook (an
SQLite dict keyed by ``hash_args(request_type, args)``). :func:`answer_with_cache` uses that hook for
our request types: cached responses are returned without running the model, and every new response is
written as soon as it exists, so a killed run restarted with the same command re-computes only what was
not finished. Sampled generations (``do_sample``) are never cached, as lm-eval does for its own.
Without ``--use_cache`` the hook holds no database and this is a plain call. A cached entry that is not of
its request type's response shape (:func:`harness.lmeval.request_options.check_response`: an older or
damaged database) counts as a miss: it is recomputed and overwritten.

lm-eval keys a response by its request alone, so one database given to two runs (hf-pic then vllm-pic, another
dtype, another PIC setting, a model folder rebuilt at the same path, another environment's libraries) would hand
the second run the first one's answers. Our models therefore claim the database when lm-eval hands them its
hook (:class:`ClaimsResponseCache`): the first run records its :class:`CacheOwner` in it, and a run of any other
owner is refused in one line before it reads a response.
"""

from __future__ import annotations

import sys
from dataclasses import asdict, dataclass, fields
from typing import Any, Callable

from lm_eval.api.model import hash_args

from harness.errors import UsageError
from harness.models import model_check
from harness.lmeval.request_options import check_response
from harness.run_record import RunRecord

OWNER_KEY = "lch:owner"  # the database entry naming the run its responses belong to (lm-eval's keys are hex hashes)


@dataclass(frozen=True)
class CacheOwner:
    """What every response in a response cache depends on besides its request: the engine, the model's and the
    adapter's content (:func:`harness.models.identity.model_identity`), the inference applied, the dtype the
    model runs in and the versions of the libraries that compute it."""

    engine: str
    model: str
    adapter: str | None
    inference: str
    dtype: str
    libraries: str

    def differences(self, other: "CacheOwner") -> list[str]:
        """``<field> <this owner's> (this run: <other's>)`` for each field that differs."""
        return [f"{f.name} {getattr(self, f.name)} (this run: {getattr(other, f.name)})" for f in fields(self)
                if getattr(self, f.name) != getattr(other, f.name)]


def library_versions(*names: str) -> str:
    """``name version, ...`` of the installed libraries among ``names``, for :attr:`CacheOwner.libraries`."""
    return ", ".join(f"{name} {version}" for name, version in model_check.library_versions(*names).items())


def claim_response_cache(hook: Any, owner: CacheOwner) -> None:
    """Record ``owner`` in the database behind lm-eval's cache ``hook`` (none: nothing to do), or refuse, in one
    line, a database that holds another owner's responses. A database of responses with no owner recorded (an
    older lch) is claimed with a warning: its responses are reused as they are."""
    db = getattr(hook, "dbdict", None)
    if db is None:
        return
    where = getattr(db, "filename", "the response cache")
    recorded = db.get(OWNER_KEY)
    if recorded is None:
        if len(db):
            print(f"{where}: its responses carry no record of the model that computed them (an older lch); reusing "
                  "them as they are", file=sys.stderr)
        db[OWNER_KEY] = asdict(owner)
        return
    try:
        theirs = CacheOwner(**recorded)
    except TypeError:
        theirs = None
    if theirs != owner:
        why = "; ".join(theirs.differences(owner)) if theirs is not None else "an unreadable owner record"
        raise UsageError(f"--use_cache {where} holds the responses of another run ({why}): give this run its own "
                         f"--use_cache path, or delete {where} to start it afresh")


class ClaimsResponseCache:
    """Mixin of our lm-eval models: claims lm-eval's response cache for :meth:`cache_owner` when lm-eval hands the
    model its cache hook (``CachingLM`` calls ``set_cache_hook`` once, before any request), and records what the
    run was run with (:meth:`run_record`) in lm-eval's results."""

    def cache_owner(self) -> CacheOwner:
        raise NotImplementedError

    def run_device(self) -> str:
        """The device the model actually runs on (not lm-eval's ``--device``, which says cuda:0 on a CPU too)."""
        raise NotImplementedError

    def model_folder(self) -> Any:
        """The base model's folder (or hub id, or object) this model was built from."""
        raise NotImplementedError

    def run_record(self) -> RunRecord:
        """What this model runs with (:class:`harness.run_record.RunRecord`): the response cache's owner, the
        device, the maximum length and the architecture (lm-eval adds batch size, seeds and chat template)."""
        from harness.models.folders import describe_architecture

        owner = self.cache_owner()
        max_length = getattr(self, "max_length", None)
        return RunRecord(engine=owner.engine, dtype=owner.dtype, device=self.run_device(),
                         max_length=None if max_length is None else str(max_length), inference=owner.inference,
                         model=owner.model, architecture=describe_architecture(self.model_folder()),
                         adapter=owner.adapter, libraries=owner.libraries)

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
        print(f"{request_type}: {len(requests) - len(todo)} of {len(requests)} responses from the response cache",
              file=sys.stderr)
    if not todo:
        return results

    def done(j: int, response: Any) -> None:
        i = todo[j]
        results[i] = response
        if db is not None and _cacheable(requests[i]):
            hook.add_partial(request_type, requests[i].args, response)

    compute([requests[i] for i in todo], done)
    missing = [i for i in todo if results[i] is None]
    if missing:
        raise RuntimeError(f"{request_type}: no response computed for {len(missing)} requests")
    return results
