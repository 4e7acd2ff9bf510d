"""Joint elements, each defined by its stored energy and dissipation function: planar springs
and torsion elements, bushings, ligaments and facet contacts, nonlinear load laws; the named
parameters of models; stiffness matrices of a joint potential."""

from ._base import (
    AbstractBushing as AbstractBushing,
    AbstractPlanarJointElement as AbstractPlanarJointElement,
    AbstractSpatialElement as AbstractSpatialElement,
)
from ._bushings import (
    Bushing as Bushing,
    bushing_force as bushing_force,
    TableBushing as TableBushing,
)
from ._ligaments_facets import (
    FacetContacts as FacetContacts,
    SpatialLigaments as SpatialLigaments,
    unilateral_dissipation as unilateral_dissipation,
)
from ._load_laws import (
    AbstractLoadLaw as AbstractLoadLaw,
    MonotoneCubicLaw as MonotoneCubicLaw,
    pchip_slopes as pchip_slopes,
    PiecewiseLinearLaw as PiecewiseLinearLaw,
    PolynomialLaw as PolynomialLaw,
    TanCosLaw as TanCosLaw,
)
from ._parameters import (
    apply_values as apply_values,
    declared_parameters as declared_parameters,
    element_labels as element_labels,
    Parameter as Parameter,
    ParameterField as ParameterField,
)
from ._planar_springs import (
    AxialSprings as AxialSprings,
    NonlinearTorsion as NonlinearTorsion,
    spring_moments as spring_moments,
    SpringMeasure as SpringMeasure,
    TorsionSpring as TorsionSpring,
    VectorSprings as VectorSprings,
)
from ._rods import (
    ROD_MATERIALS as ROD_MATERIALS,
    rod_material as rod_material,
    rod_segment as rod_segment,
    rod_stiffness as rod_stiffness,
)
from ._stiffness_matrices import (
    block_scale as block_scale,
    cartesian_stiffness as cartesian_stiffness,
    compare_stiffnesses as compare_stiffnesses,
    dual_basis_stiffness as dual_basis_stiffness,
    experimental_stiffness as experimental_stiffness,
    potential_hessian as potential_hessian,
)
