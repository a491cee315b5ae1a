#!/usr/bin/env python3
"""How many translation units a header edit recompiles, from ninja's dependency log.

usage: scripts/header_fanout.py BUILD_DIR HEADER... (paths relative to the source root)
Prints per header the objects that include it (directly or not) and how many of them
include ATen (LibTorch's heavy headers), the cost of the rebuild.
"""
import json
import os
import subprocess
import sys


def deps(build_dir):
    """Per object, its dependencies as absolute paths (ninja records them as the compiler
    was given them: relative to the build directory under ccache's base_dir)."""
    text = subprocess.run(["ninja", "-C", build_dir, "-t", "deps"], capture_output=True, text=True, check=True).stdout
    objects, current = {}, None
    for line in text.splitlines():
        if line and not line.startswith(" "):
            current = line.split(": #deps")[0]
            objects[current] = set()
        elif line.strip() and current:
            objects[current].add(os.path.normpath(os.path.join(os.path.abspath(build_dir), line.strip())))
    return objects


def torch_objects(build_dir):
    """Objects compiled with LibTorch's headers (a precompiled header hides them from the deps log)."""
    with open(os.path.join(build_dir, "compile_commands.json")) as f:
        commands = json.load(f)
    out = set()
    for c in commands:
        text = c.get("command", "")
        if "torch/csrc/api/include" in text or "/ATen" in text or "cmake_pch" in text and "torch" in text:
            obj = text.split(" -o ")[1].split()[0] if " -o " in text else None
            if obj:
                out.add(obj)
    return out


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    build_dir, headers = sys.argv[1], sys.argv[2:]
    root = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
    objects = deps(build_dir)
    torch = torch_objects(build_dir)
    for header in headers:
        path = os.path.join(root, header)
        users = [o for o, d in objects.items() if path in d and o.endswith(".o")]
        aten = [o for o in users if o in torch]
        print(f"{header}: {len(users)} translation units ({len(aten)} with ATen)")


if __name__ == "__main__":
    main()
