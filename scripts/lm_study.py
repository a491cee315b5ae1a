#!/usr/bin/env python3
"""The low-communication language-model study (issue 48, item 5; docs/low_communication_lm.md):
tables and held-out-loss figures from three sweep output directories.

  FULL    `dtsim sweep scenarios/sweeps/low_communication_lm.json`: every method in full on the
          100 Gb/s links (held-out loss every 25 steps, bits, peak bandwidth, 100 Gb/s times).
  TIMING  `dtsim sweep scenarios/sweeps/low_communication_lm_timing.json`: timing-only runs of
          the same methods (1-bit Adam excepted) on the WAN.
  ONEBIT  `dtsim sweep scenarios/sweeps/low_communication_lm_one_bit_adam_wan.json`: 1-bit Adam
          in full for 100 steps on both networks (timing-only mode refuses one_bit_adam).

The emulated math does not depend on the network, so a method's held-out loss curve (FULL) is
the same on both networks and only the clock differs. The WAN clock at an evaluation is the
timing-only run's clock there. 1-bit Adam's WAN clock is built from its 100-step WAN run: steps
1..100 as run, every later step the mean time of its compressed steps (76..100), whose payload
never changes (their times agree to nanoseconds); the evaluation clocks after step 100 are the clock at 100 plus that many such steps.

Checks (exit status 1 when one fails, the tables are still printed): the 100 Gb/s timing-only
points (--check: scenarios/sweeps/low_communication_lm_timing_check.json) give the full runs'
per-step times and evaluation clocks bit for bit; 1-bit Adam's 100-step run on 100 Gb/s gives the full run's first 100 step times bit for bit; the compressed
steps of 1-bit Adam (after freeze_step) take the same time to 1e-6 of a step, in every run of it.

Usage: scripts/lm_study.py FULL TIMING ONEBIT [--check CHECK] [--target-loss 2.6] [--svg-dir docs/sweeps]
Python 3 standard library only.
"""
import argparse
import json
import math
import pathlib
import sys

from sweep_output import human_time
from sweep_output import points as sweep_points

TOKENS_PER_STEP = 8 * 16 * 64  # ranks x windows per rank x context
WAN, DC = "WAN 1 Gb/s 20 ms", "100 Gb/s 5 us"
FULL_NETWORK = DC


def human_bits(b):
    for unit, f in (("Gbit", 1e9), ("Mbit", 1e6), ("kbit", 1e3)):
        if b >= f:
            return f"{b / f:.3g} {unit}"
    return f"{b:.0f} bit"


def human_rate(b):
    return human_bits(b) + "/s"


# ---------------------------------------------------------------- SVG (matches sweep/svg.cpp's look)
COLORS = ["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#332288", "#882255",
          "#44AA99"]
W, H_, LEFT, TOP, BOTTOM = 480, 354, 80, 44, 62


def esc(s):
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


def tick_label(v):
    if v == 0:
        return "0"
    a = abs(v)
    if a >= 1e5 or a < 1e-3:
        e = math.floor(math.log10(a))
        m = v / 10 ** e
        return f"1e{e}" if abs(m - 1) < 1e-9 else f"{round(m * 100) / 100:g}e{e}"
    return f"{round(v * 1e9) / 1e9:g}"


def nice_ticks(lo, hi):
    """1-2-5 ticks and the range they span (lo and hi widened to whole ticks)."""
    span = hi - lo
    raw = span / 8
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)
    first, last = math.floor(lo / step + 1e-9), math.ceil(hi / step - 1e-9)
    return [round(k * step, 12) for k in range(first, last + 1)], first * step, last * step


def chart(path, title, x_label, y_label, series, x_log=False, y_range=None, notes=(), hlines=()):
    """series: [(name, [(x, y)], marker_points or None)]."""
    xs = [x for _, pts, _ in series for x, _ in pts if (x > 0 or not x_log)]
    ys = [y for _, pts, _ in series for _, y in pts]
    if x_log:
        x_lo, x_hi = 10 ** math.floor(math.log10(min(xs))), 10 ** math.ceil(math.log10(max(xs)))
        x_ticks = [10 ** e for e in range(round(math.log10(x_lo)), round(math.log10(x_hi)) + 1)]
    else:
        x_ticks, x_lo, x_hi = nice_ticks(0.0, max(xs))
    y_lo, y_hi = y_range or (min(ys), max(ys))
    y_ticks, y_lo, y_hi = nice_ticks(y_lo, y_hi)

    def px(x):
        if x_log:
            return LEFT + (math.log10(x) - math.log10(x_lo)) / (math.log10(x_hi) - math.log10(x_lo)) * W
        return LEFT + (x - x_lo) / (x_hi - x_lo) * W

    def py(y):
        return TOP + H_ - (y - y_lo) / (y_hi - y_lo) * H_

    legend_w = 250
    total_w, total_h = LEFT + W + 20 + legend_w, TOP + H_ + BOTTOM + 18 * len(notes)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{total_w:.0f}" height="{total_h:.0f}" '
           f'viewBox="0 0 {total_w:.0f} {total_h:.0f}" font-family="sans-serif" font-size="12">',
           f'<rect width="100%" height="100%" fill="white"/>',
           f'<text x="{LEFT + W / 2:.1f}" y="24" text-anchor="middle" font-size="14" font-weight="bold">{esc(title)}</text>',
           f'<rect x="{LEFT}" y="{TOP}" width="{W}" height="{H_}" fill="none" stroke="#444"/>']
    for t in x_ticks:
        x = px(t)
        out.append(f'<line x1="{x:.1f}" y1="{TOP}" x2="{x:.1f}" y2="{TOP + H_}" stroke="#e4e4e4"/>')
        out.append(f'<text x="{x:.1f}" y="{TOP + H_ + 16}" text-anchor="middle">{tick_label(t)}</text>')
    for t in y_ticks:
        y = py(t)
        out.append(f'<line x1="{LEFT}" y1="{y:.1f}" x2="{LEFT + W}" y2="{y:.1f}" stroke="#e4e4e4"/>')
        out.append(f'<text x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{tick_label(t)}</text>')
    out.append(f'<text x="{LEFT + W / 2:.1f}" y="{TOP + H_ + 40}" text-anchor="middle">{esc(x_label)}</text>')
    out.append(f'<text transform="translate(18 {TOP + H_ / 2:.1f}) rotate(-90)" text-anchor="middle">{esc(y_label)}</text>')
    out.append(f'<clipPath id="plot"><rect x="{LEFT}" y="{TOP}" width="{W}" height="{H_}"/></clipPath>')
    for y, label in hlines:
        out.append(f'<line x1="{LEFT}" y1="{py(y):.1f}" x2="{LEFT + W}" y2="{py(y):.1f}" stroke="#888" stroke-dasharray="4 4"/>')
        out.append(f'<text x="{LEFT + W - 4}" y="{py(y) - 4:.1f}" text-anchor="end" fill="#666">{esc(label)}</text>')
    for i, (name, pts, _) in enumerate(series):
        color = COLORS[i % len(COLORS)]
        dash = ' stroke-dasharray="6 3"' if i >= len(COLORS) else ""
        pts = [(x, y) for x, y in pts if x > 0 or not x_log]
        line = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in pts)
        out.append(f'<g clip-path="url(#plot)"><polyline fill="none" stroke="{color}" stroke-width="1.8"{dash} points="{line}"/>')
        for x, y in pts:
            out.append(f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="2.4" fill="{color}"/>')
        out.append("</g>")
        ly = TOP + 10 + 18 * i
        lx = LEFT + W + 20
        out.append(f'<line x1="{lx}" y1="{ly}" x2="{lx + 22}" y2="{ly}" stroke="{color}" stroke-width="2"{dash}/>')
        out.append(f'<text x="{lx + 28}" y="{ly + 4}">{esc(name)}</text>')
    for k, note in enumerate(notes):
        out.append(f'<text x="{LEFT}" y="{TOP + H_ + BOTTOM + 14 + 18 * k}" fill="#444">{esc(note)}</text>')
    out.append("</svg>")
    pathlib.Path(path).write_text("\n".join(out) + "\n")
    return path


# ---------------------------------------------------------------- the study
def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("full", type=pathlib.Path)
    ap.add_argument("timing", type=pathlib.Path)
    ap.add_argument("onebit", type=pathlib.Path)
    ap.add_argument("--check", type=pathlib.Path, action="append", default=[],
                    help="a timing-only sweep on the full runs' 100 Gb/s links (low_communication_lm_timing_check.json)")
    ap.add_argument("--target-loss", type=float, action="append", default=[],
                    help="a held-out loss to reach (repeatable; default: DP AdamW's loss at its evaluation nearest "
                         "a quarter of the run, rounded to 0.1)")
    ap.add_argument("--svg-dir", type=pathlib.Path, default=None)
    args = ap.parse_args()
    failures = []

    full = {l["method"]: r for l, r in sweep_points(args.full, "lm_study", labels=True)[1]}
    methods = list(full)
    timing = {}
    for d in [args.timing] + args.check:
        for l, r in sweep_points(d, "lm_study", labels=True)[1]:
            timing[(l["method"], l["network"])] = r
    onebit = {l["network"]: r for l, r in sweep_points(args.onebit, "lm_study", labels=True)[1]}

    # Per method and network: the per-step times and the clock at each evaluation.
    clocks = {}  # (method, network) -> {step: clock}
    step_times = {}  # (method, network) -> [s]
    for m in methods:
        f = full[m]
        clocks[(m, DC)] = {e["step"]: e["time_s"] for e in f["eval"]}
        clocks[(m, DC)][len(f["per_step"]["time_s"])] = f["simulated_time_s"]
        step_times[(m, DC)] = f["per_step"]["time_s"]
        if (m, DC) in timing:  # the check: timing-only = full
            t = timing[(m, DC)]
            if t["per_step"]["time_s"] != f["per_step"]["time_s"]:
                failures.append(f"{m}: the 100 Gb/s timing-only step times differ from the full run's")
            tc = {e["step"]: e["time_s"] for e in t["eval"]}
            for e in f["eval"]:
                if tc.get(e["step"]) != e["time_s"]:
                    failures.append(f"{m}: step {e['step']}: timing-only clock {tc.get(e['step'])!r} != full {e['time_s']!r}")
            if t["simulated_time_s"] != f["simulated_time_s"]:
                failures.append(f"{m}: timing-only simulated_time_s differs from the full run's")
        if (m, WAN) in timing:
            t = timing[(m, WAN)]
            clocks[(m, WAN)] = {e["step"]: e["time_s"] for e in t["eval"]}
            clocks[(m, WAN)][len(t["per_step"]["time_s"])] = t["simulated_time_s"]
            step_times[(m, WAN)] = t["per_step"]["time_s"]
        elif f["scenario"]["algorithm"]["name"] == "one_bit_adam":
            freeze = f["scenario"]["algorithm"]["freeze_step"]
            steps = len(f["per_step"]["time_s"])
            short_dc, short_wan = onebit[DC]["per_step"]["time_s"], onebit[WAN]["per_step"]["time_s"]
            n = len(short_dc)
            if short_dc != f["per_step"]["time_s"][:n]:
                failures.append("1-bit Adam: the 100-step run's 100 Gb/s step times differ from the full run's first 100")
            # The compressed steps' times agree to about 1e-7 of a step (the simulated clock's
            # rounding moves them by nanoseconds); the later WAN steps take their mean.
            for name, ts in (("full 100 Gb/s", f["per_step"]["time_s"]), ("short 100 Gb/s", short_dc), ("short WAN", short_wan)):
                lo, hi = min(ts[freeze:]), max(ts[freeze:])
                if hi - lo > 1e-6 * hi:
                    failures.append(f"1-bit Adam ({name}): the compressed steps' times differ by more than 1e-6: {lo!r} .. {hi!r}")
            compressed = math.fsum(short_wan[freeze:]) / (n - freeze)
            wan = short_wan + [compressed] * (steps - n)
            step_times[(m, WAN)] = wan
            c = {e["step"]: e["time_s"] for e in onebit[WAN]["eval"]}
            c[n] = onebit[WAN]["simulated_time_s"]
            for s in sorted(clocks[(m, DC)]):
                if s > n:
                    c[s] = c[n] + (s - n) * compressed
            clocks[(m, WAN)] = c
            # peak on the WAN: the largest bits / step time over the constructed steps
            wan_peak_bits = max(b / t for b, t in zip(f["per_step"]["n_bits"], wan))
            wan_peak_wire = max(b / t for b, t in zip(f["per_step"]["wire_bytes"], wan))
            timing[(m, WAN)] = {"peak_n_bits_per_s": wan_peak_bits, "peak_wire_bytes_per_s": wan_peak_wire,
                                "simulated_time_s": c[steps], "constructed": True}
        else:
            failures.append(f"{m}: no WAN timing")

    dp = methods[0]
    steps = len(full[dp]["per_step"]["time_s"])
    evals = [e["step"] for e in full[dp]["eval"]]

    def loss_at(m, s):
        for e in full[m]["eval"]:
            if e["step"] == s:
                return e["test_loss"]
        return full[m]["final"]["test_loss"] if s == steps else None

    def curve(m):
        return [(e["step"], e["test_loss"]) for e in full[m]["eval"]]

    targets = args.target_loss
    if not targets:
        near = min(evals, key=lambda s: abs(s - 0.25 * steps))
        targets = [round(loss_at(dp, near), 1)]

    total_bits = {m: math.fsum(full[m]["per_step"]["n_bits"]) for m in methods}
    total_wire = {m: math.fsum(full[m]["per_step"]["wire_bytes"]) for m in methods}

    def first_reach(m, target):
        for s, l in curve(m):
            if l is not None and l <= target:
                return s
        return None

    def bits_until(m, s):
        return math.fsum(full[m]["per_step"]["n_bits"][:s])

    dp_final = loss_at(dp, steps)
    print(f"Held-out loss after {steps} steps ({steps * TOKENS_PER_STEP / 1e6:.2f} M tokens), bits and bandwidth per rank, "
          f"simulated time to the end:\n")
    print("| method | held-out loss | vs DP AdamW | bits per rank | DP AdamW's bits / method's | wire bytes per rank "
          "| peak bandwidth, 100 Gb/s | peak bandwidth, WAN | time, 100 Gb/s | time, WAN |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for m in methods:
        l = loss_at(m, steps)
        t_dc, t_wan = full[m]["simulated_time_s"], timing[(m, WAN)]["simulated_time_s"]
        print(f"| {m} | {l:.3f} | {100 * (l - dp_final) / dp_final:+.1f} % | {human_bits(total_bits[m])} "
              f"| {total_bits[dp] / total_bits[m]:.1f}x | {total_wire[m] / 1e6:.1f} MB "
              f"| {human_rate(full[m]['peak_n_bits_per_s'])} | {human_rate(timing[(m, WAN)]['peak_n_bits_per_s'])} "
              f"| {human_time(t_dc)} | {human_time(t_wan)} |")

    cols = [s for s in (50, 100, 200, 300, 400, 500) if s in evals or s == steps] or evals
    print(f"\nHeld-out loss (nats per byte) at equal tokens (8,192 a step):\n")
    print("| method | " + " | ".join(f"step {s} ({s * TOKENS_PER_STEP / 1e6:.2f} M)" for s in cols) + " |")
    print("|---|" + "---:|" * len(cols))
    for m in methods:
        print(f"| {m} | " + " | ".join(f"{loss_at(m, s):.3f}" for s in cols) + " |")

    for target in targets:
        print(f"\nTime to a held-out loss of {target} (the first evaluation, every 25 steps, at or below it):\n")
        print("| method | step | tokens | bits per rank until then | time, 100 Gb/s | time, WAN |")
        print("|---|---:|---:|---:|---:|---:|")
        best = {}
        rows = []
        for m in methods:
            s = first_reach(m, target)
            t_dc = clocks[(m, DC)].get(s) if s else None
            t_wan = clocks[(m, WAN)].get(s) if s else None
            rows.append((m, s, t_dc, t_wan))
            for net, t in ((DC, t_dc), (WAN, t_wan)):
                if t is not None and t < best.get(net, (math.inf,))[0]:
                    best[net] = (t, m)

        def cell(net, t, m):
            return "-" if t is None else (f"**{human_time(t)}**" if best[net][1] == m else human_time(t))
        for m, s, t_dc, t_wan in rows:
            print(f"| {m} | {s if s else 'never'} | {f'{s * TOKENS_PER_STEP / 1e6:.2f} M' if s else '-'} "
                  f"| {human_bits(bits_until(m, s)) if s else '-'} | {cell(DC, t_dc, m)} | {cell(WAN, t_wan, m)} |")

    print("\nPer-step times (mean over the run; the largest step):\n")
    print("| method | mean step, 100 Gb/s | largest step, 100 Gb/s | mean step, WAN | largest step, WAN | bits per rank per step (mean) |")
    print("|---|---:|---:|---:|---:|---:|")
    for m in methods:
        dc, wan = step_times[(m, DC)], step_times[(m, WAN)]
        print(f"| {m} | {human_time(math.fsum(dc) / len(dc))} | {human_time(max(dc))} | {human_time(math.fsum(wan) / len(wan))} "
              f"| {human_time(max(wan))} | {human_bits(total_bits[m] / steps)} |")

    print(f"\nHeld-out loss at every evaluation:\n")
    print("| method | " + " | ".join(str(s) for s in evals) + " |")
    print("|---|" + "---:|" * len(evals))
    for m in methods:
        print(f"| {m} | " + " | ".join(f"{l:.3f}" for _, l in curve(m)) + " |")

    if args.svg_dir:
        d = args.svg_dir
        d.mkdir(parents=True, exist_ok=True)
        y_hi = 4.0
        all_losses = [l for m in methods for _, l in curve(m)]
        y_range = (math.floor(min(all_losses) * 10) / 10, y_hi)
        note = f"Rank-averaged model on 128 held-out windows, every 25 steps (ln 256 = 5.55 at step 0; cut at {y_hi})."
        note2 = "DiLoCo between outer steps: the mean of the workers' local models."
        written = []
        written.append(chart(d / "low_communication_lm_loss_vs_tokens.svg", "Held-out loss against tokens",
                             "tokens (millions; 8,192 a step)", "held-out loss (nats per byte)",
                             [(m, [(s * TOKENS_PER_STEP / 1e6, min(l, y_hi + 1)) for s, l in curve(m)], None) for m in methods],
                             y_range=y_range, notes=(note, note2)))
        for net, tag, log in ((DC, "100g", False), (WAN, "wan", True)):
            written.append(chart(d / f"low_communication_lm_loss_vs_time_{tag}.svg",
                                 f"Held-out loss against simulated time, {net}",
                                 "simulated time (s)" + (", log scale" if log else ""), "held-out loss (nats per byte)",
                                 [(m, [(clocks[(m, net)][s], min(l, y_hi + 1)) for s, l in curve(m)], None) for m in methods],
                                 x_log=log, y_range=y_range, notes=(note, note2),
                                 hlines=[(t, f"target {t}") for t in targets]))
        written.append(chart(d / "low_communication_lm_loss_vs_bits.svg", "Held-out loss against bits sent",
                             "cumulative n_bits per rank, log scale", "held-out loss (nats per byte)",
                             [(m, [(bits_until(m, s), min(l, y_hi + 1)) for s, l in curve(m) if bits_until(m, s) > 0], None)
                              for m in methods],
                             x_log=True, y_range=y_range, notes=(note, "DiLoCo H = 500's only exchange is at step 500.")))
        for w in written:
            print(f"wrote {w}", file=sys.stderr)

    for f in failures:
        print(f"lm_study: {f}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
