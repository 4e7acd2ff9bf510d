"""Models: the mechanics core (equations of motion from energies), loads, and every model
kind: planar and pinned pairs, the spatial pair, spatial chains and the head-neck chain."""

from ._head_neck import (
    EnergyWorkCheck as EnergyWorkCheck,
    energy_work_check as energy_work_check,
    HeadNeckChain as HeadNeckChain,
    TriangularPulse as TriangularPulse,
)
from ._loads import (
    AbstractLoad as AbstractLoad,
    PLANAR_LOAD_COMPONENTS as PLANAR_LOAD_COMPONENTS,
    SinusoidalLoad as SinusoidalLoad,
    TabulatedLoad as TabulatedLoad,
)
from ._mechanics import (
    AbstractLagrangianSystem as AbstractLagrangianSystem,
    generalized_accelerations as generalized_accelerations,
    inverse_dynamics as inverse_dynamics,
    lagrange_equations as lagrange_equations,
    lagrangian_vector_field as lagrangian_vector_field,
    mass_matrix as mass_matrix,
    mechanical_energy as mechanical_energy,
)
from ._pair import AbstractVertebralPair as AbstractVertebralPair
from ._multibody import (
    MultibodyTree as MultibodyTree,
    TransformAxis as TransformAxis,
    TreeJoint as TreeJoint,
)
from ._tree_parts import (
    CoordinateCoupler as CoordinateCoupler,
    CoordinateLimit as CoordinateLimit,
    ExpressionBushing as ExpressionBushing,
    PrescribedLoad as PrescribedLoad,
    TreeBushing as TreeBushing,
    TreeMarker as TreeMarker,
)
from ._pinned_pair import PinnedPair as PinnedPair
from ._planar_pair import PlanarBody as PlanarBody, PlanarPair as PlanarPair
from ._spatial_chain import (
    ChainLink as ChainLink,
    lumbar_models as lumbar_models,
    prescribed_motion as prescribed_motion,
    SpatialChain as SpatialChain,
)
from ._spatial_pair import (
    SPATIAL_LOAD_COMPONENTS as SPATIAL_LOAD_COMPONENTS,
    SpatialBody as SpatialBody,
    SpatialPair as SpatialPair,
)
