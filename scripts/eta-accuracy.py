#!/usr/bin/env python3
"""How far plan's ETA is from the truth, for one campaign.

Copies the campaign into a fresh folder (so nothing earlier calibrates the
plan), runs `servebench plan`, then `servebench run` with every progress line
timestamped, and prints:

  - the first plan's ETA against the run's wall time;
  - after the first cell of each server, and after each server's last
    cell (so after the first config of each shape too), the "campaign ETA
    left" the run printed against the time the run actually still took.

Usage: scripts/eta-accuracy.py CAMPAIGN.toml [--bin PATH] [--keep DIR]
The copy sits beside the original (relative paths in it still resolve) and
its results go to a fresh folder, DIR or a temporary one.
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

DURATION = re.compile(r"^(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$")


def seconds(text):
    """Parse plan's fmt_s output: 16s, 3m16s, 1h02m."""
    m = DURATION.match(text.strip())
    if not m or not any(m.groups()):
        raise ValueError(f"not a duration: {text!r}")
    h, mi, s = (int(g) if g else 0 for g in m.groups())
    return h * 3600 + mi * 60 + s


def pct(estimate, actual):
    return 100.0 * (estimate - actual) / actual if actual > 0 else float("nan")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("campaign")
    ap.add_argument("--bin", default=os.environ.get("SERVEBENCH_BIN", "servebench"))
    ap.add_argument("--keep", help="folder to run in (kept afterwards)")
    a = ap.parse_args()

    src = os.path.abspath(a.campaign)
    work = os.path.abspath(a.keep or tempfile.mkdtemp(prefix="eta-"))
    results = os.path.join(work, "results")
    shutil.rmtree(results, ignore_errors=True)
    os.makedirs(work, exist_ok=True)
    camp = os.path.join(os.path.dirname(src), f".eta-{os.getpid()}-{os.path.basename(src)}")
    text = open(src).read()
    # Results go to a fresh folder, whatever the file says.
    text = re.sub(r'(?m)^results_dir\s*=.*$', "", text)
    text = re.sub(r'(?m)^\[campaign\]\s*$', f'[campaign]\nresults_dir = "{results}"', text, count=1)
    open(camp, "w").write(text)
    try:
        measure(a, src, camp, results)
    finally:
        os.remove(camp)
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)


def measure(a, src, camp, results):

    plan = subprocess.run([a.bin, "plan", camp], capture_output=True, text=True)
    if plan.returncode != 0:
        sys.exit(f"plan failed:\n{plan.stderr}{plan.stdout}")
    total = re.search(r"^total:.*ETA (\S+)$", plan.stdout, re.M)
    if not total:
        sys.exit(f"no total ETA in plan output:\n{plan.stdout}")
    first_eta = seconds(total.group(1))

    t0 = time.monotonic()
    proc = subprocess.Popen(
        [a.bin, "run", camp], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    lines = []
    for line in proc.stdout:
        lines.append((time.monotonic() - t0, line.rstrip("\n")))
    proc.wait()
    wall = time.monotonic() - t0
    with open(os.path.join(os.path.dirname(results), "run.log"), "w") as f:
        f.writelines(f"{t:8.2f} {line}\n" for t, line in lines)

    # After each server's first finished cell, the next "campaign ETA left".
    checkpoints = []
    server, seen_cell = None, False
    for t, line in lines:
        m = re.match(r"^== server (\S+)", line)
        if m:
            server, seen_cell = m.group(1), False
            continue
        if server and not seen_cell and re.match(r"^\s+\[[^\]]+\] \S+: ", line):
            seen_cell = True
            continue
        m = re.match(r"^\s+campaign ETA left: (\S+)$", line)
        if m and server and seen_cell and (not checkpoints or checkpoints[-1][0] != server):
            checkpoints.append((server, t, seconds(m.group(1))))

    # After each server's last cell: the last "campaign ETA left" before the next server.
    ends = []
    server, last = None, None
    for t, line in lines:
        m = re.match(r"^== server (\S+)", line)
        if m:
            if server and last:
                ends.append((server, *last))
            server, last = m.group(1), None
            continue
        m = re.match(r"^\s+campaign ETA left: (\S+)$", line)
        if m and server:
            last = (t, seconds(m.group(1)))

    print(f"campaign: {src}")
    print(f"run exit status: {proc.returncode}")
    print(f"first plan ETA {first_eta:.0f} s, run took {wall:.1f} s: "
          f"{pct(first_eta, wall):+.0f} %")
    print("after the first cell of each server (remaining: estimated vs actual):")
    for srv, t, left in checkpoints:
        actual = wall - t
        print(f"  {srv:<20} at {t:6.1f} s: {left:5.0f} s vs {actual:6.1f} s  "
              f"{left - actual:+6.1f} s  {pct(left, actual):+.0f} %")
    print("after each server but the last (remaining: estimated vs actual):")
    for srv, t, left in ends:
        actual = wall - t
        print(f"  {srv:<20} at {t:6.1f} s: {left:5.0f} s vs {actual:6.1f} s  "
              f"{left - actual:+6.1f} s  {pct(left, actual):+.0f} %")


if __name__ == "__main__":
    main()
