"""Soft-prompt context compressors (ICAE / 500xCompressor) under DPL, UPL or EPL position layouts
(:mod:`harness.compressor.positions`). The encoder (base model + LoRA on q and v) reads ``[chunk; |M| memory
embeddings]`` and keeps the memories' last hidden states (``icae``) or their KV cache (``500x``); the decoder (adapter
disabled) reads the memories, [AE] or [LM], then what follows. Losses: the EPL paper, Eq. 2-4 (AE, LM, QA)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import torch
from torch import nn

from harness.compressor.config import CompressorConfig
from harness.compressor.positions import chunk_lengths, decoder_positions, encoder_positions
from harness.core.files import staged_files, write_json_atomic
from harness.models.hf_cache import cache_keyword, output_cache
from harness.models.scoring import target_logprobs

if TYPE_CHECKING:
    from transformers import PreTrainedModel

LAYER = "models"  # harness/devtools/layers.py

CONFIG_FILE, WEIGHTS_FILE = "compressor.json", "compressor_embeddings.pt"


@dataclass
class Memory:
    """Compressed context: ``states`` [k|M|, H] (icae) or per-layer ``(keys, values)`` (500x)."""

    n_context: int
    states: torch.Tensor | None = None
    kv: list[tuple[torch.Tensor, torch.Tensor]] | None = None


class Compressor(nn.Module):
    def __init__(self, base: PreTrainedModel, config: CompressorConfig, adapter_dir: str | Path | None = None) -> None:
        super().__init__()
        from peft import LoraConfig, PeftModel, get_peft_model

        self.config = config
        if adapter_dir is not None:
            self.model = PeftModel.from_pretrained(base, str(adapter_dir), is_trainable=True)
        else:
            lora = LoraConfig(
                r=config.lora_r,
                lora_alpha=config.lora_alpha,
                lora_dropout=config.lora_dropout,
                target_modules=["q_proj", "v_proj"],
                task_type="CAUSAL_LM",
            )
            self.model = get_peft_model(base, lora)
        weight = cast(torch.Tensor, base.get_input_embeddings().weight)  # the embedding's weight (a Module per torch)
        std = float(weight.detach().float().std())
        generator = torch.Generator().manual_seed(0)
        init = torch.randn(config.n_memory + 2, weight.shape[1], generator=generator) * std
        self.memory = nn.Parameter(init[: config.n_memory].to(weight.dtype))
        self.ae_token = nn.Parameter(init[-2].to(weight.dtype))
        self.lm_token = nn.Parameter(init[-1].to(weight.dtype))

    # --- encoder -----------------------------------------------------------------------------------------

    def _embed(self, ids: torch.Tensor) -> torch.Tensor:
        return self.model.get_input_embeddings()(ids)

    def compress(self, context_ids: torch.Tensor) -> Memory:
        """Compress a 1-D tensor of context token ids chunk by chunk (adapter enabled)."""
        cfg = self.config
        ids = context_ids.reshape(-1)
        lengths = chunk_lengths(len(ids), cfg.chunk_size)
        states, kv_parts = [], []
        start = 0
        for n, pos in zip(lengths, encoder_positions(len(ids), cfg.chunk_size, cfg.n_memory, cfg.layout)):
            embeds = torch.cat([self._embed(ids[start : start + n]), self.memory]).unsqueeze(0)
            start += n
            position_ids = torch.tensor([pos.context + pos.memory], device=embeds.device)
            out = self.model(
                inputs_embeds=embeds,
                position_ids=position_ids,
                attention_mask=torch.ones_like(position_ids),
                use_cache=cfg.carrier == "500x",
                output_hidden_states=cfg.carrier == "icae",
            )
            if cfg.carrier == "icae":
                states.append(out.hidden_states[-1][0, n:])
            else:
                kv_parts.append([(layer.keys[:, :, n:], layer.values[:, :, n:]) for layer in output_cache(out).layers])
        if cfg.carrier == "icae":
            return Memory(len(ids), states=torch.cat(states))
        kv = [
            (torch.cat([c[i][0] for c in kv_parts], dim=2), torch.cat([c[i][1] for c in kv_parts], dim=2))
            for i in range(len(kv_parts[0]))
        ]
        return Memory(len(ids), kv=kv)

    # --- decoder -----------------------------------------------------------------------------------------

    def _decode(
        self, memory: Memory, task: str, following: torch.Tensor, cache: Any = None, n_done: int = 0
    ) -> tuple[torch.Tensor, Any]:
        """Hidden states of [special; following] (or of ``following`` alone when continuing a cache),
        adapter disabled. ``n_done`` tokens after the special token are already in ``cache``."""
        from transformers import DynamicCache

        cfg = self.config
        n_follow = n_done + len(following)
        layout = decoder_positions(
            memory.n_context, cfg.chunk_size, cfg.n_memory, cfg.layout, cfg.carrier, task, n_follow
        )
        special = self.ae_token if task == "ae" else self.lm_token
        new = self._embed(following)
        if cache is None:  # first call: memories (+ their cache) and the special token
            if cfg.carrier == "icae":
                assert memory.states is not None  # compress() of an icae compressor
                embeds = torch.cat([memory.states, special.unsqueeze(0), new])
                positions = layout.all()
                prefix = len(layout.memory)  # hidden states returned start after the memories
            else:
                cache = DynamicCache()
                assert memory.kv is not None  # compress() of a 500x compressor
                for i, (k, v) in enumerate(memory.kv):
                    cache.update(k, v, i)
                embeds = torch.cat([special.unsqueeze(0), new])
                positions = [layout.special, *layout.following]
                prefix = 0
        else:
            embeds, positions, prefix = new, layout.following[n_done:], 0
        total = (cache.get_seq_length() if cache is not None else 0) + len(positions)
        device = embeds.device
        with self.model.disable_adapter():
            out = self.model(
                inputs_embeds=embeds.unsqueeze(0),
                position_ids=torch.tensor([positions], device=device),
                attention_mask=torch.ones(1, total, dtype=torch.long, device=device),
                **{cache_keyword(): cache},
                use_cache=True,
                output_hidden_states=True,
            )
        return out.hidden_states[-1][0, prefix:], output_cache(out)

    def target_logprobs(self, memory: Memory, task: str, prompt: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """fp32 ``log P(targets | memory, special, prompt)`` per target token (prompt: the QA question)."""
        following = torch.cat([prompt.reshape(-1), targets.reshape(-1)])
        hidden, _ = self._decode(memory, task, following)  # [1 + len(following), H]: special first
        ids = torch.cat([following.new_zeros(1), following]).unsqueeze(0)
        return target_logprobs(self.model, hidden.unsqueeze(0), ids, first_target=1 + len(prompt.reshape(-1)))[0]

    def loss(
        self,
        context_ids: torch.Tensor,
        completion_ids: torch.Tensor | None = None,
        alpha: float = 0.5,
        question_ids: torch.Tensor | None = None,
        answer_ids: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Pretraining ``alpha * L_AE + (1 - alpha) * L_LM`` on one compression of the context (joint, as
        the EPL paper), or the QA loss when ``answer_ids`` is given. Mean token negative log-likelihoods."""
        memory = self.compress(context_ids)
        if answer_ids is not None:
            if question_ids is None:
                raise TypeError("Compressor.loss: answer_ids (the QA loss) needs question_ids")
            return -self.target_logprobs(memory, "qa", question_ids, answer_ids).mean()
        ae = -self.target_logprobs(memory, "ae", context_ids[:0], context_ids).mean()
        if completion_ids is None or alpha == 1.0:
            return ae
        lm = -self.target_logprobs(memory, "lm", context_ids[:0], completion_ids).mean()
        return alpha * ae + (1 - alpha) * lm

    @torch.no_grad()
    def generate(
        self,
        context_ids: torch.Tensor,
        prompt_ids: torch.Tensor,
        max_new_tokens: int,
        task: str = "qa",
        eos_token_id: int | None = None,
    ) -> list[int]:
        """Greedy continuation after [memory; special; prompt] (``task`` ``qa``/``lm``, or ``ae`` with an
        empty prompt to reconstruct the context)."""
        memory = self.compress(context_ids)
        head = self.model.get_output_embeddings()
        hidden, cache = self._decode(memory, task, prompt_ids.reshape(-1))
        done, out = len(prompt_ids.reshape(-1)), []
        for _ in range(max_new_tokens):
            token = int(head(hidden[-1:]).float().argmax(-1))
            if eos_token_id is not None and token == eos_token_id:
                break
            out.append(token)
            hidden, cache = self._decode(memory, task, torch.tensor([token], device=hidden.device), cache, n_done=done)
            done += 1
        return out

    # --- checkpoints ---------------------------------------------------------------------------------------

    def save(self, folder: str | Path) -> None:
        """``folder``: the peft adapter, ``compressor_embeddings.pt`` (memory, [AE], [LM]) and
        ``compressor.json`` (carrier, layout, L, |M|, LoRA settings)."""
        with staged_files(folder) as staged:  # each file appears whole; compressor.json, written last, marks it done
            self.model.save_pretrained(str(staged))
            torch.save(
                {
                    "memory": self.memory.detach().cpu(),
                    "ae_token": self.ae_token.detach().cpu(),
                    "lm_token": self.lm_token.detach().cpu(),
                },
                staged / WEIGHTS_FILE,
            )
        write_json_atomic(Path(folder) / CONFIG_FILE, asdict(self.config), indent=1)

    @classmethod
    def load(cls, base: PreTrainedModel, folder: str | Path, **overrides: Any) -> Compressor:
        """A saved compressor on ``base``; ``overrides`` (e.g. ``layout``) change the evaluated setting."""
        folder = Path(folder)
        config = CompressorConfig(**{**json.loads((folder / CONFIG_FILE).read_text()), **overrides})
        model = cls(base, config, adapter_dir=folder)
        weights = torch.load(folder / WEIGHTS_FILE, map_location="cpu")
        with torch.no_grad():
            for name in ("memory", "ae_token", "lm_token"):
                getattr(model, name).copy_(weights[name])
        return model
