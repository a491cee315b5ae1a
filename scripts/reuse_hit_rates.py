#!/usr/bin/env python3
"""Collective reuse per sweep, from `dtsim sweep` output directories: scheduled collectives
started, how many were replayed, the hit rate over the sweep (replayed / collectives) and the
lowest and highest point's, and the restarts after a conflict.

Usage: scripts/reuse_hit_rates.py OUT_DIR [OUT_DIR ...] > table.md
"""
import json
import pathlib
import sys


def main():
    print("| sweep | points | model | collectives | replayed | hit rate | per point | restarts |")
    print("|---|---:|---|---:|---:|---:|---|---:|")
    for out in map(pathlib.Path, sys.argv[1:]):
        manifest = json.loads((out / "sweep.json").read_text())
        collectives = replayed = restarts = 0
        rates, models, points = [], set(), 0
        for p in manifest["points"]:
            f = out / "points" / (p["id"] + ".json")
            if not f.exists():
                continue
            result = json.loads(f.read_text())["result"]
            reuse = result.get("collective_reuse") or {}
            points += 1
            models.add(result["scenario"]["network"]["model"])
            if not reuse.get("enabled"):
                continue
            collectives += reuse["collectives"]
            replayed += reuse["replayed"]
            restarts += reuse["restarts"]
            if reuse["collectives"]:
                rates.append(reuse["replayed"] / reuse["collectives"])
        rate = f"{100 * replayed / collectives:.1f} %" if collectives else "- (no scheduled collective)"
        spread = f"{100 * min(rates):.1f} to {100 * max(rates):.1f} %" if rates else "-"
        print(f"| {manifest['name']} | {points} | {', '.join(sorted(models))} | {collectives} | {replayed} | "
              f"{rate} | {spread} | {restarts} |")


if __name__ == "__main__":
    main()
