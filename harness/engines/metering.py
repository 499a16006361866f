"""Our models report what they compute to the run's cost (:mod:`harness.core.costs`): each call's requests, tokens and
seconds. Our request types are metered around :func:`~harness.engines.response_cache.answer_with_cache`'s ``compute``
(cache hits not counted), lm-eval's by :class:`MetersLmEvalRequests`. Tokens: a prompt as ``tok_encode`` encodes it, a
generation's text without special tokens (or the count the response carries), scored tokens as the type defines."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from functools import partial
from typing import Any

from harness.core.costs import record_requests

log = logging.getLogger(__name__)

Counts = tuple[int, int, int]  # (prompt tokens, generated tokens, scored tokens)


def _encode(lm: Any, text: str, special: bool | None = None) -> int:
    encode = getattr(lm, "tok_encode", None)
    if callable(encode):
        return len(encode(text) if special is None else encode(text, add_special_tokens=special))
    return len(lm.tokenizer(text, add_special_tokens=bool(special) if special is not None else True)["input_ids"])


def counts_of(lm: Any, request_type: str, args: tuple, response: Any) -> Counts:
    """The tokens one request cost (module docstring)."""
    text = args[0] if args and isinstance(args[0], str) else ""
    if request_type == "token_logprobs":
        n = len(response.get("token_ids") or [])
        return n, 0, max(0, n - 1)
    if request_type == "generate_long":
        return _encode(lm, text), int(response.get("n_tokens") or 0), 0
    if request_type == "generate_until":
        return _encode(lm, text), _encode(lm, response if isinstance(response, str) else "", False), 0
    if request_type == "loglikelihood":
        continuation = args[1] if len(args) > 1 and isinstance(args[1], str) else ""
        scored = _encode(lm, continuation, False)
        return _encode(lm, text) + scored, 0, scored
    n = _encode(lm, text)  # loglikelihood_rolling, lsm, compress_*: a forward over the text
    return n, 0, n if request_type == "loglikelihood_rolling" else 0


def meter(lm: Any, request_type: str, requests: list, compute: Callable[[], list]) -> list:
    """``compute()``'s responses to ``requests``, its seconds and the requests' tokens recorded for the run's cost;
    a counting failure is logged and never fails the run."""
    start = time.perf_counter()
    responses = compute()
    seconds = time.perf_counter() - start
    try:
        rows = [
            (getattr(req, "task_name", None), *counts_of(lm, request_type, req.args, resp))
            for req, resp in zip(requests, responses)
        ]
        record_requests(rows, seconds)
    except Exception as err:  # noqa: BLE001 (the cost is a record of the run, never a reason to fail it)
        log.warning("%s: the cost of %d requests was not recorded: %s", request_type, len(requests), err)
    return responses


class MetersLmEvalRequests:
    """lm-eval's own request methods of the model class below ours in the MRO, metered (nothing of lm-eval patched)."""

    # mypy ignores [misc] on the super() calls: a mixin, whose methods lm-eval's model class (next in the MRO) has

    def generate_until(self, requests: list, *args: Any, **kwargs: Any) -> list:
        return meter(self, "generate_until", requests, partial(super().generate_until, requests, *args, **kwargs))  # type: ignore[misc]

    def loglikelihood(self, requests: list, *args: Any, **kwargs: Any) -> list:
        return meter(self, "loglikelihood", requests, partial(super().loglikelihood, requests, *args, **kwargs))  # type: ignore[misc]

    def loglikelihood_rolling(self, requests: list, *args: Any, **kwargs: Any) -> list:
        return meter(
            self,
            "loglikelihood_rolling",
            requests,
            partial(super().loglikelihood_rolling, requests, *args, **kwargs),  # type: ignore[misc]
        )
