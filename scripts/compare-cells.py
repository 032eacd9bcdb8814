"""List the fields in which two results trees' cells differ, counting the cells.

    python3 scripts/compare-cells.py BEFORE/results/NAME AFTER/results/NAME

For checking that a change to the runner leaves stored cells the same apart
from what differs between any two runs (timings, ports, timestamps): every
field path that differs in some cell is listed with how many cells differ.
"""
import json, sys, os
a, b = sys.argv[1], sys.argv[2]
def walk(root):
    out = {}
    for d, _, fs in os.walk(os.path.join(root, 'cells')):
        for f in fs:
            if f.endswith('.json') and not f.startswith('.'):
                p = os.path.join(d, f)
                out[os.path.relpath(p, root)] = json.load(open(p))
    return out
def flat(v, pre=''):
    if isinstance(v, dict):
        for k, x in v.items():
            yield from flat(x, f'{pre}.{k}' if pre else k)
    elif isinstance(v, list):
        yield (pre + '[]', len(v))
        for i, x in enumerate(v):
            yield from flat(x, f'{pre}[]')
    else:
        yield (pre, v)
A, B = walk(a), walk(b)
print('cells only in one:', sorted(set(A) ^ set(B)))
diff = {}
for k in sorted(set(A) & set(B)):
    fa, fb = {}, {}
    for p, v in flat(A[k]): fa.setdefault(p, []).append(v)
    for p, v in flat(B[k]): fb.setdefault(p, []).append(v)
    for p in set(fa) | set(fb):
        if fa.get(p) != fb.get(p):
            diff.setdefault(p, 0)
            diff[p] += 1
for p, n in sorted(diff.items()):
    print(f'{n:3d} cells differ in {p}')
