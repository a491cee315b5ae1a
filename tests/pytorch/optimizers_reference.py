#!/usr/bin/env python3
"""torch.optim's SGD, Adam and AdamW on a fixed gradient sequence: the reference
algorithms/optimizers is held to (tests/optimizers_test.cpp).

usage: optimizers_reference.py CASES.json

CASES.json: {"cases": [CASE, ...]}, each CASE {"in": "in.pt", "out": "out.pt", "optimizer": {"name": "sgd" | "adam" | "adamw",
            "weight_decay": ..., "momentum": ..., "dampening": ..., "nesterov": ...,
            "beta1": ..., "beta2": ..., "eps": ..., "amsgrad": ...},
            "decay": [true, false, ...]}
in.pt (torch.save dict, written by the test with LibTorch's pickle_save): "p<i>" the initial
tensors, "g<s>_<i>" the gradient of tensor i at step s (from 0), "lr" the lr of each step
(float64 [steps]). Tensors whose "decay" entry is false go in a second parameter group with
weight_decay 0 (how dtsim's weight-decay mask is expressed in PyTorch). out.pt: "s<s>_<i>",
tensor i after step s.
"""

import json
import sys

import torch


def run(case):
    data = torch.load(case["in"], weights_only=False)
    n = sum(1 for k in data if k.startswith("p"))
    lrs = data["lr"].tolist()
    params = [torch.nn.Parameter(data[f"p{i}"].clone()) for i in range(n)]
    o = case["optimizer"]
    decay = case.get("decay") or [True] * n
    wd = o.get("weight_decay", 0.0)
    groups = [{"params": [p for p, d in zip(params, decay) if d], "weight_decay": wd},
              {"params": [p for p, d in zip(params, decay) if not d], "weight_decay": 0.0}]
    groups = [g for g in groups if g["params"]]
    name = o["name"]
    if name == "sgd":
        opt = torch.optim.SGD(groups, lr=lrs[0], momentum=o.get("momentum", 0.0), dampening=o.get("dampening", 0.0),
                              nesterov=o.get("nesterov", False))
    else:
        cls = torch.optim.Adam if name == "adam" else torch.optim.AdamW
        opt = cls(groups, lr=lrs[0], betas=(o.get("beta1", 0.9), o.get("beta2", 0.999)), eps=o.get("eps", 1e-8),
                  amsgrad=o.get("amsgrad", False))
    out = {}
    for s, lr in enumerate(lrs):
        for i, p in enumerate(params):
            p.grad = data[f"g{s}_{i}"].clone()
        for g in opt.param_groups:
            g["lr"] = lr
        opt.step()
        for i, p in enumerate(params):
            out[f"s{s}_{i}"] = p.detach().clone()
    torch.save(out, case["out"])


def main():
    for case in json.load(open(sys.argv[1]))["cases"]:
        run(case)


if __name__ == "__main__":
    main()
