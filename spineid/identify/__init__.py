"""Identification: fitting model parameters to trajectories, recovering stiffness measures,
fitting stiffness matrices, load laws and segment parameters to quasi-static tests, with
standard errors and identifiability."""

from ._common._goodness import assess_fit as assess_fit
from ._common._verdict import GoodnessOfFit as GoodnessOfFit
from ._common._least_squares import (
    LeastSquaresSolution as LeastSquaresSolution,
    levenberg_marquardt as levenberg_marquardt,
)
from ._common._noise_kinds import (
    AbstractNoiseModel as AbstractNoiseModel,
    AR as AR,
    White as White,
)
from ._common._lab_noise import correlated_noise as correlated_noise
from ._common._noise_model import ChannelNoise as ChannelNoise
from ._common._result_family import (
    AbstractParameterFit as AbstractParameterFit,
    AbstractResult as AbstractResult,
)
from ._common._uncertainty import Identifiability as Identifiability
from ._design._design import (
    Candidate as Candidate,
    candidate_sensitivities as candidate_sensitivities,
    CRITERIA as CRITERIA,
    design as design,
    Design as Design,
    peak_frequency as peak_frequency,
    peak_loads as peak_loads,
)
from ._design._linearity import (
    LINEARITY_TOLERANCE as LINEARITY_TOLERANCE,
    LinearityCheck as LinearityCheck,
)
from ._design._posterior import (
    default_prior as default_prior,
    Posterior as Posterior,
    posterior as posterior,
    PRIOR_KINDS as PRIOR_KINDS,
)
from ._design._protocol import (
    optimise_protocol as optimise_protocol,
    Protocol as Protocol,
    ProtocolProblem as ProtocolProblem,
)
from ._design._validation import (
    DesignValidation as DesignValidation,
    validate_design as validate_design,
)
from ._kinds._segment_fit import fit_segment as fit_segment, SegmentFit as SegmentFit
from ._kinds._spine_fit import (
    fit_spine_levels as fit_spine_levels,
    scaled_laws as scaled_laws,
    SpineFit as SpineFit,
)
from ._kinds._stiffness_fit import (
    fit_stiffness_matrix as fit_stiffness_matrix,
    StiffnessFit as StiffnessFit,
)
from ._kinds._law_form import LawDynamics as LawDynamics, LawForm as LawForm
from ._kinds._table_fit import fit_load_law as fit_load_law, LawFit as LawFit
from ._recovery._recover import recover as recover, recover_grid as recover_grid
from ._recovery._recovery_problem import (
    first_variation as first_variation,
    MeasureCurve as MeasureCurve,
    RecoveryProblem as RecoveryProblem,
)
from ._recovery._recovery_result import MeasureResult as MeasureResult
from ._solvers import (
    AbstractLocalSolver as AbstractLocalSolver,
    AbstractSolver as AbstractSolver,
    AbstractWrappedSolver as AbstractWrappedSolver,
    Adam as Adam,
    Auto as Auto,
    GridFrankWolfe as GridFrankWolfe,
    JaxoptLevenbergMarquardt as JaxoptLevenbergMarquardt,
    LBFGS as LBFGS,
    LevenbergMarquardt as LevenbergMarquardt,
    LocalSolution as LocalSolution,
    MultipleShooting as MultipleShooting,
    VariableProjection as VariableProjection,
    MultiStart as MultiStart,
    OptimistixLevenbergMarquardt as OptimistixLevenbergMarquardt,
    SlidingFrankWolfe as SlidingFrankWolfe,
)
from ._trajectory._batch_fits import (
    BatchFits as BatchFits,
    fit_batch as fit_batch,
    fit_many as fit_many,
    fit_record as fit_record,
)
from ._trajectory._fit import analyse as analyse, fit as fit
from ._trajectory._problem import FitProblem as FitProblem
from ._trajectory._result import FitResult as FitResult
