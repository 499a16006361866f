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
"""

from __future__ import annotations

import sys
from typing import Any, Callable

from lm_eval.api.model import hash_args

from harness.lmeval.request_options import check_response

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
