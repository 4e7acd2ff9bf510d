"""Least-squares solvers as objects that carry their own options (the optimistix style):
`fit(problem, LevenbergMarquardt(max_steps=50))`. One file per solver; the interface they share is
in `_base.py` (`AbstractSolver`, `AbstractLocalSolver`, `AbstractWrappedSolver`). Local solvers
run from one start; the wrapped ones are strategies around another solver: `MultipleShooting`,
`MultiStart`, `VariableProjection` and `Auto` (the default of trajectory fits, whose measured
rules are in `_auto.py`). Measure recovery has its own two, which carry its options
(`SlidingFrankWolfe`, `GridFrankWolfe`). The command line's `--solver` names are aliases of
these objects (`SOLVER_NAMES`, `_names.py`)."""

from ._adam import Adam as Adam
from ._auto import Auto as Auto, RINGING_LIMIT as RINGING_LIMIT
from ._base import (
    AbstractLocalSolver as AbstractLocalSolver,
    AbstractPeerLevenbergMarquardt as AbstractPeerLevenbergMarquardt,
    AbstractSolver as AbstractSolver,
    AbstractWrappedSolver as AbstractWrappedSolver,
    check_solver as check_solver,
    LocalSolution as LocalSolution,
    refuse_solver as refuse_solver,
)
from ._frank_wolfe import (
    GridFrankWolfe as GridFrankWolfe,
    SlidingFrankWolfe as SlidingFrankWolfe,
)
from ._jaxopt_lm import JaxoptLevenbergMarquardt as JaxoptLevenbergMarquardt
from ._lbfgs import LBFGS as LBFGS
from ._levenberg_marquardt import LevenbergMarquardt as LevenbergMarquardt
from ._multiple_shooting import MultipleShooting as MultipleShooting
from ._multistart import (
    agreeing as agreeing,
    agreement_note as agreement_note,
    MultiStart as MultiStart,
    SAME_OPTIMUM as SAME_OPTIMUM,
)
from ._names import (
    as_solver as as_solver,
    BATCH_SOLVER as BATCH_SOLVER,
    DEFAULT_SOLVER as DEFAULT_SOLVER,
    SOLVER_NAMES as SOLVER_NAMES,
)
from ._optimistix_lm import OptimistixLevenbergMarquardt as OptimistixLevenbergMarquardt
from ._variable_projection import LAW_SOLVER as LAW_SOLVER, VariableProjection as VariableProjection
