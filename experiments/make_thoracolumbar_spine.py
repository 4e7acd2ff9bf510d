"""Write `datasets/thoracolumbar_spine.toml` from Liu's tables and the joint sources
(`spineid.thoracolumbar_spine()`; datasets/thoracolumbar/README.md says where every number
comes from). tests/test_thoracolumbar.py checks that the file and the Python model agree, so run
this again after changing either.

    python experiments/make_thoracolumbar_spine.py
"""

import pathlib

import spineid
from spineid.io import chain_document, dumps_toml, write_text_atomically

HEADER = """\
# The thoracolumbar spine of Liu 2001, chapter 4: L5 ... T1 on a fixed sacrum (S1), written by
# experiments/make_thoracolumbar_spine.py from spineid.thoracolumbar_spine(); sources and
# assumptions in datasets/thoracolumbar/README.md.
# Axes (spineid): e1 anterior, e2 superior, e3 right; lengths in m, angles in rad, masses in kg.
# Bodies: centre of the vertebral body (Liu Appendix A nodes, rigid fits), 1-2-3 Euler angles.
# Joints: table bushings at the disc centres; laws [tx, ty, tz, rx, ry, rz] in N and N m:
# rx lateral bending, ry axial rotation, rz flexion (-) / extension (+).
# A flexion moment on T1 rising to 5 N m in 0.5 s, as `spineid simulate` runs it:
"""

LOADS = """
[[loads]]
component = "Mz_T1"
amplitude = -5.0
frequency = 0.5

[simulation]
t_end = 0.5
n_samples = 101
"""


def main() -> None:
    document = chain_document(spineid.thoracolumbar_spine())
    path = pathlib.Path(__file__).resolve().parents[1] / "datasets" / "thoracolumbar_spine.toml"
    write_text_atomically(path, HEADER + dumps_toml(document) + LOADS)
    print(f"wrote {path.name}")


if __name__ == "__main__":
    main()
