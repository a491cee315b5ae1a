#!/usr/bin/env python3
"""Real PyTorch DDP with a communication hook, the reference dtsim's ddp is held to.

usage: ddp_hooks_reference.py CASES.json

CASES.json: {"ranks": W, "steps": T, "seed": S, "lr": LR, "data": "data.pt",
             "init": "init.pt", "cases": [{"hook": ..., "out": "params.json", ...}, ...]}
Hooks: "allreduce" (DDP's own), "fp16_compress", "bf16_compress", "noop", "powersgd" (with
"matrix_approximation_rank", "start_powerSGD_iter", "use_error_feedback", "warm_start",
"random_seed"). W Gloo processes on this machine, one thread each, run every case in turn:
dtsim's `cnn` workload (conv 3x3 pad 1 - relu - maxpool 2, twice, then fc 128 - relu -
fc), loaded from dtsim's initial parameters (`dtsim init-params`), on the torch.save'd
data, with dtsim's iid partition and dtsim's batch order (a full batch of the rank's
shard, reshuffled every step by the rank's generator), plain SGD. Rank 0 writes the
final parameters of each case as {"params": {name: [values]}}, as `dtsim run
--dump-params` does.
"""

import json
import os
import socket
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.algorithms.ddp_comm_hooks import debugging_hooks, default_hooks, powerSGD_hook
from torch.nn.parallel import DistributedDataParallel


class Cnn(nn.Module):
    def __init__(self, channels, size, classes):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, 16, 3, padding=1)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.fc1 = nn.Linear(32 * (size // 4) * (size // 4), 128)
        self.fc2 = nn.Linear(128, classes)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc2(F.relu(self.fc1(x.flatten(1))))


def shard_of(n, rank, ranks, seed):
    # dtsim's workloads/fashion_mnist.cpp partition_indices, "iid".
    order = torch.randperm(n, generator=torch.Generator().manual_seed(seed ^ 0x5EED5EED))
    base, extra = divmod(n, ranks)
    begin = rank * base + min(rank, extra)
    return order[begin:begin + base + (1 if rank < extra else 0)]


def bf16_gloo_hook(process_group, bucket):
    """default_hooks.bf16_compress_hook's steps: cast to bf16, divide by the world size,
    sum in bf16 (in rank order, one rounding per addition, as an all-reduce of bf16 does),
    cast back into the bucket. The bf16 bits travel as int32 (Gloo gathers neither bf16
    nor int16)."""
    world_size = dist.get_world_size()
    compressed = bucket.buffer().to(torch.bfloat16).div_(world_size)
    bits = compressed.view(torch.int16).to(torch.int32)
    gathered = [torch.empty_like(bits) for _ in range(world_size)]
    dist.all_gather(gathered, bits)
    values = [g.to(torch.int16).view(torch.bfloat16) for g in gathered]
    total = values[0].clone()
    for other in values[1:]:
        total.add_(other)
    bucket.buffer().copy_(total)
    fut = torch.futures.Future()
    fut.set_result(bucket.buffer())
    return fut


def hook_of(case, model):
    hook = case["hook"]
    if hook == "allreduce":
        return
    if hook == "fp16_compress":
        model.register_comm_hook(None, default_hooks.fp16_compress_hook)
    elif hook == "bf16_compress":
        # DDP refuses bf16_compress_hook without CUDA and NCCL, and Gloo (PyTorch 1.13) has
        # no bf16 sum: bf16_gloo_hook takes the hook's steps with the sum done over the
        # gathered bf16 values, registered as register_comm_hook does after its check.
        dist._register_comm_hook(model.reducer, None, bf16_gloo_hook)
    elif hook == "noop":
        model.register_comm_hook(None, debugging_hooks.noop_hook)
    elif hook == "powersgd":
        state = powerSGD_hook.PowerSGDState(
            process_group=None,
            matrix_approximation_rank=case["matrix_approximation_rank"],
            start_powerSGD_iter=case["start_powerSGD_iter"],
            use_error_feedback=case["use_error_feedback"],
            warm_start=case["warm_start"],
            random_seed=case["random_seed"])
        model.register_comm_hook(state, powerSGD_hook.powerSGD_hook)
    else:
        raise SystemExit(f"unknown hook {hook}")


def worker(rank, spec, port):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.set_num_threads(1)
    ranks = spec["ranks"]
    dist.init_process_group("gloo", rank=rank, world_size=ranks)
    data = torch.load(spec["data"], weights_only=False)
    x, y = data["x"].float(), data["y"]
    if x.dim() == 3:
        x = x.unsqueeze(1)
    init = torch.load(spec["init"], weights_only=False)
    shard = shard_of(len(y), rank, ranks, spec["seed"])
    for case in spec["cases"]:
        net = Cnn(x.shape[1], x.shape[2], int(y.max()) + 1)
        net.load_state_dict(init, strict=True)
        model = DistributedDataParallel(net)
        hook_of(case, model)
        optimizer = torch.optim.SGD(model.parameters(), lr=spec["lr"])
        # dtsim's ImageWorkload batch generator for this rank.
        batches = torch.Generator().manual_seed((spec["seed"] * 1000003 + 7919 * (rank + 1)) % 2**64)
        for _ in range(spec["steps"]):
            idx = shard[torch.randperm(len(shard), generator=batches)]
            optimizer.zero_grad()
            F.cross_entropy(model(x[idx]), y[idx]).backward()
            optimizer.step()
        if rank == 0:
            params = {name: p.detach().double().flatten().tolist() for name, p in net.named_parameters()}
            with open(case["out"], "w") as f:
                json.dump({"rank": 0, "params": params}, f)
        dist.barrier()
    dist.destroy_process_group()


def main():
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    with open(sys.argv[1]) as f:
        spec = json.load(f)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(worker, args=(spec, port), nprocs=spec["ranks"], join=True)


if __name__ == "__main__":
    main()
