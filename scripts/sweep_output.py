"""Reading a `dtsim sweep` output directory (OUT/sweep.json and OUT/points/<id>.json), for the
study scripts (time_to_target.py, lm_study.py)."""
import json
import sys


def points(out, tool, labels=False):
    """The sweep's manifest and each point as ({axis name: value}, result), in the sweep's order.
    Values are the points' labels where `labels` and the sweep has them. A missing point file
    (a sweep not finished) ends the tool with one line naming it."""
    manifest = json.loads((out / "sweep.json").read_text())
    names = [a.get("name", a["path"]) for a in manifest["axes"]]
    found = []
    for p in manifest["points"]:
        f = out / "points" / (p["id"] + ".json")
        if not f.exists():
            sys.exit(f"{tool}: {f} is missing (the sweep has not finished)")
        point = json.loads(f.read_text())
        values = point.get("labels", point["values"]) if labels else point["values"]
        found.append((dict(zip(names, map(str, values))), point["result"]))
    return manifest, found


def human_time(s):
    """Seconds as a table cell: '-' for none, '1.23 s', '45.6 ms'."""
    if s is None:
        return "-"
    if s >= 1:
        return f"{s:.2f} s"
    return f"{s * 1e3:.1f} ms"
