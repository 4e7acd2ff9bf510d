"""Plots a person would rather look at than read; the only part of spineid that imports
matplotlib. The plot functions load on first use (PEP 562), with matplotlib's pyplot (about
0.3 s): `import spineid`, and a command that draws nothing (`--no-plots`), never import it.
"""

from typing import TYPE_CHECKING

from ._backend import use_file_backend as use_file_backend

if TYPE_CHECKING:  # (the names, for readers, type checkers and the API documentation)
    from ._database import (
        plot_load_laws as plot_load_laws,
        plot_spine_geometry as plot_spine_geometry,
    )
    from ._fits import (
        plot_design as plot_design,
        plot_fit as plot_fit,
        plot_identifiability as plot_identifiability,
        plot_law_fit as plot_law_fit,
        plot_population as plot_population,
        plot_posterior as plot_posterior,
        plot_protocol as plot_protocol,
        plot_profile as plot_profile,
        plot_residuals as plot_residuals,
        plot_stiffness_fit as plot_stiffness_fit,
        plot_traces as plot_traces,
    )
    from ._measures import plot_grid_study as plot_grid_study, plot_measure as plot_measure
    from ._pairs import (
        plot_planar_pair as plot_planar_pair,
        plot_planar_trajectories as plot_planar_trajectories,
    )
    from ._spine import plot_flexibility as plot_flexibility, plot_spine as plot_spine
    from ._studies import (
        plot_chain_snapshots as plot_chain_snapshots,
        plot_flat_transition as plot_flat_transition,
        plot_segment_study as plot_segment_study,
        plot_whiplash as plot_whiplash,
    )


def __getattr__(name: str):
    if name.startswith("plot_"):
        from . import _database, _fits, _measures, _pairs, _spine, _studies  # (pyplot)

        for module in (_database, _fits, _measures, _pairs, _spine, _studies):
            if name in vars(module):
                return vars(module)[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
