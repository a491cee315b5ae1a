#!/usr/bin/env python3
"""The 'does compression pay?' table from a `dtsim sweep scenarios/sweeps/compression_pays.json`
output directory: per model, rank count and link, each algorithm's steady-state step time (the
last step: PowerSGD's first steps are its plain all-reduce) and exposed communication (that
step's time minus its compute), and the fastest algorithm of the row.

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
    rows = {}
    algorithms = []
    for f in sorted((out / "points").glob("*.json")):
        point = json.loads(f.read_text())
        labels = {a["name"]: str(v) for a, v in zip(point["axes"], point["values"])}
        result = point["result"]
        key = (labels["model"], int(labels["ranks"]), labels["link"])
        step = result["per_step"]["time_s"][-1]
        compute = result["per_step"]["compute_time_s"][-1]
        alg = labels["algorithm"]
        if alg not in algorithms:
            algorithms.append(alg)
        rows.setdefault(key, {})[alg] = (step, step - compute)
    order = ["1 Gb/s", "10 Gb/s", "25 Gb/s", "100 Gb/s"]
    print("| model | ranks | link | " + " | ".join(algorithms) + " | fastest |")
    print("|---|---|---|" + "---|" * (len(algorithms) + 1))
    for key in sorted(rows, key=lambda k: (k[0], k[1], order.index(k[2]))):
        cells = rows[key]
        fastest = min(cells, key=lambda a: cells[a][0])
        line = [key[0], str(key[1]), key[2]]
        for a in algorithms:
            if a in cells:
                step, exposed = cells[a]
                line.append(f"{human(step)} ({human(exposed)})")
            else:
                line.append("-")
        line.append(fastest)
        print("| " + " | ".join(line) + " |")


if __name__ == "__main__":
    main()
