"""The backend plots are drawn with: matplotlib itself, without pyplot (so that choosing it
costs no pyplot import)."""

import matplotlib


def use_file_backend() -> None:
    """Draw into files only (matplotlib's non-interactive `Agg` backend), as the command line
    does: no display is needed. Notebooks keep their own backend unless they call this."""
    matplotlib.use("Agg")
