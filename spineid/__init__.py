"""spineid: parameter identification and inverse problems for the intervertebral joint.

The package is layered; each layer imports only the layers below it (checked by import-linter,
see pyproject.toml):

    cli -> plots -> studies -> identify -> io -> simulation -> models -> elements -> kinematics

Everything public is re-exported here, grouped by layer. The plot functions load matplotlib
only when one of them is first used, so `import spineid` does not import it.

Importing spineid switches JAX to float64 (`jax_enable_x64`): stiffness identification needs
the precision, and mixing float32 and float64 silently would lose it. It also turns JAX's
persistent compilation cache on (`spineid/_cache.py`: where it lives, `SPINEID_CACHE_DIR` to
move it, `SPINEID_CACHE=off` to opt out), so that a second process does not compile again.
"""

import jax

from ._programs import remember_bindings as _remember_bindings
from ._cache import (
    cache_on_import as _cache_on_import,
    default_cache_directory as default_cache_directory,
    use_compilation_cache as use_compilation_cache,
)

jax.config.update("jax_enable_x64", True)
_cache_on_import()

# kinematics: rotations, planar body points, frames and their relative motion, contact geometry
from .kinematics import (  # noqa: E402
    angular_velocity as angular_velocity,
    blended_contact as blended_contact,
    blending_factor as blending_factor,
    body_coordinates as body_coordinates,
    body_point_position as body_point_position,
    body_point_velocity as body_point_velocity,
    bushing_deflection as bushing_deflection,
    bushing_deflection_rate as bushing_deflection_rate,
    bushing_wrenches as bushing_wrenches,
    CONTACT_CASES as CONTACT_CASES,
    ContactGeometry as ContactGeometry,
    dual_euler_basis as dual_euler_basis,
    E_T as E_T,
    E_W as E_W,
    e_T as e_T,
    e_W as e_W,
    euler123_angles as euler123_angles,
    euler123_rotation as euler123_rotation,
    euler_basis as euler_basis,
    flat_contact as flat_contact,
    FlatContact as FlatContact,
    relative_motion as relative_motion,
    relative_poses as relative_poses,
    RelativeMotion as RelativeMotion,
    rigid_poses as rigid_poses,
    rotation_matrix as rotation_matrix,
    skew_contact as skew_contact,
    to_body_coordinates as to_body_coordinates,
)

# elements: springs, bushings, ligaments, facets, load laws; parameters; stiffness matrices
from .elements import (  # noqa: E402
    AbstractBushing as AbstractBushing,
    AbstractLoadLaw as AbstractLoadLaw,
    AbstractPlanarJointElement as AbstractPlanarJointElement,
    AbstractSpatialElement as AbstractSpatialElement,
    apply_values as apply_values,
    AxialSprings as AxialSprings,
    block_scale as block_scale,
    Bushing as Bushing,
    bushing_force as bushing_force,
    cartesian_stiffness as cartesian_stiffness,
    compare_stiffnesses as compare_stiffnesses,
    declared_parameters as declared_parameters,
    dual_basis_stiffness as dual_basis_stiffness,
    element_labels as element_labels,
    experimental_stiffness as experimental_stiffness,
    FacetContacts as FacetContacts,
    MonotoneCubicLaw as MonotoneCubicLaw,
    NonlinearTorsion as NonlinearTorsion,
    Parameter as Parameter,
    ParameterField as ParameterField,
    pchip_slopes as pchip_slopes,
    PiecewiseLinearLaw as PiecewiseLinearLaw,
    PolynomialLaw as PolynomialLaw,
    potential_hessian as potential_hessian,
    ROD_MATERIALS as ROD_MATERIALS,
    rod_segment as rod_segment,
    rod_stiffness as rod_stiffness,
    SpatialLigaments as SpatialLigaments,
    spring_moments as spring_moments,
    SpringMeasure as SpringMeasure,
    TableBushing as TableBushing,
    TanCosLaw as TanCosLaw,
    TorsionSpring as TorsionSpring,
    unilateral_dissipation as unilateral_dissipation,
    VectorSprings as VectorSprings,
)

# models: the mechanics core, loads and every model kind
from .models import (  # noqa: E402
    AbstractLagrangianSystem as AbstractLagrangianSystem,
    AbstractLoad as AbstractLoad,
    AbstractVertebralPair as AbstractVertebralPair,
    ChainLink as ChainLink,
    EnergyWorkCheck as EnergyWorkCheck,
    energy_work_check as energy_work_check,
    generalized_accelerations as generalized_accelerations,
    HeadNeckChain as HeadNeckChain,
    inverse_dynamics as inverse_dynamics,
    lagrange_equations as lagrange_equations,
    lagrangian_vector_field as lagrangian_vector_field,
    lumbar_models as lumbar_models,
    mass_matrix as mass_matrix,
    mechanical_energy as mechanical_energy,
    MultibodyTree as MultibodyTree,
    PinnedPair as PinnedPair,
    PLANAR_LOAD_COMPONENTS as PLANAR_LOAD_COMPONENTS,
    PlanarBody as PlanarBody,
    PlanarPair as PlanarPair,
    prescribed_motion as prescribed_motion,
    SinusoidalLoad as SinusoidalLoad,
    SPATIAL_LOAD_COMPONENTS as SPATIAL_LOAD_COMPONENTS,
    SpatialBody as SpatialBody,
    SpatialChain as SpatialChain,
    SpatialPair as SpatialPair,
    TabulatedLoad as TabulatedLoad,
    TriangularPulse as TriangularPulse,
)

# simulation: motion by diffrax, quasi-static equilibria by Newton's method
from .simulation import (  # noqa: E402
    assemble_links as assemble_links,
    chain_equilibrium as chain_equilibrium,
    chain_flexibility as chain_flexibility,
    chain_residual as chain_residual,
    ChainEquilibrium as ChainEquilibrium,
    ChainPath as ChainPath,
    default_solver as default_solver,
    DIRECTIONS as DIRECTIONS,
    dynamic_flexibility as dynamic_flexibility,
    DynamicFlexibility as DynamicFlexibility,
    equilibrium as equilibrium,
    Equilibrium as Equilibrium,
    FlexibilityTest as FlexibilityTest,
    ImplicitTerm as ImplicitTerm,
    integrate_in_windows as integrate_in_windows,
    joint_axes as joint_axes,
    joint_names as joint_names,
    lagrangian_implicit_term as lagrangian_implicit_term,
    linear_modes as linear_modes,
    LinearModes as LinearModes,
    load_steps as load_steps,
    MEBDF as MEBDF,
    MEBDFState as MEBDFState,
    moment_sweep as moment_sweep,
    pinned_pair_maximal_start as pinned_pair_maximal_start,
    pinned_pair_maximal_term as pinned_pair_maximal_term,
    pose_change as pose_change,
    segment_flexibility as segment_flexibility,
    segment_pair as segment_pair,
    simulate as simulate,
    simulate_in_windows as simulate_in_windows,
    Simulation as Simulation,
    SimulationResult as SimulationResult,
    spine_flexibility as spine_flexibility,
)

# io: model files and their kinds, CSV tables and measured data, bundled datasets, export
from .executors import (  # noqa: E402
    BatchResult as BatchResult,
    Dask as Dask,
    Devices as Devices,
    Local as Local,
    run_batch as run_batch,
)
from .io import (  # noqa: E402
    chain_document as chain_document,
    christophy_stiffness as christophy_stiffness,
    ColumnsRead as ColumnsRead,
    DataTable as DataTable,
    dataset_path as dataset_path,
    DocumentChecker as DocumentChecker,
    export_model as export_model,
    fritzkowski_parameters as fritzkowski_parameters,
    K_F_E as K_F_E,
    liu_implant_nodes as liu_implant_nodes,
    liu_l5_s1_phases as liu_l5_s1_phases,
    liu_origin_nodes as liu_origin_nodes,
    liu_scoliosis_curve as liu_scoliosis_curve,
    liu_vertebra_nodes as liu_vertebra_nodes,
    load_model as load_model,
    load_model_file as load_model_file,
    LoadDisplacementData as LoadDisplacementData,
    MarkerTrajectories as MarkerTrajectories,
    Measurement as Measurement,
    model_from_document as model_from_document,
    model_kinds as model_kinds,
    ModelFile as ModelFile,
    ModelReader as ModelReader,
    opensim_model_xml as opensim_model_xml,
    read_osim as read_osim,
    QuasiStaticTest as QuasiStaticTest,
    read_c3d as read_c3d,
    read_load_displacement as read_load_displacement,
    read_quantities as read_quantities,
    read_quasi_static as read_quasi_static,
    read_storage as read_storage,
    read_table as read_table,
    read_markers as read_markers,
    read_trajectory as read_trajectory,
    read_trc as read_trc,
    register_model_kind as register_model_kind,
    simulation_settings as simulation_settings,
    StorageTable as StorageTable,
    unregister_model_kind as unregister_model_kind,
    write_model_file as write_model_file,
    write_opensim_model as write_opensim_model,
    write_quasi_static as write_quasi_static,
    write_storage as write_storage,
    write_table as write_table,
    write_trajectory as write_trajectory,
)

# spines: the published spines built from the bundled tables (thoracolumbar, lumbar, head-neck)
from .spines import (  # noqa: E402
    bent_geometry as bent_geometry,
    head_neck_chain as head_neck_chain,
    implant_point as implant_point,
    IMPLANT_POINTS as IMPLANT_POINTS,
    instrument as instrument,
    joint_laws as joint_laws,
    joint_ranges as joint_ranges,
    l5_s1_law as l5_s1_law,
    liu_spine_geometry as liu_spine_geometry,
    lumbar_spine_models as lumbar_spine_models,
    Rod as Rod,
    rod_links as rod_links,
    sagittal_curve as sagittal_curve,
    spinal_curve as spinal_curve,
    SpineGeometry as SpineGeometry,
    thoracolumbar_spine as thoracolumbar_spine,
)

# identify: fits, measure recovery, stiffness and law fits, uncertainty and identifiability
from .identify import (  # noqa: E402
    AbstractLocalSolver as AbstractLocalSolver,
    AbstractNoiseModel as AbstractNoiseModel,
    AbstractParameterFit as AbstractParameterFit,
    AbstractResult as AbstractResult,
    AbstractSolver as AbstractSolver,
    AbstractWrappedSolver as AbstractWrappedSolver,
    Adam as Adam,
    analyse as analyse,
    AR as AR,
    assess_fit as assess_fit,
    Auto as Auto,
    BatchFits as BatchFits,
    Candidate as Candidate,
    ChannelNoise as ChannelNoise,
    correlated_noise as correlated_noise,
    CRITERIA as CRITERIA,
    fit_batch as fit_batch,
    design as design,
    Design as Design,
    LINEARITY_TOLERANCE as LINEARITY_TOLERANCE,
    LinearityCheck as LinearityCheck,
    peak_frequency as peak_frequency,
    peak_loads as peak_loads,
    optimise_protocol as optimise_protocol,
    Protocol as Protocol,
    ProtocolProblem as ProtocolProblem,
    Posterior as Posterior,
    posterior as posterior,
    first_variation as first_variation,
    fit as fit,
    fit_load_law as fit_load_law,
    fit_many as fit_many,
    fit_segment as fit_segment,
    fit_stiffness_matrix as fit_stiffness_matrix,
    FitProblem as FitProblem,
    FitResult as FitResult,
    GoodnessOfFit as GoodnessOfFit,
    Identifiability as Identifiability,
    GridFrankWolfe as GridFrankWolfe,
    JaxoptLevenbergMarquardt as JaxoptLevenbergMarquardt,
    LawDynamics as LawDynamics,
    LawFit as LawFit,
    LawForm as LawForm,
    LBFGS as LBFGS,
    LeastSquaresSolution as LeastSquaresSolution,
    levenberg_marquardt as levenberg_marquardt,
    LevenbergMarquardt as LevenbergMarquardt,
    LocalSolution as LocalSolution,
    MeasureCurve as MeasureCurve,
    MeasureResult as MeasureResult,
    MultipleShooting as MultipleShooting,
    VariableProjection as VariableProjection,
    MultiStart as MultiStart,
    OptimistixLevenbergMarquardt as OptimistixLevenbergMarquardt,
    SlidingFrankWolfe as SlidingFrankWolfe,
    fit_spine_levels as fit_spine_levels,
    recover as recover,
    recover_grid as recover_grid,
    RecoveryProblem as RecoveryProblem,
    scaled_laws as scaled_laws,
    SegmentFit as SegmentFit,
    SpineFit as SpineFit,
    StiffnessFit as StiffnessFit,
    White as White,
    DesignValidation as DesignValidation,
    validate_design as validate_design,
)

# studies: whiplash, the nine load cases of a motion segment, a disc settling on a plane,
# instrumentation
from .studies import (  # noqa: E402
    coronal_tilts as coronal_tilts,
    correct_curve as correct_curve,
    Correction as Correction,
    disc_on_plane as disc_on_plane,
    flat_transition as flat_transition,
    LOAD_CASES as LOAD_CASES,
    load_cases as load_cases,
    MORONEY_STIFFNESS as MORONEY_STIFFNESS,
    motion_change as motion_change,
    MotionChange as MotionChange,
    peak_force_sensitivity as peak_force_sensitivity,
    segment_study as segment_study,
    SegmentStudy as SegmentStudy,
    solve_load_cases as solve_load_cases,
    whiplash_study as whiplash_study,
    WhiplashStudy as WhiplashStudy,
)

__version__ = "0.1.0"

# plots: loaded on first use (PEP 562), so that `import spineid` does not import matplotlib.
_PLOTS = (
    "plot_chain_snapshots", "plot_design", "plot_fit", "plot_flat_transition", "plot_grid_study",
    "plot_identifiability", "plot_law_fit", "plot_load_laws", "plot_measure", "plot_population",
    "plot_planar_pair", "plot_planar_trajectories", "plot_posterior", "plot_profile",
    "plot_residuals",
    "plot_segment_study", "plot_flexibility", "plot_spine",
    "plot_spine_geometry", "plot_stiffness_fit", "plot_traces", "plot_whiplash",
)


# What spineid's names are bound to, for the traced-program store to see later replacements
# (spineid/_programs.py, `patched`).
_remember_bindings()


def __getattr__(name: str):
    if name in _PLOTS:
        from . import plots  # the lazy import that keeps matplotlib out of `import spineid`

        return getattr(plots, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_PLOTS))
