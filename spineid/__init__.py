"""spineid: parameter identification and inverse problems for the intervertebral joint.

Importing spineid switches JAX to float64 (`jax_enable_x64`): stiffness identification needs
the precision, and mixing float32 and float64 silently would lose it.
"""

import jax

jax.config.update("jax_enable_x64", True)

from ._datasets import dataset_path as dataset_path
from ._io import (
    load_model as load_model,
    model_from_document as model_from_document,
    read_table as read_table,
    read_trajectory as read_trajectory,
    simulation_settings as simulation_settings,
    write_trajectory as write_trajectory,
)
from ._loads import (
    AbstractLoad as AbstractLoad,
    SinusoidalLoad as SinusoidalLoad,
    TabulatedLoad as TabulatedLoad,
)
from ._mechanics import (
    AbstractLagrangianSystem as AbstractLagrangianSystem,
    generalized_accelerations as generalized_accelerations,
    lagrangian_vector_field as lagrangian_vector_field,
    mass_matrix as mass_matrix,
    mechanical_energy as mechanical_energy,
)
from ._planar_elements import (
    AbstractPlanarJointElement as AbstractPlanarJointElement,
    AxialSprings as AxialSprings,
    spring_moments as spring_moments,
    SpringMeasure as SpringMeasure,
    TorsionSpring as TorsionSpring,
    VectorSprings as VectorSprings,
)
from ._planar_kinematics import (
    body_point_position as body_point_position,
    body_point_velocity as body_point_velocity,
    rotation_matrix as rotation_matrix,
    to_body_coordinates as to_body_coordinates,
)
from ._pinned_pair import PinnedPair as PinnedPair
from ._planar_pair import PlanarBody as PlanarBody, PlanarPair as PlanarPair
from ._simulate import (
    default_solver as default_solver,
    Simulation as Simulation,
    SimulationResult as SimulationResult,
    simulate as simulate,
)

__version__ = "0.1.0"
from ._identify import (
    analyse as analyse,
    fit as fit,
    fit_many as fit_many,
    FitProblem as FitProblem,
    FitResult as FitResult,
    Measurement as Measurement,
)
from ._io import load_model_file as load_model_file, ModelFile as ModelFile
from ._least_squares import (
    LeastSquaresSolution as LeastSquaresSolution,
    levenberg_marquardt as levenberg_marquardt,
)
from ._measure import (
    first_variation as first_variation,
    MeasureCurve as MeasureCurve,
    MeasureResult as MeasureResult,
    recover as recover,
    recover_grid as recover_grid,
    RecoveryProblem as RecoveryProblem,
)
from ._parameters import apply_values as apply_values, Parameter as Parameter
from ._uncertainty import Identifiability as Identifiability
from ._mechanics import inverse_dynamics as inverse_dynamics
from ._rotations import (
    angular_velocity as angular_velocity,
    dual_euler_basis as dual_euler_basis,
    E_T as E_T,
    E_W as E_W,
    e_T as e_T,
    e_W as e_W,
    euler123_angles as euler123_angles,
    euler123_rotation as euler123_rotation,
    euler_basis as euler_basis,
    relative_motion as relative_motion,
    RelativeMotion as RelativeMotion,
)
from ._bushing import (
    bushing_deflection as bushing_deflection,
    bushing_deflection_rate as bushing_deflection_rate,
    bushing_force as bushing_force,
    bushing_wrenches as bushing_wrenches,
)
from ._spatial_pair import (
    AbstractBushing as AbstractBushing,
    Bushing as Bushing,
    TableBushing as TableBushing,
    SpatialBody as SpatialBody,
    SpatialPair as SpatialPair,
)
from ._spatial_chain import (
    K_F_E as K_F_E,
    lumbar_models as lumbar_models,
    lumbar_spine_models as lumbar_spine_models,
    prescribed_motion as prescribed_motion,
    SpatialChain as SpatialChain,
)
from ._stiffness_fit import (
    fit_stiffness_matrix as fit_stiffness_matrix,
    QuasiStaticTest as QuasiStaticTest,
    read_quasi_static as read_quasi_static,
    StiffnessFit as StiffnessFit,
)
from ._stiffness_matrices import (
    block_scale as block_scale,
    cartesian_stiffness as cartesian_stiffness,
    compare_stiffnesses as compare_stiffnesses,
    dual_basis_stiffness as dual_basis_stiffness,
    experimental_stiffness as experimental_stiffness,
    potential_hessian as potential_hessian,
)
from ._opensim_export import (
    opensim_model_xml as opensim_model_xml,
    write_opensim_model as write_opensim_model,
)
from ._load_laws import (
    AbstractLoadLaw as AbstractLoadLaw,
    MonotoneCubicLaw as MonotoneCubicLaw,
    pchip_slopes as pchip_slopes,
    PiecewiseLinearLaw as PiecewiseLinearLaw,
    PolynomialLaw as PolynomialLaw,
    TanCosLaw as TanCosLaw,
)
from ._planar_elements import NonlinearTorsion as NonlinearTorsion
from ._table_fit import (
    fit_load_law as fit_load_law,
    LawFit as LawFit,
    LoadDisplacementData as LoadDisplacementData,
    read_load_displacement as read_load_displacement,
)
from ._datasets import (
    christophy_stiffness as christophy_stiffness,
    DataTable as DataTable,
    fritzkowski_parameters as fritzkowski_parameters,
    l5_s1_law as l5_s1_law,
    liu_implant_nodes as liu_implant_nodes,
    liu_l5_s1_phases as liu_l5_s1_phases,
    liu_origin_nodes as liu_origin_nodes,
    liu_scoliosis_curve as liu_scoliosis_curve,
    liu_vertebra_nodes as liu_vertebra_nodes,
)
from ._planar_chain import (
    EnergyWorkCheck as EnergyWorkCheck,
    energy_work_check as energy_work_check,
    head_neck_chain as head_neck_chain,
    HeadNeckChain as HeadNeckChain,
    TriangularPulse as TriangularPulse,
)
from ._whiplash import (
    peak_force_sensitivity as peak_force_sensitivity,
    whiplash_study as whiplash_study,
    WhiplashStudy as WhiplashStudy,
)
from ._plots import (
    plot_chain_snapshots as plot_chain_snapshots,
    plot_whiplash as plot_whiplash,
)
from ._contact_geometry import (
    blended_contact as blended_contact,
    blending_factor as blending_factor,
    CONTACT_CASES as CONTACT_CASES,
    ContactGeometry as ContactGeometry,
    flat_contact as flat_contact,
    FlatContact as FlatContact,
    skew_contact as skew_contact,
)
from ._spatial_pair import AbstractSpatialElement as AbstractSpatialElement
from ._spatial_elements import (
    disc_on_plane as disc_on_plane,
    FacetContacts as FacetContacts,
    flat_transition as flat_transition,
    SpatialLigaments as SpatialLigaments,
    unilateral_dissipation as unilateral_dissipation,
)
from ._segment import (
    equilibrium as equilibrium,
    Equilibrium as Equilibrium,
    LOAD_CASES as LOAD_CASES,
    load_cases as load_cases,
    MORONEY_STIFFNESS as MORONEY_STIFFNESS,
    pose_change as pose_change,
    segment_study as segment_study,
    SegmentStudy as SegmentStudy,
    solve_load_cases as solve_load_cases,
)
from ._segment_fit import fit_segment as fit_segment, SegmentFit as SegmentFit
from ._plots import (
    plot_flat_transition as plot_flat_transition,
    plot_segment_study as plot_segment_study,
)
