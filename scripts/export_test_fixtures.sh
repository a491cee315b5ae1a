#!/bin/sh
# Regenerates tests/data/mlp_4x4_seed5.pt, the TorchScript export of the built-in mlp for
# 1 x 4 x 4 images in 10 classes with its initial weights at seed 5 (tests/torchscript_test.cpp,
# TorchScript.ScriptExportedMlpFixture*): dtsim init-params writes the built-in's weights,
# scripts/export_model.py scripts the MLP with them. Needs python3-torch (Debian's 1.13) and
# a built dtsim (default build/release/dtsim).
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
dtsim=${DTSIM:-$here/build/release/dtsim}
python=${PYTHON:-/usr/bin/python3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# Any 1 x 4 x 4 images with labels 0..9: init-params reads only their shape and classes.
"$python" -c "import torch; torch.save({'x': torch.zeros(40, 1, 4, 4), 'y': torch.arange(40) % 10}, '$tmp/images.pt')"
cat > "$tmp/s.json" <<JSON
{"name": "fixture", "ranks": 4, "steps": 1, "seed": 5,
 "workload": {"type": "mlp", "tensors_file": "images.pt", "batch_size": 4},
 "algorithm": {"name": "parallel_sgd", "variant": "centralized", "lr": 0.05},
 "topology": {"kind": "ring"}, "network": {"model": "alpha_beta", "latency_us": 5, "bandwidth_GBps": 1}}
JSON
"$dtsim" init-params "$tmp/s.json" --out "$tmp/init.pt"
"$python" "$here/scripts/export_model.py" mlp --init "$tmp/init.pt" --input-shape 1 4 4 --out "$here/tests/data/mlp_4x4_seed5.pt"
