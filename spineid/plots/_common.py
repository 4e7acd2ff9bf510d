"""What every plot shares: saving a figure to a file (or handing it back to a notebook).

The plots are the only part of spineid that draws with matplotlib; `import spineid` loads them
only when a plot function is first used.
"""

import math
import pathlib

import matplotlib
import matplotlib.pyplot as plt

from ..io import atomic_path


def _below_suptitle(figure) -> None:
    # tight_layout keeps a suptitle clear of a figure of few rows but not of a tall one (21
    # inches of 7 rows: its first row's titles ran 12 px into it); there, laid out again below.
    title = next((text for text in figure.texts
                  if text.get_text() and text.get_text() == figure.get_suptitle()), None)
    if title is None or not hasattr(figure.canvas, "get_renderer"):
        return  # (a canvas that cannot measure text: tight_layout's own layout kept)
    renderer = figure.canvas.get_renderer()
    bottom = title.get_window_extent(renderer).y0
    boxes = [box for box in (axis.get_tightbbox(renderer) for axis in figure.axes)
             if box is not None]  # (an axis drawn with nothing has none)
    if max((box.y1 for box in boxes), default=-math.inf) > bottom - 4:
        figure.tight_layout(rect=(0, 0, 1, (bottom - 6) / figure.bbox.height))


def _save(figure, path, margins: dict | None = None):
    # Save and close the figure; without a path, hand it back (notebooks show it). The layout:
    # `tight_layout`, which measures every label (a third of a figure's time), or, for the
    # figures drawn once per file of a batch whose labels are known, fixed `margins` (inches
    # from each edge: left, right, bottom, top; and the gaps `hspace`, `wspace`).
    if margins is None:
        figure.tight_layout()
        _below_suptitle(figure)
    else:
        width, height = figure.get_size_inches()
        figure.subplots_adjust(left=margins["left"] / width, right=1 - margins["right"] / width,
                               bottom=margins["bottom"] / height,
                               top=1 - margins["top"] / height,
                               hspace=margins.get("hspace"), wspace=margins.get("wspace"))
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
