#!/usr/bin/env python3
"""A GPT-2-style decoder written as a torch.nn module, the reference dtsim's `gpt` workload
(workloads/gpt_model.hpp) is held to (tests/gpt_test.cpp).

usage: gpt_reference.py CASE.json

CASE.json: {"in": "in.pt", "out": "out.pt", "layers": L, "heads": H, "width": d,
            "context": T, "vocab": V}
in.pt (torch.save dict): the parameters under nanoGPT's names (transformer.wte.weight, ...;
the head is tied to transformer.wte.weight), "tokens" and "targets" (int64 [B, S]). The
module computes in the parameters' dtype. out.pt: "loss" (0-dim), "correct" (positions whose
arg-max logit is the target), and every parameter's gradient under its name.
"""

import json
import math
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln_1 = nn.LayerNorm(d)
        self.attn = nn.Module()
        self.attn.c_attn = nn.Linear(d, 3 * d)
        self.attn.c_proj = nn.Linear(d, d)
        self.ln_2 = nn.LayerNorm(d)
        self.mlp = nn.Module()
        self.mlp.c_fc = nn.Linear(d, 4 * d)
        self.mlp.c_proj = nn.Linear(4 * d, d)

    def attention(self, x):
        B, S, d = x.shape
        q, k, v = self.attn.c_attn(x).split(d, dim=2)
        q, k, v = (t.view(B, S, self.heads, d // self.heads).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        mask = torch.ones(S, S, dtype=torch.bool).triu(1)
        att = F.softmax(att.masked_fill(mask, float("-inf")), dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, S, d)
        return self.attn.c_proj(y)

    def forward(self, x):
        x = x + self.attention(self.ln_1(x))
        return x + self.mlp.c_proj(F.gelu(self.mlp.c_fc(self.ln_2(x))))


class Gpt(nn.Module):
    def __init__(self, layers, heads, d, context, vocab):
        super().__init__()
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(vocab, d), wpe=nn.Embedding(context, d),
            h=nn.ModuleList([Block(d, heads) for _ in range(layers)]), ln_f=nn.LayerNorm(d)))
        self.lm_head = nn.Linear(d, vocab, bias=False)
        self.lm_head.weight = self.transformer.wte.weight  # tied

    def forward(self, idx, targets):
        B, S = idx.shape
        x = self.transformer.wte(idx) + self.transformer.wpe(torch.arange(S))
        for block in self.transformer.h:
            x = block(x)
        logits = self.lm_head(self.transformer.ln_f(x))
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
        correct = (logits.argmax(-1) == targets).sum()
        return loss, correct


def main():
    case = json.load(open(sys.argv[1]))
    data = torch.load(case["in"], weights_only=False)
    model = Gpt(case["layers"], case["heads"], case["width"], case["context"], case["vocab"])
    names = [n for n, _ in model.named_parameters()]
    dtype = data["transformer.wte.weight"].dtype
    model = model.to(dtype)
    with torch.no_grad():
        for n, p in model.named_parameters():
            p.copy_(data[n])
    loss, correct = model(data["tokens"], data["targets"])
    loss.backward()
    out = {"loss": loss.detach(), "correct": correct, "names": torch.tensor([len(names)])}
    for n, p in model.named_parameters():
        out[n] = p.grad.detach().clone()
    torch.save(out, case["out"])
    # The parameter names in order, one a line, for the test to compare with dtsim's.
    with open(case["out"] + ".names", "w") as f:
        f.write("\n".join(names) + "\n")


if __name__ == "__main__":
    main()
