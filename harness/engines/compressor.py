"""``compressor``: a soft-prompt context compressor (:mod:`harness.compressor.model`) as an lm-eval model; without
``checkpoint`` (from ``lch train-compressor``) an untrained one, for smoke tests. ``generate_until`` compresses the
document's ``context_field`` text and reads the rest of the prompt after [LM] (the whole prompt when that field is
empty or not in it); ``loglikelihood`` is log P(continuation | memory of context, [LM]); ``compress_ae`` /
``compress_lm`` halve the text's first ``max_tokens`` tokens into context and completion: greedy reconstruction after
[AE] / the completion's log-probs after [LM]. Texts are tokenised without special tokens."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, cast

import lm_eval.models  # noqa: F401  (the built-in models register before ours)
import torch
from lm_eval.api.model import LM
from tqdm import tqdm

from harness.compressor.config import CompressorConfig
from harness.core.errors import UsageError
from harness.engines.model_args import check_model_path, refuse_unknown_args
from harness.engines.registry import lch_model
from harness.engines.requests import (
    COMPRESS_AE,
    COMPRESS_LM,
    REQUESTS,
    CompletionResponse,
    ReconstructionResponse,
)
from harness.engines.response_cache import (
    CacheOwner,
    ClaimsResponseCache,
    answer_settings,
    answer_with_cache,
    libraries_in_words,
    tokenizer_identity,
)
from harness.models.identity import model_identity

COMPRESSOR_ARGS = {"pretrained", "checkpoint", "dtype", "device", "max_gen_toks", "batch_size", "context_field"}
# the compressor settings a model arg may override: CompressorConfig's fields, but the training-only dropout
COMPRESSOR_OVERRIDES = tuple(f.name for f in dataclasses.fields(CompressorConfig) if f.name != "lora_dropout")


def check_compressor_args(args: dict) -> dict[str, Any]:
    """Refuse unknown args, missing model / checkpoint folders and settings outside :class:`CompressorConfig`'s
    domains, before anything loads; returns the settings given, converted."""
    from harness.core.options import parse_options

    refuse_unknown_args("compressor", args, COMPRESSOR_ARGS | set(COMPRESSOR_OVERRIDES))
    given = {key: args[key] for key in COMPRESSOR_OVERRIDES if args.get(key) is not None}
    config = parse_options(CompressorConfig, given, "compressor", label=lambda name: name)
    check_model_path(args.get("pretrained"), tokenizer=True)
    if args.get("checkpoint"):
        check_model_path(args["checkpoint"], "checkpoint", local=True)
    return {key: getattr(config, key) for key in given}


@lch_model("compressor", preflight=check_compressor_args)
class CompressorLM(ClaimsResponseCache, LM):
    def __init__(
        self,
        pretrained: str,
        checkpoint: str | None = None,
        dtype: str = "float32",
        device: str = "cpu",
        max_gen_toks: int = 64,
        batch_size: Any = 1,
        context_field: str = "context",
        **overrides: Any,
    ) -> None:
        super().__init__()
        from transformers import AutoModelForCausalLM, AutoTokenizer

        from harness.compressor.model import Compressor, CompressorConfig

        overrides = check_compressor_args({"pretrained": pretrained, "checkpoint": checkpoint, **overrides})
        base = AutoModelForCausalLM.from_pretrained(
            pretrained, dtype=getattr(torch, dtype) if dtype != "auto" else "auto"
        )
        self.tokenizer = AutoTokenizer.from_pretrained(pretrained)
        if checkpoint:
            self.compressor = Compressor.load(base, checkpoint, **overrides)
        else:
            self.compressor = Compressor(base, CompressorConfig(**overrides))
        if str(device).startswith("cuda") and not torch.cuda.is_available():  # lm-eval's default device
            device = "cpu"
        self.compressor.to(device).eval()
        self.device_name, self.max_gen_toks = device, int(max_gen_toks)
        self.context_field = str(context_field)
        self._sources = (pretrained, checkpoint, dtype, overrides)

    def cache_owner(self) -> CacheOwner:
        """What this model's responses depend on (:mod:`harness.engines.response_cache`)."""
        pretrained, checkpoint, dtype, overrides = self._sources
        return CacheOwner(
            engine=self.ENGINE_NAME,
            model=model_identity(pretrained),
            adapter=model_identity(checkpoint) if checkpoint else None,
            tokenizer=tokenizer_identity(pretrained, self.tokenizer),
            inference=answer_settings(overrides),
            dtype=dtype,
            settings=answer_settings({"context_field": self.context_field, "max_gen_toks": self.max_gen_toks}),
            libraries=libraries_in_words("torch", "transformers", "peft"),
        )

    def run_device(self) -> str:
        return str(self.device_name)

    def model_folder(self) -> str:
        return self._sources[0]

    def _ids(self, text: str) -> torch.Tensor:
        return torch.tensor(self.tokenizer(text, add_special_tokens=False)["input_ids"], device=self.device_name)

    @torch.no_grad()
    def loglikelihood(self, requests: list, disable_tqdm: bool = False) -> list[tuple[float, bool]]:
        out = []
        for req in tqdm(requests, disable=disable_tqdm, desc="Compressor loglikelihood"):
            context, continuation = req.args
            memory = self.compressor.compress(self._ids(context))
            target = self._ids(continuation)
            lp = self.compressor.target_logprobs(memory, "lm", target[:0], target)
            out.append((float(lp.sum()), False))
            self.cache_hook.add_partial("loglikelihood", req.args, out[-1])  # --use_cache: kept if killed
        return out

    def loglikelihood_rolling(self, requests: list, disable_tqdm: bool = False) -> list[float]:
        raise NotImplementedError("compressor: rolling loglikelihood has no context to compress; use compress_lm")

    @torch.no_grad()
    def generate_until(self, requests: list, disable_tqdm: bool = False) -> list[str]:
        out = []
        for req in tqdm(requests, disable=disable_tqdm, desc="Compressor generation"):
            ctx, gen_kwargs = req.args[0], dict(req.args[1] if len(req.args) > 1 else {})
            doc = getattr(req, "doc", None) or {}
            field = doc.get(self.context_field) if self.context_field else None
            if isinstance(field, str) and field in ctx:
                context, prompt = field, ctx.replace(field, "", 1)
            else:
                context, prompt = ctx, ""
            tokens = self.compressor.generate(
                self._ids(context),
                self._ids(prompt),
                int(gen_kwargs.get("max_gen_toks", self.max_gen_toks)),
                eos_token_id=self.tokenizer.eos_token_id,
            )
            text = cast(str, self.tokenizer.decode(tokens, skip_special_tokens=True))  # one sequence: one text
            for stop in gen_kwargs.get("until") or []:
                if stop:
                    text = text.split(stop)[0]
            out.append(text)
            self.cache_hook.add_partial("generate_until", req.args, text)  # --use_cache: kept if killed
        return out

    def _split(self, kind: str, req: Any) -> tuple[torch.Tensor, torch.Tensor]:
        text, options = REQUESTS[kind].parse(req.args)
        ids = self._ids(text)[: options.max_tokens]
        half = len(ids) // 2
        if half < 1:
            raise UsageError("compress_ae / compress_lm need texts of at least 2 tokens")
        return ids[:half], ids[half:]

    def compress_ae(self, requests: list, disable_tqdm: bool = False) -> list[ReconstructionResponse]:
        return answer_with_cache(
            self, COMPRESS_AE.name, requests, lambda todo, done: self._compress_ae(todo, done, disable_tqdm)
        )

    def compress_lm(self, requests: list, disable_tqdm: bool = False) -> list[CompletionResponse]:
        return answer_with_cache(
            self, COMPRESS_LM.name, requests, lambda todo, done: self._compress_lm(todo, done, disable_tqdm)
        )

    @torch.no_grad()
    def _compress_ae(self, requests: list, done: Callable[[int, dict], None], disable_tqdm: bool) -> None:
        for j, req in enumerate(tqdm(requests, disable=disable_tqdm, desc="Compressor reconstruction")):
            context, _ = self._split(COMPRESS_AE.name, req)
            tokens = self.compressor.generate(context, context[:0], len(context), task="ae")
            done(j, {"reference": self.tokenizer.decode(context.tolist()), "prediction": self.tokenizer.decode(tokens)})

    @torch.no_grad()
    def _compress_lm(self, requests: list, done: Callable[[int, dict], None], disable_tqdm: bool) -> None:
        for j, req in enumerate(tqdm(requests, disable=disable_tqdm, desc="Compressor completion")):
            context, completion = self._split(COMPRESS_LM.name, req)
            memory = self.compressor.compress(context)
            done(j, {"logprobs": self.compressor.target_logprobs(memory, "lm", completion[:0], completion).tolist()})
