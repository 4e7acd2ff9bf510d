"""Simulation: integrating a model's motion with diffrax, and quasi-static equilibria."""

from ._equilibrium import (
    equilibrium as equilibrium,
    Equilibrium as Equilibrium,
    pose_change as pose_change,
)
from ._simulate import (
    default_solver as default_solver,
    Simulation as Simulation,
    SimulationResult as SimulationResult,
    simulate as simulate,
)
