"""The objective interface every fit kind's residuals implement, so that one solver object solves
them all: optimistix's `fn(y, args)` shape, noise-weighted residuals `r(u)` `(n,)` of the
solver's unconstrained coordinates `u` `(p,)`, with `FAILED_RESIDUAL` where the model could not be
evaluated (`spineid/identify/_common/_failure.py`).

Beside the call, an objective says what a solver needs to know of it:
- `samples()`: how many of its residuals are data (the rest padding, zero), for the degrees of
  freedom of the statistical stop (`None`: all);
- `inexact_jacobians` and `at_precision(u, exact)`: whether it offers cheaper, less accurate
  residuals for the Jacobians on the way to the optimum (an ODE at looser tolerances);
- `stepwise`: whether compiling its residuals costs far more than running them (an
  equilibrium solved per row): a solver then runs its iterations as a Python loop over one
  compiled linearisation instead of compiling the whole loop
  (`spineid.identify._common._least_squares.stepwise_levenberg_marquardt`).
"""

import abc
from typing import ClassVar

import equinox as eqx
from jaxtyping import Array, Float


class AbstractObjective(eqx.Module):
    """Noise-weighted residuals of a fit (module docstring)."""

    stepwise: ClassVar[bool] = False

    @abc.abstractmethod
    def __call__(self, u: Float[Array, " p"], args=None) -> Float[Array, " n"]:
        """The residuals at unconstrained coordinates `u`."""

    def samples(self):
        """How many residuals are data (an integer array, so that padded layouts share a
        compilation), or `None` for all."""
        return None

    @property
    def inexact_jacobians(self) -> bool:
        """Whether `at_precision(u, False)` is cheaper and less accurate than the call."""
        return False

    def at_precision(self, u: Float[Array, " p"], exact) -> Float[Array, " n"]:
        """The residuals at `u`, at the fit's precision where `exact` (a boolean, may be
        traced), at a coarser one otherwise (the same residuals unless `inexact_jacobians`)."""
        return self(u)
