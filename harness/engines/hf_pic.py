"""``hf-pic``: lm-eval's HF model with Position ID Compression and our request types (:mod:`harness.engines.core`).

Model args beyond ``hf``'s: the PIC / RoPE args of :class:`~harness.pic.inference.Inference` (``pic``, ``pic_ratio``,
``pic_initial``, ``pic_recent``, ``pic_layout``, ``pic_impl``, ``rope_base``), defaulting to a trained variant's
``lch_variant.json`` (in ``peft``, else ``pretrained``); PIC applies to the model under a ``peft`` adapter."""

from __future__ import annotations

from typing import Any

import torch
from lm_eval.models.huggingface import HFLM  # (imports lm_eval.models: the built-in models register first)

from harness.core.context import patched
from harness.data.prompt_tokens import load_tokenizer
from harness.engines.core import EngineCore, Generated
from harness.engines.model_args import check_hf_pic_args
from harness.engines.registry import check_model_args, lch_model
from harness.engines.requests import LongGenerationOptions
from harness.models.attention import use_blocked_masks
from harness.models.device_sizing import sized_pass
from harness.models.head import output_logits
from harness.models.scoring import hidden_states, left_pad
from harness.pic.hf import apply_pic, set_rope_base

# HFLM's tokenizer arguments whose default values load the tokenizer as the tasks' load_tokenizer does
DEFAULT_TOKENIZER_ARGS = {
    "revision": ("main", None),
    "trust_remote_code": (False, None),
    "use_fast_tokenizer": (True, None),
    "add_bos_token": (None,),
    "gguf_file": (None,),
    "subfolder": ("", None),
}


def with_shared_tokenizer(kwargs: dict[str, Any]) -> dict[str, Any]:
    """``kwargs`` with the tasks' shared tokenizer for HFLM when HFLM would load that very tokenizer (one copy)."""
    name = kwargs.get("tokenizer") or kwargs.get("pretrained")
    if not isinstance(name, str) or any(
        kwargs.get(key) not in allowed for key, allowed in DEFAULT_TOKENIZER_ARGS.items()
    ):
        return kwargs
    return {**kwargs, "tokenizer": load_tokenizer(name)}


@lch_model("hf-pic", preflight=check_hf_pic_args)
class HFPicLM(EngineCore, HFLM):
    """HF causal LM with a PIC variant applied in place (see module docstring)."""

    LIBRARIES = ("torch", "transformers", "peft")
    _rank: int  # HFLM's, set by its __init__
    _world_size: int

    def __init__(self, **model_args: Any) -> None:
        resolved = self.adopt(check_model_args(self.ENGINE_NAME, model_args))  # before loading
        kwargs = dict(resolved.engine_args)
        kwargs.setdefault("softmax_dtype", "float32")  # loglikelihood log-softmax in fp32 under bf16 too
        # HFLM defaults to device "cuda" even without a GPU: no device given means the GPU when there is one
        kwargs.setdefault("device", "cuda" if torch.cuda.is_available() else "cpu")
        super().__init__(**with_shared_tokenizer(kwargs))
        accelerator = getattr(self, "accelerator", None)
        if accelerator is not None and accelerator.num_processes > 1 and self._world_size == 1:
            # lm-eval splits data only across GPUs: under `accelerate launch` on CPU each process would do everything
            self._rank = accelerator.process_index
            self._world_size = accelerator.num_processes
        use_blocked_masks(self.model)
        inference = resolved.inference
        if inference.rope_base is not None:
            set_rope_base(self.model, inference.rope_base)
        if inference.entry.acts:
            apply_pic(self.model, inference)

    def engine_dtype(self) -> str:
        return str(self.model.dtype).removeprefix("torch.")

    def run_device(self) -> str:
        return str(self.model.device)

    def _loglikelihood_tokens(self, requests, disable_tqdm: bool = False, override_bs: int | None = None):
        if not self.inference.entry.moves_cached_keys:
            return super()._loglikelihood_tokens(requests, disable_tqdm, override_bs)
        # Dynamic PIC positions depend on each row's length and lm-eval right-pads without a mask: one row per forward
        with patched(self, "batch_size_per_gpu", 1):
            return super()._loglikelihood_tokens(requests, disable_tqdm, override_bs=1)

    # ------------------------------------------------------------------ the engine core's primitives

    def score_batch_size(self) -> int:
        return self.batch_size if isinstance(self.batch_size, int) else 1

    generation_batch_size = score_batch_size

    def score_hidden(self, rows: list[list[int]]) -> list[torch.Tensor]:
        """One left-padded forward of the decoder (every PIC variant sees each row's true positions)."""
        ids, mask = self._left_pad(rows)
        with sized_pass(self.model, ids) as free:
            hidden = hidden_states(self.model, ids, mask, free=free)
        return [hidden[b, ids.shape[1] - len(row) :] for b, row in enumerate(rows)]

    def score_head(self, hidden: torch.Tensor) -> torch.Tensor:
        return output_logits(self.model, hidden)

    def generate_tokens(self, prompts: list[list[int]], options: LongGenerationOptions, budget: int) -> list[Generated]:
        """``generate`` on a left-padded batch with every EOS id of the model; stop strings are left to the core."""
        configured = self.model.generation_config.eos_token_id
        eos_ids = set([] if configured is None else [configured] if isinstance(configured, int) else configured)
        if self.tokenizer.eos_token_id is not None:
            eos_ids.add(self.tokenizer.eos_token_id)
        ids, mask = self._left_pad(prompts)
        # greedy: sampling settings would only trigger HF warnings
        sampling = {"temperature": options.temperature, "top_p": options.top_p} if options.do_sample else {}
        with torch.no_grad():
            out = self.model.generate(
                input_ids=ids,
                attention_mask=mask,
                max_new_tokens=budget,
                do_sample=options.do_sample,
                pad_token_id=self.tokenizer.pad_token_id,
                eos_token_id=sorted(eos_ids),
                **sampling,
            )
        results = []
        for row in out[:, ids.shape[1] :].tolist():
            stop = next((j for j, token in enumerate(row) if token in eos_ids), None)
            results.append(Generated(row if stop is None else row[:stop], stop is not None))
        return results

    def _left_pad(self, rows: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
        pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        return left_pad(rows, pad_id, self.device)
