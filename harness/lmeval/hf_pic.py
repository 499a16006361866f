"""``hf-pic``: lm-eval's HF model with Position ID Compression and per-token log-probabilities.

``--model_args`` adds to those of ``hf``:

* ``pic=none|naive|ntk|dynamic``; ``pic_ratio`` (s_cr for naive/dynamic, s_rr for ntk);
  ``pic_initial`` (l_ic); ``pic_recent`` (l_rc); ``pic_layout=paper|contiguous``;
  ``pic_impl=cached|reference`` (the Algorithm-1 oracle). Defaults: the variant file (below), else
  :class:`harness.positions.inference.Inference`'s.
* ``rope_base=`` gives the model that RoPE base (``none``: its own) before any PIC variant.
* ``peft=<adapter dir>`` (inherited from ``hf``) loads a LoRA adapter of a trained variant; PIC is
  applied to the model under the adapter.
* A trained variant's ``lch_variant.json`` (in the ``peft`` folder, else the ``pretrained`` folder) sets
  the defaults of the PIC and RoPE args: the inference it was trained for is applied unless a model arg
  says otherwise (each override is logged as a warning; ``pic=none`` is the paper's standard inference).
  What was applied is recorded in the results (``config.lch_inference`` / ``lch_variant`` /
  ``lch_evaluated_as``).

Request types: ``loglikelihood``, ``loglikelihood_rolling`` and ``generate_until`` as in ``hf``, plus
``token_logprobs`` (see :meth:`HFPicLM.token_logprobs`), ``lsm`` (see :meth:`HFPicLM.lsm`) and
``generate_long`` (see :meth:`HFPicLM.generate_long`).
"""

from __future__ import annotations

import logging
from typing import Any, Callable

import torch
from lm_eval.api.registry import register_model
from lm_eval.models.huggingface import HFLM  # (imports lm_eval.models: the built-in models register first)
from tqdm import tqdm

from harness.data.variants import results_info
from harness.lmeval.model_args import check_hf_pic_args
from harness.lmeval.request_options import (
    GENERATE_LONG,
    LSM,
    TOKEN_LOGPROBS,
    LongGenerationResponse,
    LsmResponse,
    TokenLogprobsResponse,
    encode_for_scoring,
    first_stop,
)
from harness.lmeval.response_cache import CacheOwner, ClaimsResponseCache, answer_with_cache, library_versions
from harness.models.identity import model_identity
from harness.models.lsm import hf_runner, lsm_direct, lsm_overlap
from harness.models.pic import apply_pic, set_rope_base
from harness.models.scoring import left_pad, score_tokens

log = logging.getLogger(__name__)


@register_model("hf-pic")  # the name of our lm_eval.models entry point (harness.lmeval.plugin)
class HFPicLM(ClaimsResponseCache, HFLM):
    """HF causal LM with a PIC variant applied in place (see module docstring)."""

    def __init__(
        self,
        pretrained: Any,
        pic: str | None = None,
        pic_ratio: float | None = None,
        pic_initial: int | None = None,
        pic_recent: int | None = None,
        pic_layout: str | None = None,
        rope_base: float | str | None = None,
        pic_impl: str | None = None,
        **kwargs: Any,
    ) -> None:
        resolved = check_hf_pic_args(  # before loading
            {"pretrained": pretrained, "peft": kwargs.get("peft"), "pic": pic, "pic_ratio": pic_ratio,
             "pic_initial": pic_initial, "pic_recent": pic_recent, "pic_layout": pic_layout,
             "rope_base": rope_base, "pic_impl": pic_impl})
        self.variant, inference = resolved["variant"], resolved["inference"]
        self._sources = (pretrained, kwargs.get("peft"))
        for override in resolved["overrides"]:
            log.warning("model_arg %s overrides the variant file of %s (%s)", override,
                        kwargs.get("peft") or pretrained, self.variant.describe())
        if self.variant is not None:
            log.info("variant %s: evaluating with %s", self.variant.describe(), inference.words())
        kwargs.setdefault("softmax_dtype", "float32")  # loglikelihood log-softmax in fp32 under bf16 too
        super().__init__(pretrained=pretrained, **kwargs)
        accelerator = getattr(self, "accelerator", None)
        if accelerator is not None and accelerator.num_processes > 1 and self._world_size == 1:
            # lm-eval splits data only across several GPUs; under `accelerate launch` on CPU (or one
            # shared GPU) every process would otherwise evaluate everything. Split there too.
            self._rank = accelerator.process_index
            self._world_size = accelerator.num_processes
        self.inference = inference
        self.pic = inference.method
        if inference.rope_base is not None:
            set_rope_base(self.model, inference.rope_base)
        if inference.entry.acts:
            apply_pic(self.model, inference)

    def get_model_info(self) -> dict:
        """lm-eval's model info plus what this harness applied: ``lch_inference`` (the PIC / RoPE settings
        in force), ``lch_variant`` (the checkpoint's variant file, if any) and ``lch_evaluated_as`` (words)."""
        return {**super().get_model_info(), **results_info(self.variant, self.inference)}

    def cache_owner(self) -> CacheOwner:
        """What this model's responses depend on (:mod:`harness.lmeval.response_cache`)."""
        pretrained, peft = self._sources
        return CacheOwner(engine="hf-pic", model=model_identity(pretrained) if isinstance(pretrained, str) else
                          type(pretrained).__name__, adapter=model_identity(peft) if peft else None,
                          inference=self.inference.words(), dtype=str(self.model.dtype).removeprefix("torch."),
                          libraries=library_versions("torch", "transformers", "peft"))

    def _loglikelihood_tokens(self, requests, disable_tqdm: bool = False, override_bs: int | None = None):
        if not self.inference.entry.moves_cached_keys:
            return super()._loglikelihood_tokens(requests, disable_tqdm, override_bs)
        # Dynamic PIC positions (any method whose cached keys move) depend on each row's own length, and lm-eval
        # right-pads these batches without an attention mask, so score one sequence per forward to stay
        # batch-independent.
        saved = self.batch_size_per_gpu
        self.batch_size_per_gpu = 1
        try:
            return super()._loglikelihood_tokens(requests, disable_tqdm, override_bs=1)
        finally:
            self.batch_size_per_gpu = saved

    def token_logprobs(self, requests: list, disable_tqdm: bool = False) -> list[TokenLogprobsResponse]:
        """Per-token log-probabilities of whole texts (:data:`~harness.lmeval.request_options.TOKEN_LOGPROBS`:
        args ``(text, ScoringOptions)``, a :class:`~harness.lmeval.request_options.TokenLogprobsResponse`
        each, ``offsets`` needed to map key tokens across tokenizers), fp32 log-softmax.
        Rows are sorted by length, batched ``batch_size`` at a time with left padding.
        """
        return answer_with_cache(self, TOKEN_LOGPROBS.name, requests,
                                 lambda todo, done: self._token_logprobs(todo, done, disable_tqdm))

    def _token_logprobs(self, requests: list, done: Callable[[int, dict], None], disable_tqdm: bool) -> None:
        encoded = [encode_for_scoring(self.tokenizer, *TOKEN_LOGPROBS.parse(req.args)) for req in requests]
        batch = self.batch_size if isinstance(self.batch_size, int) else 1
        for i, enc in enumerate(encoded):
            if len(enc["token_ids"]) < 2:  # nothing to predict (an empty or one-token text): no forward
                done(i, {**enc, "logprobs": []})
        order = sorted((i for i, enc in enumerate(encoded) if len(enc["token_ids"]) >= 2),
                       key=lambda i: -len(encoded[i]["token_ids"]))
        pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        pbar = tqdm(total=len(order), disable=disable_tqdm or self.rank != 0, desc="Scoring tokens")
        for start in range(0, len(order), batch):
            chunk = order[start : start + batch]
            ids, mask = left_pad([encoded[i]["token_ids"] for i in chunk], pad_id, self.device)
            for i, row in zip(chunk, score_tokens(self.model, ids, mask)):
                done(i, {**encoded[i], "logprobs": row.tolist()})
            pbar.update(len(chunk))
        pbar.close()

    def lsm(self, requests: list, disable_tqdm: bool = False) -> list[LsmResponse]:
        """Long-short misalignment samples of whole texts (:mod:`harness.metrics.lsm`;
        :data:`~harness.lmeval.request_options.LSM`: args ``(text, LsmOptions)``). The text is tokenised
        without special tokens (suffix windows start mid-document).
        """
        return answer_with_cache(self, LSM.name, requests, lambda todo, done: self._lsm(todo, done, disable_tqdm))

    def _lsm(self, requests: list, done: Callable[[int, dict], None], disable_tqdm: bool) -> None:
        estimators = {"overlap": lsm_overlap, "direct": lsm_direct}
        runner = hf_runner(self.model)
        for j, req in enumerate(tqdm(requests, disable=disable_tqdm or self.rank != 0, desc="Long-short misalignment")):
            text, options = LSM.parse(req.args)
            ids = self.tokenizer(text, add_special_tokens=False)["input_ids"][: options.max_tokens]
            values = estimators[options.estimator](runner, torch.tensor(ids, device=self.device),
                                                   options.context_length, options.n_samples, seed=options.seed)
            done(j, {"sce": values})

    def generate_long(self, requests: list, disable_tqdm: bool = False) -> list[LongGenerationResponse]:
        """Long-form generation that reports how it ended (:data:`~harness.lmeval.request_options.GENERATE_LONG`:
        args ``(context, LongGenerationOptions)``; ``max_gen_toks`` None: the model's ``max_gen_toks``).
        Batched ``batch_size`` at a time with left padding (and an attention mask, so every PIC variant
        sees each row's true positions). ``ended_with_eos`` is False when the token budget ran out (a stop
        string counts as an end).

        With lm-eval's ``--use_cache`` every finished generation is stored at once, and a restarted run
        generates only what is missing (:mod:`harness.lmeval.response_cache`; the same for the other two
        request types).
        """
        return answer_with_cache(self, GENERATE_LONG.name, requests,
                                 lambda todo, done: self._generate_long(todo, done, disable_tqdm))

    def _generate_long(self, requests: list, done: Callable[[int, dict], None], disable_tqdm: bool) -> None:
        eos_ids = set(self._eos_ids())
        batch = self.batch_size if isinstance(self.batch_size, int) else 1
        parsed = [GENERATE_LONG.parse(req.args) for req in requests]
        order = sorted(range(len(requests)), key=lambda i: -len(parsed[i][0]))
        pbar = tqdm(total=len(order), disable=disable_tqdm or self.rank != 0, desc="Generating (long)")
        groups: dict = {}  # requests with the same options generate together
        for i in order:
            groups.setdefault(parsed[i][1], []).append(i)
        for options, members in groups.items():
            until = list(options.until)
            max_new = self.max_gen_toks if options.max_gen_toks is None else options.max_gen_toks
            # greedy: sampling settings would only trigger HF warnings
            sampling = {"temperature": options.temperature, "top_p": options.top_p} if options.do_sample else {}
            for start in range(0, len(members), batch):
                chunk = members[start : start + batch]
                ids, mask = self.tok_batch_encode([parsed[i][0] for i in chunk])
                ids, mask = ids.to(self.device), mask.to(self.device)
                with torch.no_grad():
                    out = self.model.generate(
                        input_ids=ids, attention_mask=mask, max_new_tokens=max_new, do_sample=options.do_sample,
                        pad_token_id=self.tokenizer.pad_token_id, eos_token_id=sorted(eos_ids), **sampling,
                    )
                for i, row in zip(chunk, out[:, ids.shape[1] :].tolist()):
                    stop = next((j for j, tok in enumerate(row) if tok in eos_ids), None)
                    tokens = row if stop is None else row[:stop]
                    text = self.tokenizer.decode(tokens, skip_special_tokens=True)
                    cut = first_stop(text, until)
                    done(i, {
                        "text": text if cut < 0 else text[:cut],
                        "ended_with_eos": stop is not None or cut >= 0,
                        "n_tokens": len(tokens),
                    })
                pbar.update(len(chunk))
        pbar.close()

    def _eos_ids(self) -> list[int]:
        ids = self.model.generation_config.eos_token_id
        ids = [] if ids is None else [ids] if isinstance(ids, int) else list(ids)
        if self.tokenizer.eos_token_id is not None:
            ids.append(self.tokenizer.eos_token_id)
        return ids
