"""The engine core: our request types (``token_logprobs``, ``lsm``, ``generate_long``) written once over an engine's
primitives (:meth:`EngineCore.score_hidden`, :meth:`EngineCore.score_head`, :meth:`EngineCore.generate_tokens`), as
lm-eval's ``TemplateLM`` writes ``loglikelihood``. The core owns request parsing, windows, the chunked fp32
log-softmax, the LSM estimators, prompt cutting, stop strings, ``--use_cache`` and progress bars."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import torch
from tqdm import tqdm

from harness.data.token_heads import encode_head
from harness.engines.metering import MetersLmEvalRequests
from harness.engines.requests import (
    GENERATE_LONG,
    LSM,
    TOKEN_LOGPROBS,
    LongGenerationOptions,
    LongGenerationResponse,
    LsmResponse,
    TokenLogprobsResponse,
    encode_for_scoring,
)
from harness.engines.response_cache import (
    CacheOwner,
    ClaimsResponseCache,
    answer_settings,
    answer_with_cache,
    libraries_in_words,
    tokenizer_identity,
)
from harness.engines.windows import ScoringWindow, scoring_windows
from harness.lsm.estimator import LsmRunner, lsm_direct, lsm_overlap
from harness.models.scoring import logprobs_from_hidden

if TYPE_CHECKING:
    from harness.engines.model_args import ResolvedArgs

log = logging.getLogger(__name__)
LSM_ESTIMATORS = {"overlap": lsm_overlap, "direct": lsm_direct}


@dataclass(frozen=True)
class Generated:
    """One generation: the generated token ids (the EOS or stop token that ended it not included) and whether
    EOS, a stop token or a stop string ended it (False: the token budget did)."""

    token_ids: list[int]
    stopped: bool


class EngineCore(MetersLmEvalRequests, ClaimsResponseCache):
    """Our request types over an engine's primitives, mixed into an lm-eval model class before lm-eval's own base
    (which supplies ``tokenizer``, ``tok_encode``, ``max_gen_toks``); also keeps the resolved model args
    (:meth:`adopt`) that the results and the response cache's owner record."""

    # the primitives each request type needs: a model serves it when it supplies every primitive of one option
    NEEDS: ClassVar[dict[str, tuple[tuple[str, ...], ...]]] = {
        TOKEN_LOGPROBS.name: (("score_hidden", "score_head"), ("row_logprobs",)),
        LSM.name: (("score_hidden", "score_head"),),
        GENERATE_LONG.name: (("generate_tokens",),),
    }
    ENGINE_NAME: ClassVar[str] = "engine"  # the lm-eval model name, set by @lch_model (harness.engines.registry)
    LIBRARIES: ClassVar[tuple[str, ...]] = ("torch", "transformers")  # whose versions its numbers depend on
    # supplied by the lm-eval model class EngineCore is mixed into (declared for the type checker only)
    tokenizer: Any
    tok_encode: Callable[..., list[int]]
    max_gen_toks: int

    # ------------------------------------------------------------------ the resolved model args

    def adopt(self, resolved: ResolvedArgs) -> ResolvedArgs:
        """Keep the resolved model args, logging which explicit args override the variant file."""
        self.resolved, self.inference, self.variant = resolved, resolved.inference, resolved.variant
        if resolved.variant is not None:  # overrides are of a variant file's values: none without one
            for override in resolved.overrides:
                log.warning(
                    "model_arg %s overrides the variant file of %s (%s)",
                    override,
                    resolved.adapter or resolved.pretrained,
                    resolved.variant.describe(),
                )
            log.info("variant %s: evaluating with %s", resolved.variant.describe(), resolved.inference.label())
        return resolved

    def engine_dtype(self) -> str:
        """The dtype the model runs in (resolved, never ``auto``)."""
        raise NotImplementedError

    def get_model_info(self) -> dict:
        """lm-eval's model info plus ``lch_inference``, ``lch_variant``, ``lch_evaluated_as`` and ``lch_run``."""
        from harness.pic.variants import results_info

        return {**super().get_model_info(), **results_info(self.variant, self.inference)}

    def model_folder(self) -> Any:
        return self.resolved.pretrained

    def cache_owner(self) -> CacheOwner:
        """What this model's responses depend on (:mod:`harness.engines.response_cache`)."""
        from harness.models.identity import model_identity

        pretrained, adapter = self.resolved.pretrained, self.resolved.adapter
        engine_args = self.resolved.engine_args
        return CacheOwner(
            engine=self.ENGINE_NAME,
            model=model_identity(pretrained) if isinstance(pretrained, str) else type(pretrained).__name__,
            adapter=model_identity(adapter) if adapter else None,
            tokenizer=tokenizer_identity(engine_args.get("tokenizer") or pretrained, self.tokenizer),
            inference=self.inference.label(),
            dtype=self.engine_dtype(),
            settings=answer_settings(engine_args),
            libraries=libraries_in_words(*self.LIBRARIES),
        )

    # ------------------------------------------------------------------ primitives (the adapter's)

    def score_hidden(self, rows: list[list[int]]) -> list[torch.Tensor]:
        """Final hidden states [len(row), H] of each token row (each starting at position 0)."""
        raise NotImplementedError

    def score_head(self, hidden: torch.Tensor) -> torch.Tensor:
        """fp32 logits [m, V] of hidden rows [m, H] (the family's post-head transform applied)."""
        raise NotImplementedError

    def generate_tokens(self, prompts: list[list[int]], options: LongGenerationOptions, budget: int) -> list[Generated]:
        """One :class:`Generated` per token prompt, at most ``budget`` new tokens each, under ``options``."""
        raise NotImplementedError

    @torch.inference_mode()
    def row_logprobs(self, rows: list[list[int]]) -> list[torch.Tensor]:
        """``log P(row[t] | row[:t])`` for ``t >= 1`` of each token row (float32 [len(row) - 1]); by default from
        :meth:`score_hidden` and :meth:`score_head`. An engine without hidden states may override it."""
        return [
            logprobs_from_hidden(self.score_head, hidden, torch.tensor(row))
            for row, hidden in zip(rows, self.score_hidden(rows))
        ]

    def score_window(self) -> int | None:
        """The longest row :meth:`row_logprobs` takes (None: any length)."""
        return None

    def prompt_limit(self, budget: int) -> int | None:
        """The longest prompt :meth:`generate_tokens` takes with ``budget`` new tokens (None: any length)."""
        return None

    def score_batch_size(self) -> int:
        """Rows per :meth:`score_hidden` call."""
        return 1

    def generation_batch_size(self) -> int:
        """Prompts per :meth:`generate_tokens` call (each call's responses are stored when it ends)."""
        return 1

    def check_lsm(self, context_length: int) -> None:
        """Refuse, in one line, an ``lsm`` request this engine cannot run (default: none)."""

    @property
    def show_progress(self) -> bool:
        return getattr(self, "rank", 0) == 0

    @classmethod
    def serves(cls, request_type: str) -> bool:
        """Whether this class supplies every primitive of one of the options ``request_type`` needs."""
        return any(
            all(getattr(cls, name) is not getattr(EngineCore, name) for name in option)
            for option in cls.NEEDS[request_type]
        )

    # ------------------------------------------------------------------ token_logprobs

    def token_logprobs(self, requests: list, disable_tqdm: bool = False) -> list[TokenLogprobsResponse]:
        """Per-token log-probabilities of whole texts, in half-overlapping windows beyond :meth:`score_window`."""
        return answer_with_cache(
            self, TOKEN_LOGPROBS.name, requests, lambda todo, done: self._token_logprobs(todo, done, disable_tqdm)
        )

    def _token_logprobs(self, requests: list, done: Callable[[int, Any], None], disable_tqdm: bool) -> None:
        encoded = [encode_for_scoring(self.tokenizer, *TOKEN_LOGPROBS.parse(req.args)) for req in requests]
        window = self.score_window()
        jobs: list[tuple[int, int, ScoringWindow]] = []  # (document, its k-th window, the window)
        pieces: dict[int, list[torch.Tensor | None]] = {}
        for i, enc in enumerate(encoded):
            n = len(enc["token_ids"])
            windows = scoring_windows(n, n if window is None else window) if n >= 2 else []
            if len(windows) > 1:
                log.warning(
                    "token_logprobs: a text of %d tokens is longer than the engine's %d-token window: scored in %d "
                    "windows",
                    n,
                    window,
                    len(windows),
                )
            if not windows:  # an empty or one-token text: nothing to predict
                done(i, {**enc, "logprobs": []})
                continue
            pieces[i] = [None] * len(windows)
            jobs += [(i, k, w) for k, w in enumerate(windows)]
        jobs.sort(key=lambda job: -(job[2].stop - job[2].start))  # similar lengths batched together
        # counted in tokens scored (a document can be 32k tokens: a bar of documents stands still for minutes)
        pbar = tqdm(
            total=sum(w.stop - w.first_target for _, _, w in jobs),
            unit="tok",
            unit_scale=True,
            disable=disable_tqdm or not self.show_progress,
            desc=f"Scoring tokens ({self.ENGINE_NAME})",
        )
        batch = max(1, self.score_batch_size())
        for start in range(0, len(jobs), batch):
            chunk = jobs[start : start + batch]
            rows = [encoded[i]["token_ids"][w.start : w.stop] for i, _, w in chunk]
            for (i, k, w), values in zip(chunk, self.row_logprobs(rows)):
                pieces[i][k] = piece = values[w.first_target - w.start - 1 :]
                pbar.update(len(piece))
                scored = [p for p in pieces[i] if p is not None]
                if len(scored) == len(pieces[i]):
                    del pieces[i]
                    done(i, {**encoded[i], "logprobs": torch.cat(scored).tolist()})
        pbar.close()

    # ------------------------------------------------------------------ lsm

    def lsm(self, requests: list, disable_tqdm: bool = False) -> list[LsmResponse]:
        """Long-short misalignment samples of whole texts (:mod:`harness.lsm.formulas`; args ``(text, LsmOptions)``);
        the draws depend only on the seed, so every engine scores the same pairs."""
        return answer_with_cache(self, LSM.name, requests, lambda todo, done: self._lsm(todo, done, disable_tqdm))

    def _lsm(self, requests: list, done: Callable[[int, Any], None], disable_tqdm: bool) -> None:
        runner = LsmRunner(lambda windows: torch.stack(self.score_hidden(windows.tolist())), self.score_head)
        for j, req in enumerate(
            tqdm(
                requests,
                disable=disable_tqdm or not self.show_progress,
                desc=f"Long-short misalignment ({self.ENGINE_NAME})",
            )
        ):
            text, options = LSM.parse(req.args)
            self.check_lsm(options.context_length)
            ids = encode_head(self.tokenizer, text, options.max_tokens, add_special_tokens=False).ids
            done(
                j,
                {
                    "sce": LSM_ESTIMATORS[options.estimator](
                        runner, torch.tensor(ids), options.context_length, options.n_samples, seed=options.seed
                    )
                },
            )

    # ------------------------------------------------------------------ generate_long

    def generate_long(self, requests: list, disable_tqdm: bool = False) -> list[LongGenerationResponse]:
        """Long-form generation (args ``(context, LongGenerationOptions)``; ``max_gen_toks`` None: the model's): text
        cut at the first stop string, ``ended_with_eos`` False when the budget ran out, ``n_tokens`` without the EOS. A
        prompt longer than :meth:`prompt_limit` is cut from the left."""
        return answer_with_cache(
            self, GENERATE_LONG.name, requests, lambda todo, done: self._generate_long(todo, done, disable_tqdm)
        )

    def _generate_long(self, requests: list, done: Callable[[int, Any], None], disable_tqdm: bool) -> None:
        from lm_eval.models.utils import maybe_truncate

        parsed = [GENERATE_LONG.parse(req.args) for req in requests]
        prompts, budgets = [], []
        for text, options in parsed:
            budget = self.max_gen_toks if options.max_gen_toks is None else options.max_gen_toks
            prompt = self.tok_encode(text)
            limit = self.prompt_limit(budget)
            if limit is not None:
                prompt, budget = maybe_truncate(
                    prompt, max_gen_toks=budget, max_model_len=limit + budget, side="left", verbose=True
                )
            prompts.append(prompt)
            budgets.append(budget)
        groups: dict = {}  # requests with the same options and budget generate together, longest first
        for i in sorted(range(len(requests)), key=lambda i: -len(prompts[i])):
            groups.setdefault((parsed[i][1], budgets[i]), []).append(i)
        pbar = tqdm(
            total=len(requests),
            disable=disable_tqdm or not self.show_progress,
            desc=f"Generating (long, {self.ENGINE_NAME})",
        )
        batch = max(1, self.generation_batch_size())
        for (options, budget), members in groups.items():
            for start in range(0, len(members), batch):
                chunk = members[start : start + batch]
                for i, out in zip(chunk, self.generate_tokens([prompts[i] for i in chunk], options, budget)):
                    done(i, self.long_generation_response(out, options.until))
                pbar.update(len(chunk))
        pbar.close()

    def long_generation_response(self, out: Generated, until: tuple[str, ...]) -> LongGenerationResponse:
        """The response of one generation: the decoded text cut at its first stop string."""
        text = self.tokenizer.decode(out.token_ids, skip_special_tokens=True)
        cut = min((text.find(u) for u in until if u and u in text), default=-1)
        return {
            "text": text if cut < 0 else text[:cut],
            "ended_with_eos": out.stopped or cut >= 0,
            "n_tokens": len(out.token_ids),
        }
