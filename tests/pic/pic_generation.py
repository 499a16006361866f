"""hf-pic's greedy generation under a PIC inference: the reference the vLLM lane's PIC tests compare against."""

from __future__ import annotations

import torch

from harness.pic.inference import Inference


def hf_pic_generation(model, prompt: list[int], inference: Inference, new: int) -> tuple[list[int], list[float]]:
    """hf-pic's greedy generation of ``new`` tokens under ``inference`` (Dynamic PIC: ``pic_impl=reference``,
    Algorithm 1): the tokens and each one's fp32 log-probability."""
    from harness import apply_pic, remove_pic

    if inference.entry.moves_cached_keys:
        inference = inference.replace(impl="reference")
    apply_pic(model, inference)
    try:
        with torch.no_grad():
            out = model.generate(
                torch.tensor([prompt]),
                attention_mask=torch.ones(1, len(prompt), dtype=torch.long),
                max_new_tokens=new,
                min_new_tokens=new,
                do_sample=False,
                output_logits=True,
                return_dict_in_generate=True,
            )
    finally:
        remove_pic(model)
    tokens = out.sequences[0, len(prompt) :].tolist()
    return tokens, [torch.log_softmax(step[0].float(), -1)[t].item() for step, t in zip(out.logits, tokens)]
