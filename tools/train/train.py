#!/usr/bin/env python3
"""Stages 3-5: pre-trains the target, distils the draft, fine-tunes for chat.

  train.py pretrain --run work/runs/target --shape target --tokens 60e6
  train.py distill  --run work/runs/draft  --shape draft --teacher work/runs/target --tokens 30e6
  train.py sft      --run work/runs/target-chat --from work/runs/target --tokens 4e6

Every stage is resumable: it checkpoints to RUN/ckpt.pt every few minutes
and on exit (also on SIGTERM/SIGINT), and starts from there when run again
with the same arguments; `--hours` bounds one sitting. Batches are drawn from
a generator seeded by (seed, step), so a resumed run sees the batches an
uninterrupted one would. The learning rate follows warm-up and cosine decay
over `--tokens`. Progress goes to RUN/log.jsonl.
"""

import argparse
import json
import math
import os
import pathlib
import signal
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from llama import LlamaForCausalLM, LlamaShape  # noqa: E402
import chat_data  # noqa: E402

HERE = pathlib.Path(__file__).resolve().parent

SHAPES = {
    # name: hidden, ffn, layers, heads, kv heads
    "t3m": LlamaShape(hidden_size=192, intermediate_size=512, num_hidden_layers=4, num_attention_heads=3,
                      num_key_value_heads=1),
    "t7m": LlamaShape(hidden_size=256, intermediate_size=704, num_hidden_layers=6, num_attention_heads=4,
                      num_key_value_heads=2),
    "t13m": LlamaShape(hidden_size=320, intermediate_size=864, num_hidden_layers=8, num_attention_heads=5,
                       num_key_value_heads=1),
    "t22m": LlamaShape(hidden_size=384, intermediate_size=1024, num_hidden_layers=10, num_attention_heads=6,
                       num_key_value_heads=2),
}


DRAFT_SHAPES = {
    # The target's width with 1-2 layers (starts from the target's embeddings) ...
    "draft1": None, "draft2": None,
    # ... or narrower: each draft step then costs a fraction of a target step,
    # which is what lets speculation pay (measured in docs/models.md).
    "draft2n": LlamaShape(hidden_size=192, intermediate_size=512, num_hidden_layers=2, num_attention_heads=3,
                          num_key_value_heads=1),
}


def shape_of(name: str, base: dict = None) -> LlamaShape:
    if name in DRAFT_SHAPES:
        if DRAFT_SHAPES[name] is not None:
            return DRAFT_SHAPES[name]
        return LlamaShape(**dict(base, num_hidden_layers=int(name[len("draft"):])))
    return SHAPES[name]


def lr_at(step: int, total_steps: int, peak: float, warmup: int) -> float:
    if step < warmup:
        return peak * (step + 1) / warmup
    progress = min(1.0, (step - warmup) / max(1, total_steps - warmup))
    return peak * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))


class Windows:
    """Random fixed-length windows of a token array; batch k depends only on (seed, k)."""

    def __init__(self, ids: np.ndarray, seq: int, batch: int, seed: int):
        self.ids, self.seq, self.batch, self.seed = ids, seq, batch, seed

    def get(self, step: int) -> torch.Tensor:
        rng = np.random.default_rng([self.seed, step])
        starts = rng.integers(0, self.ids.size - self.seq - 1, size=self.batch)
        rows = np.stack([self.ids[s:s + self.seq + 1] for s in starts]).astype(np.int64)
        return torch.from_numpy(rows)


@torch.no_grad()
def heldout_loss(model, ids: np.ndarray, seq: int) -> float:
    """Mean next-token loss over non-overlapping windows of the held-out split."""
    model.eval()
    total, count = 0.0, 0
    for start in range(0, ids.size - 1, seq):
        chunk = torch.from_numpy(ids[start:start + seq + 1].astype(np.int64))[None]
        if chunk.shape[1] < 2:
            break
        with torch.autocast("cpu", dtype=torch.bfloat16):
            logits = model(chunk[:, :-1])
        total += F.cross_entropy(logits[0], chunk[0, 1:], reduction="sum").item()
        count += chunk.shape[1] - 1
    model.train()
    return total / count


def load_run(run: pathlib.Path):
    state = torch.load(run / "ckpt.pt", map_location="cpu", weights_only=False)
    model = LlamaForCausalLM(LlamaShape(**state["shape"]))
    model.load_state_dict(state["model"])
    return model, state


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("stage", choices=["pretrain", "distill", "sft"])
    ap.add_argument("--run", type=pathlib.Path, required=True)
    ap.add_argument("--shape", default="t7m", help="t3m, t7m, t13m, t22m; draft1/draft2/draft2n (distill)")
    ap.add_argument("--teacher", type=pathlib.Path, help="distill: the target's run")
    ap.add_argument("--from", dest="start_from", type=pathlib.Path, help="sft: the pre-trained run")
    ap.add_argument("--data", type=pathlib.Path, default=HERE / "work" / "tokenizer")
    ap.add_argument("--corpus", type=pathlib.Path, default=HERE / "work" / "corpus")
    ap.add_argument("--tokens", type=float, required=True, help="training tokens of the whole stage")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--temperature", type=float, default=2.0, help="distill: softening of both distributions")
    ap.add_argument("--hours", type=float, default=1e9, help="stop (resumably) after this long")
    ap.add_argument("--eval-every", type=int, default=200)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    args.run.mkdir(parents=True, exist_ok=True)

    train_ids = np.load(args.data / "train.npy")
    held_ids = np.load(args.data / "heldout.npy")
    steps_total = int(args.tokens // (args.batch * args.seq))
    teacher = None
    if args.stage == "distill":
        teacher, _ = load_run(args.teacher)
        teacher.eval().requires_grad_(False)

    ckpt = args.run / "ckpt.pt"
    if ckpt.exists():
        model, state = load_run(args.run)
        step = state["step"]
        opt_state = state["optimizer"]
    else:
        if args.stage == "sft":
            model, _ = load_run(args.start_from)
        elif args.stage == "distill":
            model = LlamaForCausalLM(shape_of(args.shape, dataclass_dict(teacher.shape)))
            if model.shape.hidden_size == teacher.shape.hidden_size:
                # A draft of the target's width starts from its embeddings and final norm.
                model.model.embed_tokens.weight.data.copy_(teacher.model.embed_tokens.weight)
                model.model.norm.weight.data.copy_(teacher.model.norm.weight)
        else:
            model = LlamaForCausalLM(shape_of(args.shape))
        step, opt_state = 0, None
    shape = model.shape
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95), fused=False)
    if opt_state:
        opt.load_state_dict(opt_state)

    windows = Windows(train_ids, args.seq, args.batch, args.seed)
    chats = None
    chat_every = {"pretrain": 0, "sft": 2, "distill": 4}[args.stage]  # every n-th batch is chat
    if chat_every:
        tok_path = args.data / "tokenizer.json"
        chats = chat_data.ChatBatches(args.corpus / "qa.jsonl", tok_path, args.seq, args.batch, args.seed)

    stop = {"now": False}
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.update(now=True))

    def save():
        tmp = args.run / "ckpt.pt.tmp"
        torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "step": step,
                    "shape": dataclass_dict(shape), "args": {k: str(v) for k, v in vars(args).items()}}, tmp)
        os.replace(tmp, ckpt)

    log = open(args.run / "log.jsonl", "a")
    print(f"{args.stage}: {shape.parameter_count() / 1e6:.2f}M parameters, step {step}/{steps_total}", flush=True)
    started = time.time()
    last_save = started
    while step < steps_total and not stop["now"] and time.time() - started < args.hours * 3600:
        lr = lr_at(step, steps_total, args.lr, args.warmup)
        for group in opt.param_groups:
            group["lr"] = lr
        if chats is not None and step % chat_every == 0:
            rows, mask = chats.get(step)
        else:
            rows = windows.get(step)
            mask = torch.ones_like(rows[:, 1:], dtype=torch.bool)
        inputs, targets = rows[:, :-1], rows[:, 1:]
        t0 = time.time()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            logits = model(inputs)
        if teacher is not None:
            with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
                teacher_logits = teacher(inputs)
            t = args.temperature
            loss = F.kl_div(F.log_softmax(logits / t, -1).flatten(0, 1), F.log_softmax(teacher_logits / t, -1)
                            .flatten(0, 1), log_target=True, reduction="batchmean") * t * t
        else:
            losses = F.cross_entropy(logits.flatten(0, 1), targets.flatten(), reduction="none")
            loss = (losses * mask.flatten()).sum() / mask.sum().clamp(min=1)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        record = {"step": step, "tokens": step * args.batch * args.seq, "lr": lr, "loss": loss.item(),
                  "step_s": time.time() - t0, "time": time.time()}
        if step % args.eval_every == 0 or step == steps_total:
            record["heldout_loss"] = heldout_loss(model, held_ids, args.seq)
            print(json.dumps(record), flush=True)
        log.write(json.dumps(record) + "\n")
        log.flush()
        if time.time() - last_save > 600:
            save()
            last_save = time.time()
    save()
    print(f"stopped at step {step}/{steps_total}", flush=True)


def dataclass_dict(shape: LlamaShape) -> dict:
    import dataclasses
    return dataclasses.asdict(shape)


if __name__ == "__main__":
    main()
