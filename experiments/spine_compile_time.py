"""How the first call of a spine's flexibility tests grows with the number of vertebrae.

For spines of the lowest n vertebrae of Liu's T1-L5 spine on its sacrum (the bundled
`datasets/thoracolumbar_spine.toml`, cut after n bodies), each in a new Python process: the
first call of `spineid.segment_flexibility` (every joint, 20 steps per side) and of
`spineid.spine_flexibility` (the moment on the top vertebra, 20 steps, with the stability
check), which pay for their compilation, and a second call of each (warm). The solves run joint
by joint in a `jax.lax.scan` over the joints (one compiled step for every joint), so the
compilation should not grow with n; the warm time grows with it.

The three programs (the segment tests, the whole-spine sweep, its stability check) are stored
(`spineid/_programs.py`): each n runs in two processes on a new, empty cache folder, the first
tracing, compiling and storing them, the second loading them (the first call a lab's second
`spineid spine` command pays).

Run: python experiments/spine_compile_time.py [--bodies 2,5,9,17] [--no-cache]
(`--no-cache` turns JAX's persistent compilation cache and the stored programs off in the child
processes: every process traces and compiles, as before the programs were stored.)
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

CHILD = r"""
import json, sys, time
import spineid
from spineid.io import read_toml
n = int(sys.argv[1])
document = read_toml(spineid.dataset_path("thoracolumbar_spine.toml"))
document["bodies"] = document["bodies"][:n]
document["joints"] = document["joints"][:n]
document.pop("loads", None)
chain = spineid.ModelFile.from_document(document).model
top = chain.body_names[-1]
times = {}
for name, call in (("segments", lambda: spineid.segment_flexibility(chain, 10.0, 20)),
                   ("whole", lambda: spineid.spine_flexibility(chain, top, 10.0, 20))):
    for attempt in ("first", "warm"):
        clock = time.perf_counter()
        call()
        times[f"{name} {attempt}"] = time.perf_counter() - clock
print(json.dumps(times))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bodies", default="2,5,9,17")
    parser.add_argument("--no-cache", action="store_true")
    arguments = parser.parse_args()
    print(f"{'bodies':>6} {'process':>8} {'segments first':>15} {'warm':>8} "
          f"{'whole first':>12} {'warm':>8}")
    for n in (int(v) for v in arguments.bodies.split(",")):
        with tempfile.TemporaryDirectory() as cache:
            environment = {**os.environ, "SPINEID_CACHE_DIR": cache}
            if arguments.no_cache:
                environment["SPINEID_CACHE"] = "off"
            for process in ("first", "second"):
                done = subprocess.run([sys.executable, "-c", CHILD, str(n)],
                                      capture_output=True, text=True, env=environment,
                                      check=False)
                if done.returncode:
                    print(f"{n:>6} {process:>8} failed: "
                          f"{done.stderr.strip().splitlines()[-1]}")
                    break
                times = json.loads(done.stdout.strip().splitlines()[-1])
                print(f"{n:>6} {process:>8} {times['segments first']:15.2f} "
                      f"{times['segments warm']:8.3f} {times['whole first']:12.2f} "
                      f"{times['whole warm']:8.3f}", flush=True)


if __name__ == "__main__":
    main()
