"""A stand-in for an examples/real script, with planted step times, for bench_truth's tests.

Prints one `MEMBOUND_TRUTH {json}` line as the real scripts do: the baseline takes 100 ms per
step, plus 2 ms for every earlier baseline run counted in $FAKE_TRUTH_COUNTER (planted
drift); `--fix-sync` takes 80 ms, `--fix-copy` 95 ms. `--broken` dies before printing,
With $FAKE_TRUTH_ALL_DRIFT set, every run
(fixes too) takes 2 ms more per earlier run: a machine drifting during the call. `--hang`
writes its pid to $FAKE_TRUTH_PIDFILE and sleeps. `--train` runs a tiny torch loop
of real optimizer steps, so that `membound diagnose` can capture it.
"""

import argparse
import json
import os
import sys
import time
from pathlib import Path

p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, required=True)
p.add_argument("--warmup-steps", type=int, required=True)
p.add_argument("--fix-sync", action="store_true")
p.add_argument("--fix-copy", action="store_true")
p.add_argument("--broken", action="store_true")
p.add_argument("--hang", action="store_true")
p.add_argument("--train", action="store_true")
args = p.parse_args()

if args.broken:
    print("Traceback (most recent call last):\nRuntimeError: planted failure", file=sys.stderr)
    sys.exit(1)
if args.hang:
    Path(os.environ["FAKE_TRUTH_PIDFILE"]).write_text(str(os.getpid()))
    time.sleep(600)
if args.train:
    import torch

    w = torch.nn.Parameter(torch.ones(4))
    opt = torch.optim.SGD([w], lr=0.1)
    for _ in range(args.warmup_steps + args.steps):
        (w * w).sum().backward()
        opt.step()
        opt.zero_grad()

if os.environ.get("FAKE_TRUTH_ALL_DRIFT"):  # every run drifts: +2 ms per earlier run
    counter = Path(os.environ["FAKE_TRUTH_COUNTER"])
    earlier = int(counter.read_text()) if counter.exists() else 0
    counter.write_text(str(earlier + 1))
    step_ms = (80.0 if args.fix_sync else 95.0 if args.fix_copy else 100.0) + 2.0 * earlier
elif args.fix_sync:
    step_ms = 80.0
elif args.fix_copy:
    step_ms = 95.0
else:
    counter = Path(os.environ["FAKE_TRUTH_COUNTER"])
    earlier = int(counter.read_text()) if counter.exists() else 0
    counter.write_text(str(earlier + 1))
    step_ms = 100.0 + 2.0 * earlier
flags = {"fix_sync": args.fix_sync, "fix_copy": args.fix_copy}
print("some output of the script")
print("MEMBOUND_TRUTH " + json.dumps({"script": "fake", "steps": 1, "step_ms": -1.0}))  # superseded
line = {"script": "fake", "steps": args.steps, "step_ms": step_ms, "step_ms_median": step_ms - 1}
print("MEMBOUND_TRUTH " + json.dumps({**line, "flags": flags}))
