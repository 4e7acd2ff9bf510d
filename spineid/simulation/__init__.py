"""Simulation: integrating a model's motion with diffrax, and quasi-static equilibria."""

from ._equilibrium import (
    equilibrium as equilibrium,
    Equilibrium as Equilibrium,
    pose_change as pose_change,
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
