#!/usr/bin/env python3
"""Time to a target accuracy on several networks (and the test-accuracy curves behind it), from one convergence sweep and one
timing-only sweep of the same algorithms.

The emulated math does not depend on the network: a point's accuracy curve is the same at
1 and at 100 Gb/s, only its clock differs. So one full run per algorithm (the convergence
sweep, e.g. scenarios/sweeps/resnet20_convergence.json) gives the step at which the test
accuracy first reaches the target, and timing-only runs per link (e.g.
scenarios/sweeps/resnet20_timing.json) give each step's simulated time there. The time to
target on a link is that link's run's clock at the target step (its evaluation times).

Checked on the way (the script exits 1 when a check fails): where the timing sweep has the
convergence sweep's link, its step times and its clock at every evaluation equal the full
run's bit for bit.
An algorithm of the timing sweep without a convergence point takes the curve of another
named with --same-math (e.g. "DDP fp32=all-reduce SGD": DDP's allreduce hook is parallel
SGD bit for bit, tests/ddp_test.cpp).

Usage: scripts/time_to_target.py CONVERGENCE_OUT TIMING_OUT [--target-accuracy 0.75]
           [--same-math "DDP fp32=all-reduce SGD"] > table.md
"""
import argparse
import json
import math
import pathlib
import sys

from sweep_output import human_time as human
from sweep_output import points as sweep_points


def target_step(result, target):
    """The first evaluation whose test accuracy reaches the target: (step, clock) or None."""
    for e in result.get("eval", []):
        acc = e.get("test_accuracy")
        if acc is None:
            acc = e.get("train_accuracy")
        if acc is not None and acc >= target:
            return e["step"], e["time_s"]
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("convergence", type=pathlib.Path)
    ap.add_argument("timing", type=pathlib.Path)
    ap.add_argument("--target-accuracy", type=float)
    ap.add_argument("--same-math", action="append", default=[])
    ap.add_argument("--convergence-link", default="10 Gb/s",
                    help="the timing sweep's link label of the network the convergence sweep ran on")
    args = ap.parse_args()

    conv_manifest, conv = sweep_points(args.convergence, "time_to_target")
    _, timing = sweep_points(args.timing, "time_to_target")
    target = args.target_accuracy or conv_manifest.get("target_accuracy")
    if not target:
        sys.exit("time_to_target: no target accuracy (--target-accuracy or the sweep's target_accuracy)")
    curves = {labels["algorithm"]: result for labels, result in conv}
    aliases = set()
    for pair in args.same_math:
        alias, original = pair.split("=", 1)
        curves[alias] = curves[original]
        aliases.add(alias)  # the same accuracy curve, not the same step times

    links, by_alg = [], {}
    failures = []
    for labels, result in timing:
        alg, link = labels["algorithm"], labels["link"]
        if link not in links:
            links.append(link)
        by_alg.setdefault(alg, {})[link] = result
        full = curves.get(alg)
        if full is None:
            failures.append(f"{alg}: no convergence point (name one with --same-math)")
            continue
        if alg in aliases or link != args.convergence_link:
            continue
        if result["per_step"]["time_s"] != full["per_step"]["time_s"]:
            failures.append(f"{alg} at {link}: timing-only step times differ from the full run's")
        clocks = {e["step"]: e["time_s"] for e in result.get("eval", [])}
        for e in full.get("eval", []):
            if clocks.get(e["step"]) != e["time_s"]:
                failures.append(f"{alg} at {link}: step {e['step']}: timing-only clock {clocks.get(e['step'])!r} "
                                f"!= the full run's {e['time_s']!r}")

    print(f"| algorithm | test accuracy after {len(next(iter(curves.values()))['per_step']['time_s'])} steps "
          f"| step to {100 * target:g} % | " + " | ".join(f"time to {100 * target:g} %, {l}" for l in links) + " |")
    print("|---|---:|---:|" + "---:|" * len(links))
    best = {l: (math.inf, None) for l in links}
    rows = []
    for alg, per_link in by_alg.items():
        full = curves.get(alg)
        if full is None:
            continue
        hit = target_step(full, target)
        times = {}
        for l in links:
            if hit and l in per_link:
                # The run's clock at that evaluation (it counts what runs before the first
                # step, such as an initial parameter broadcast; step times do not).
                clocks = {e["step"]: e["time_s"] for e in per_link[l].get("eval", [])}
                times[l] = clocks.get(hit[0], math.fsum(per_link[l]["per_step"]["time_s"][: hit[0]]))
                if times[l] < best[l][0]:
                    best[l] = (times[l], alg)
        acc = full["final"].get("test_accuracy")
        rows.append((alg, acc, hit, times))
    for alg, acc, hit, times in rows:
        cells = []
        for l in links:
            t = times.get(l)
            cells.append("-" if t is None else (f"**{human(t)}**" if best[l][1] == alg else human(t)))
        print(f"| {alg} | {'-' if acc is None else f'{100 * acc:.1f} %'} | {hit[0] if hit else 'never'} | "
              + " | ".join(cells) + " |")
    # The accuracy curves the steps to target come from.
    evals = [e["step"] for e in next(iter(curves.values())).get("eval", [])]
    print()
    print("| algorithm | " + " | ".join(f"step {s}" for s in evals) + " |")
    print("|---|" + "---:|" * len(evals))
    for alg, _, _, _ in rows:
        accs = []
        for e in curves[alg].get("eval", []):
            a = e.get("test_accuracy")
            accs.append("-" if a is None else f"{100 * a:.1f}")
        print(f"| {alg} | " + " | ".join(accs) + " |")
    for f in failures:
        print(f"time_to_target: {f}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
