"""Simulation: integrating a model's motion with diffrax, quasi-static equilibria, and
flexibility tests of spine models."""

from ._chain_equilibrium import (
    assemble_links as assemble_links,
    chain_equilibrium as chain_equilibrium,
    chain_flexibility as chain_flexibility,
    ChainEquilibrium as ChainEquilibrium,
    ChainPath as ChainPath,
    engaged as engaged,
)
from ._equilibrium import (
    equilibrium as equilibrium,
    Equilibrium as Equilibrium,
    pose_change as pose_change,
)
from ._flexibility import (
    chain_residual as chain_residual,
    DIRECTIONS as DIRECTIONS,
    dynamic_flexibility as dynamic_flexibility,
    DynamicFlexibility as DynamicFlexibility,
    FlexibilityTest as FlexibilityTest,
    joint_axes as joint_axes,
    joint_names as joint_names,
    load_steps as load_steps,
    moment_sweep as moment_sweep,
    segment_flexibility as segment_flexibility,
    segment_pair as segment_pair,
    spine_flexibility as spine_flexibility,
)
from ._maximal import (
    pinned_pair_maximal_start as pinned_pair_maximal_start,
    pinned_pair_maximal_term as pinned_pair_maximal_term,
)
from ._mebdf import (
    ImplicitTerm as ImplicitTerm,
    lagrangian_implicit_term as lagrangian_implicit_term,
    MEBDF as MEBDF,
    MEBDFState as MEBDFState,
)
from ._modes import linear_modes as linear_modes, LinearModes as LinearModes
from ._simulate import (
    default_solver as default_solver,
    Simulation as Simulation,
    SimulationResult as SimulationResult,
    simulate as simulate,
    simulate_in_windows as simulate_in_windows,
)
from ._windows import integrate_in_windows as integrate_in_windows
