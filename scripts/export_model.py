#!/usr/bin/env python3
"""Export dtsim's built-in models as TorchScript modules for the workload type "torchscript".

  mlp       the built-in Fashion-MNIST MLP (workloads/image_models.cpp): flatten, fc1 in -> 256,
            ReLU, fc2 256 -> 128, ReLU, fc3 128 -> classes; parameters fc1.weight, fc1.bias, ...
  resnet20  the built-in resnet20_real (workloads/resnet20_model.cpp): ResNet-20 for 32 x 32
            images, BatchNorm, option-A shortcuts, no conv biases; parameters conv1.weight,
            bn1.weight, bn1.bias, layer1.0.conv1.weight, ..., fc.weight, fc.bias

Initial weights: --init FILE, a torch.save dict of name -> tensor such as
`dtsim init-params SCENARIO.json --out FILE` writes (the built-in model's initial parameters
at the scenario's seed and data shape), loaded with load_state_dict(strict=True), so the
export starts where the built-in does. Without --init: PyTorch's default initialisation
(mlp) or the built-in's scheme drawn by PyTorch (resnet20), from --seed.

The module is scripted (torch.jit.script) unless --trace, which traces it on a batch of two
random samples instead. Checked with Debian's python3-torch 1.13 exporting and LibTorch 1.13
loading (tests/torchscript_test.cpp). Example:

  build/release/dtsim init-params scenarios/some_mlp_scenario.json --out /tmp/mlp_init.pt
  /usr/bin/python3 scripts/export_model.py mlp --init /tmp/mlp_init.pt --out mlp.pt
"""

import argparse
import math
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F


class MLP(nn.Module):
    def __init__(self, in_features: int, classes: int):
        super().__init__()
        self.fc1 = nn.Linear(in_features, 256)
        self.fc2 = nn.Linear(256, 128)
        self.fc3 = nn.Linear(128, classes)

    def forward(self, x):
        x = torch.flatten(x, 1)
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        return self.fc3(x)


class BasicBlock(nn.Module):
    """conv3x3 - bn - relu - conv3x3 - bn, plus the option-A shortcut, then relu."""

    def __init__(self, in_planes: int, planes: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(in_planes, planes, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride=1, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.subsample = stride != 1 or in_planes != planes
        self.pad_before = (planes - in_planes) // 2
        self.pad_after = planes - in_planes - self.pad_before
        self.stride = stride

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        shortcut = x
        if self.subsample:
            # Every other pixel, zero channels on each side (no parameters).
            shortcut = F.pad(x[:, :, :: self.stride, :: self.stride], [0, 0, 0, 0, self.pad_before, self.pad_after])
        return F.relu(y + shortcut)


class ResNet20(nn.Module):
    def __init__(self, in_channels: int, classes: int):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, 16, 3, stride=1, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(16)
        layers = []
        in_planes = 16
        for stage, planes in enumerate([16, 32, 64]):
            blocks = []
            for block in range(3):
                blocks.append(BasicBlock(in_planes, planes, 2 if stage > 0 and block == 0 else 1))
                in_planes = planes
            layers.append(nn.Sequential(*blocks))
        self.layer1, self.layer2, self.layer3 = layers
        self.fc = nn.Linear(64, classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):  # Kaiming normal, fan-out, ReLU gain (as the built-in)
                fan_out = m.weight.shape[0] * m.weight.shape[2] * m.weight.shape[3]
                nn.init.normal_(m.weight, 0.0, math.sqrt(2.0 / fan_out))
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)

    def forward(self, x):
        h = F.relu(self.bn1(self.conv1(x)))
        h = self.layer3(self.layer2(self.layer1(h)))
        return self.fc(torch.mean(h, [2, 3]))


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("model", choices=["mlp", "resnet20"])
    p.add_argument("--out", required=True, help="the TorchScript file to write")
    p.add_argument("--init", help="a torch.save dict of name -> tensor (dtsim init-params) to start from")
    p.add_argument("--input-shape", type=int, nargs="+", default=None,
                   help="per-sample shape (default 1 28 28 for mlp, 3 32 32 for resnet20)")
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--seed", type=int, default=0, help="the initialisation's seed without --init")
    p.add_argument("--trace", action="store_true", help="trace instead of scripting")
    args = p.parse_args(argv)

    torch.manual_seed(args.seed)
    if args.model == "mlp":
        shape = args.input_shape or [1, 28, 28]
        model = MLP(math.prod(shape), args.classes)
    else:
        shape = args.input_shape or [3, 32, 32]
        if len(shape) != 3 or shape[1:] != [32, 32]:
            p.error("resnet20 takes C x 32 x 32 images")
        model = ResNet20(shape[0], args.classes)
    if args.init:
        state = torch.load(args.init)
        # Buffers (BatchNorm's running statistics) keep their initial values: dtsim's dict
        # holds parameters only.
        missing, unexpected = model.load_state_dict(state, strict=False)
        missing = [m for m in missing if m not in dict(model.named_buffers())]
        if missing or unexpected:
            sys.exit(f"export_model.py: {args.init}: missing {missing}, unexpected {unexpected}")
    model.train()
    if args.trace:
        exported = torch.jit.trace(model, torch.randn([2] + shape))
    else:
        exported = torch.jit.script(model)
    exported.save(args.out)
    count = sum(t.numel() for t in model.parameters())
    print(f"{args.out}: {args.model}, {len(list(model.parameters()))} tensors, {count} parameters, input {shape}")


if __name__ == "__main__":
    main(sys.argv[1:])
