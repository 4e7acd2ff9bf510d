"""What every plot shares: saving a figure to a file (or handing it back to a notebook).

The plots are the only part of spineid that draws with matplotlib; `import spineid` loads them
only when a plot function is first used.
"""

import pathlib

import matplotlib
import matplotlib.pyplot as plt

from ..io import atomic_path


def _save(figure, path):
    # Save and close the figure; without a path, hand it back (notebooks show it).
    figure.tight_layout()
    if path is None:
        return figure
    path = pathlib.Path(path)
    if not path.suffix:  # matplotlib's rule: no suffix, its default format and suffix
        path = path.with_name(f"{path.name}.{matplotlib.rcParams['savefig.format']}")
    try:
        with atomic_path(path) as temporary:  # written whole or not at all
            figure.savefig(temporary, dpi=120)
    finally:
        plt.close(figure)
    return path
