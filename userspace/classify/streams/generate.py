#!/usr/bin/env python3
"""Writes the synthetic counter streams in this directory (fixed seed, so
the files are reproducible): python3 generate.py. Each row is one task's
counters over a 100 ms period on a ~2.4 GHz core; README.md says what each
task models and where its numbers come from."""
import random

random.seed(7)
HEADER = "period,task,cycles,instructions,llc_misses,stall_cycles,stores\n"


def row(period, task, cpi, mpki, stall, stores_pki, cycles=240_000_000, jitter=0.08):
    j = lambda v: v * (1 + random.uniform(-jitter, jitter))
    c = int(j(cycles))
    ins = int(c / j(cpi))
    return "%d,%s,%d,%d,%d,%d,%d\n" % (
        period, task, c, ins, int(ins * j(mpki) / 1000),
        int(c * min(1.0, j(stall))), int(ins * j(stores_pki) / 1000))


KINDS = {
    # The paper's compute tasks: an IDIV loop (slow divider, no memory)
    # and a matrix multiply (cache-resident, stores into cache).
    "idiv": dict(cpi=2.4, mpki=0.02, stall=0.65, stores_pki=1),
    "matmul": dict(cpi=0.8, mpki=1.0, stall=0.20, stores_pki=100),
    # Random 256 B writes, each flushed and fenced, to persistent memory.
    "pmwrite": dict(cpi=6.0, mpki=30, stall=0.75, stores_pki=250),
    # Reads a large array: misses the LLC, stores little.
    "stream": dict(cpi=3.0, mpki=30, stall=0.70, stores_pki=5),
}


def write(name, rows):
    with open(name, "w") as f:
        f.write("# Synthetic counters, see README.md (generate.py)\n" + HEADER)
        f.writelines(rows)


# compute: two compute tasks; period 12 of idiv is an outlier (an
# interrupt storm of memory traffic), period 15 of matmul it hardly ran.
rows = []
for p in range(24):
    idiv = dict(KINDS["idiv"])
    if p == 12:
        idiv.update(mpki=20, stall=0.8)
    rows.append(row(p, "idiv", **idiv))
    if p == 15:
        rows.append("%d,matmul,90000,50000,1,10,5\n" % p)
    else:
        rows.append(row(p, "matmul", **KINDS["matmul"]))
write("compute.csv", rows)

# pm-writer: two PM writers; pmw-b's stall dips below the enter value
# (not the leave value) for two periods.
rows = []
for p in range(24):
    rows.append(row(p, "pmw-a", **KINDS["pmwrite"]))
    b = dict(KINDS["pmwrite"])
    if p in (10, 11):
        b.update(stall=0.35, jitter=0.0)
    rows.append(row(p, "pmw-b", **b))
write("pm-writer.csv", rows)

# memory-streamer: one streaming reader.
write("memory-streamer.csv", [row(p, "stream", **KINDS["stream"]) for p in range(24)])

# phase-change: compute for 10 periods, PM writing for 10, compute again.
rows = []
for p in range(30):
    kind = "pmwrite" if 10 <= p < 20 else "idiv"
    rows.append(row(p, "phases", **KINDS[kind]))
write("phase-change.csv", rows)
