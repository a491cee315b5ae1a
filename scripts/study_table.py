#!/usr/bin/env python3
"""The 'does compression pay?' table from a `dtsim sweep` output directory of
scenarios/sweeps/compression_pays*.json: one row per combination of the other axes that vary
(model, ranks, link; or model and GPUs), in the sweep's order, each algorithm's steady-state
step time (the last step: PowerSGD's first steps are its plain all-reduce) and, in brackets,
its exposed communication (that step's time minus its compute), and the fastest algorithm.

Usage: scripts/study_table.py OUT_DIR > table.md
"""
import json
import pathlib
import sys


def human(s):
    if s < 1e-12:
        return "0"
    if s >= 1:
        return f"{s:.2f} s"
    return f"{s * 1e3:.1f} ms"


def main():
    out = pathlib.Path(sys.argv[1])
    points = sorted((json.loads(f.read_text()) for f in (out / "points").glob("*.json")), key=lambda p: p["index"])
    if not points:
        sys.exit(f"{out}: no points")
    names = [a["name"] for a in points[0]["axes"]]
    varying = [n for i, n in enumerate(names)
               if n != "algorithm" and len({str(p["values"][i]) for p in points}) > 1]
    rows, algorithms = {}, []
    for point in points:
        labels = dict(zip(names, (str(v) for v in point["values"])))
        key = tuple(labels[n] for n in varying)
        steps = point["result"]["per_step"]
        step, compute = steps["time_s"][-1], steps["compute_time_s"][-1]
        if labels["algorithm"] not in algorithms:
            algorithms.append(labels["algorithm"])
        rows.setdefault(key, {})[labels["algorithm"]] = (step, step - compute)
    print("| " + " | ".join(varying + algorithms) + " | fastest |")
    print("|" + "---|" * (len(varying) + len(algorithms) + 1))
    for key, cells in rows.items():
        fastest = min(cells, key=lambda a: cells[a][0])
        line = list(key)
        for a in algorithms:
            line.append(f"{human(cells[a][0])} ({human(cells[a][1])})" if a in cells else "-")
        print("| " + " | ".join(line + [fastest]) + " |")


if __name__ == "__main__":
    main()
