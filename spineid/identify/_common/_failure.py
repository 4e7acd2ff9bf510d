"""The one failed-solve rule of every residual objective: a residual whose model could not be
evaluated (an integration that failed, a load case without equilibrium, a pose past a
singularity) is given the large finite value `FAILED_RESIDUAL`, in noise units, instead of NaN or
inf, so that a Levenberg-Marquardt trial there is rejected (its cost is huge) and the solver backs
off, and so that what failed can be told from the residuals afterwards (`failed`)."""

import jax.numpy as jnp
import numpy as np

FAILED_RESIDUAL = 1e8
"""The residual (noise units) of a value whose model could not be evaluated: far above any misfit
a fit reports (a start 1e7 noise standard deviations off is still a misfit, not a failure), and
squared still far below the largest float."""


def guarded(residuals, evaluated=True):
    """`residuals` (any shape) with `FAILED_RESIDUAL` where they are not finite or where
    `evaluated` (broadcast against them; may be traced) is false."""
    return jnp.where(jnp.isfinite(residuals) & evaluated, residuals, FAILED_RESIDUAL)


def failed(residuals) -> np.ndarray:
    """Which of `residuals` (numpy, noise units) mark a failed evaluation."""
    return np.asarray(residuals) == FAILED_RESIDUAL


def failed_cost(cost: float, fraction: float = 1.0) -> bool:
    """Whether a cost `1/2 sum r^2` is that of a failed evaluation: not finite, or at least
    `fraction` of one residual at `FAILED_RESIDUAL`."""
    return not np.isfinite(cost) or cost >= fraction * 0.5 * FAILED_RESIDUAL**2


def compiled_check_message(error: Exception) -> str:
    """The first sentence of an `equinox.EquinoxRuntimeError` (a check inside compiled code),
    without equinox's stack and debugging advice."""
    text = str(error)
    marker = "EquinoxRuntimeError: "
    tail = text[text.rindex(marker) + len(marker):] if marker in text else text
    sentence = " ".join(tail.split("\n\n")[0].split())
    return sentence or "a check inside compiled code failed"
