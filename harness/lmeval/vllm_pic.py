"""``vllm-pic``: lm-eval's vLLM model with naive or NTK-aware PIC (GPU extra ``[vllm]``).

vLLM builds RoPE from the HF config, so PIC is expressed as config overrides (``hf_overrides``):

* naive PIC  -> linear RoPE scaling with factor ``s_cr`` (position ``m`` rotates as ``m / s_cr``);
* NTK-aware  -> ``rope_theta`` multiplied by ``s_rr`` (paper Eq. 8).

Dynamic PIC re-positions cached keys at every step, which vLLM's paged attention cannot express:
``pic=dynamic`` fails with a pointer to ``hf-pic``.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from harness.data.variants import results_info
from harness.errors import UsageError
from harness.lmeval.model_args import check_hf_pic_args
from harness.positions.pic import check_pic_args, ntk_base

log = logging.getLogger(__name__)

try:  # lm-eval's vLLM module imports vllm at import time
    from lm_eval.models.vllm_causallms import VLLM as _Base

    _VLLM_ERROR: Exception | None = None
except ImportError as err:  # no vllm (CPU installs): the class still imports and explains itself
    from lm_eval.api.model import LM as _Base

    _VLLM_ERROR = err


def rope_parameters(hf_config: dict) -> dict:
    """The RoPE parameters of an HF config dict, in the transformers>=5 ``rope_parameters`` form."""
    params = dict(hf_config.get("rope_parameters") or {})
    if not params:  # configs written by transformers 4.x
        params = dict(hf_config.get("rope_scaling") or {})
        params.setdefault("rope_theta", hf_config.get("rope_theta", 10000.0))
    params.setdefault("rope_type", params.pop("type", "default"))
    return params


def vllm_pic_overrides(hf_config: dict, method: str, ratio: float) -> dict:
    """``hf_overrides`` that make vLLM apply naive or NTK-aware PIC; ``{}`` for ``none``."""
    check_pic_args(method, ratio)
    if method == "dynamic":
        raise UsageError(
            "pic=dynamic is not available on vLLM (its paged KV cache cannot re-position cached keys); "
            "use --model hf-pic for Dynamic PIC"
        )
    if method == "none":
        return {}
    params = rope_parameters(hf_config)
    if method == "naive":
        if params["rope_type"] != "default":
            raise UsageError(
                f"naive PIC on vLLM needs a model with plain RoPE; this one uses {params['rope_type']!r} "
                "scaling (use --model hf-pic, which composes both)"
            )
        return {"rope_parameters": {**params, "rope_type": "linear", "factor": float(ratio)}}
    return {"rope_parameters": {**params, "rope_theta": ntk_base(float(params["rope_theta"]), ratio)}}


def _read_hf_config(pretrained: str) -> dict:
    local = Path(pretrained) / "config.json"
    if local.is_file():
        return json.loads(local.read_text())
    from transformers import AutoConfig

    return AutoConfig.from_pretrained(pretrained).to_dict()


def with_rope_base(hf_config: dict, base: float | None) -> dict:
    """The config dict with RoPE base ``base`` (unchanged for ``None``)."""
    if base is None:
        return hf_config
    return {**hf_config, "rope_parameters": {**rope_parameters(hf_config), "rope_theta": float(base)}}


class VLLMPicLM(_Base):
    """lm-eval ``vllm`` with ``pic=none|naive|ntk``, ``pic_ratio`` and ``rope_base`` in ``--model_args``;
    a variant file (``lch_variant.json``) in ``lora_local_path`` or ``pretrained`` sets their defaults as
    in ``hf-pic``."""

    def __init__(self, pretrained: str, pic: str | None = None, pic_ratio: float | None = None,
                 rope_base: float | str | None = None, **kwargs: Any) -> None:
        resolved = check_hf_pic_args({"pretrained": pretrained, "peft": kwargs.get("lora_local_path"), "pic": pic,
                                      "pic_ratio": pic_ratio, "rope_base": rope_base})
        inference, variant = resolved["inference"], resolved["variant"]
        for override in resolved["overrides"]:
            log.warning("model_arg %s overrides the variant file (%s)", override, variant.describe())
        if variant is not None and inference["pic"] == "dynamic":
            raise UsageError(f"this checkpoint is {variant.describe()}, which expects Dynamic PIC; vLLM cannot run it: "
                             "use --model hf-pic, or pass pic=none for standard inference")
        config = with_rope_base(_read_hf_config(pretrained), inference["rope_base"])
        overrides = vllm_pic_overrides(config, inference["pic"], inference["pic_ratio"])
        if not overrides and inference["rope_base"] is not None:
            overrides = {"rope_parameters": config["rope_parameters"]}
        if _VLLM_ERROR is not None:
            raise ImportError(
                "vllm-pic needs vLLM on a GPU machine: pip install -e '.[vllm]' (or use --model hf-pic)"
            ) from _VLLM_ERROR
        if overrides:
            kwargs["hf_overrides"] = {**(kwargs.get("hf_overrides") or {}), **overrides}
        self.pic, self.inference, self.variant = inference["pic"], inference, variant
        super().__init__(pretrained=pretrained, **kwargs)

    def get_model_info(self) -> dict:
        """As :meth:`harness.lmeval.hf_pic.HFPicLM.get_model_info`."""
        base = super().get_model_info() if hasattr(super(), "get_model_info") else {}
        return {**base, **results_info(self.variant, self.inference)}

    def generate_long(self, requests: list, disable_tqdm: bool = False) -> list[dict]:
        """The ``generate_long`` request of :class:`harness.lmeval.hf_pic.HFPicLM` on vLLM:
        ``ended_with_eos`` is ``finish_reason == "stop"`` (EOS or a stop string), False on ``"length"``."""
        from vllm import SamplingParams

        prompts, params = [], []
        for req in requests:
            context, kwargs = req.args[0], dict(req.args[1])
            until = kwargs.get("until") or []
            sample = bool(kwargs.get("do_sample", False))
            params.append(SamplingParams(
                max_tokens=int(kwargs.get("max_gen_toks", self.max_gen_toks)),
                temperature=float(kwargs.get("temperature", 0.8)) if sample else 0.0,
                top_p=float(kwargs.get("top_p", 1.0)) if sample else 1.0,
                stop=[until] if isinstance(until, str) else list(until),
            ))
            prompts.append(self.tok_encode(context))
        outputs = self._model_generate(requests=prompts, generate=True, sampling_params=params)
        return [{"text": o.outputs[0].text, "ended_with_eos": o.outputs[0].finish_reason == "stop",
                 "n_tokens": len(o.outputs[0].token_ids)} for o in outputs]

    if _VLLM_ERROR is not None:  # abstract methods of LM, never reached: __init__ raises first

        def loglikelihood(self, requests):  # pragma: no cover
            raise NotImplementedError

        def loglikelihood_rolling(self, requests):  # pragma: no cover
            raise NotImplementedError

        def generate_until(self, requests):  # pragma: no cover
            raise NotImplementedError
