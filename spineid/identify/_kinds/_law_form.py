"""What a load-law fit fits, kept apart from the data, the noise and the solver (as lmfit's
`Model` is kept apart from its data and `minimize`'s method): the form of the law (`LawForm`)
and what of the test's dynamics the model of the load includes (`LawDynamics`). One form fits
every file of a batch; the command line's `table` options build the same two objects.
"""

import dataclasses
import math

import numpy as np

from ...elements._load_laws import LAW_KINDS, TABLE_KINDS


APPLIES = {"nodes": TABLE_KINDS, "n_nodes": TABLE_KINDS, "free_breakpoints": TABLE_KINDS,
           "monotone": TABLE_KINDS, "smoothing": ("piecewise_linear",),
           "degree": ("polynomial",)}
"""The law kinds each option of `LawForm` applies to (given otherwise than its default for
another kind, it is refused)."""


def _flag(name: str, value) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name} {value!r}: expected True or False")
    return bool(value)


def _whole(name: str, value, least: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < least:
        raise ValueError(f"{name} {value!r}: expected a whole number >= {least}")
    return int(value)


@dataclasses.dataclass(frozen=True)
class LawForm:
    """The load law a fit fits (`spineid.fit_load_law`): the tables are Liu's stiffness phases
    (2001, section 4.3), `tan_cos` Fritzkowski and Walczak's eq 35.

    **Fields:** `kind` (one of `piecewise_linear`, `monotone_cubic`, `tan_cos`,
    `polynomial`); for the two tables: `nodes` (displacements of the nodes, m or rad, `(k,)`
    increasing, at least 2; default `n_nodes` evenly over the data; with `free_breakpoints` the
    start), `n_nodes` (default 6), `free_breakpoints` (the interior nodes move, the end nodes
    stay), `monotone` (node loads non-decreasing, the default); for `piecewise_linear` only:
    `smoothing` (m or rad: the width over which each corner is rounded, at most the shortest
    phase); for `polynomial` only: `degree` (the number of coefficients, `M(x) = sum_k a_k
    x^k`, k = 1..degree; default 3).

    Options that do not apply to the kind (`APPLIES`), given other than their defaults,
    raise `ValueError` naming the kinds they apply to; so do bad values, and `nodes` given
    with `n_nodes`.
    """

    kind: str = "piecewise_linear"
    nodes: tuple[float, ...] | None = None
    n_nodes: int = 6
    free_breakpoints: bool = False
    smoothing: float = 0.0
    monotone: bool = True
    degree: int = 3

    def __post_init__(self):
        if self.kind not in LAW_KINDS:
            raise ValueError(f"law kind {self.kind!r}: expected one of {list(LAW_KINDS)}")
        if self.nodes is not None:
            nodes = np.asarray(self.nodes, dtype=float)
            if nodes.ndim != 1 or nodes.size < 2 or np.any(~(np.diff(nodes) > 0)):
                raise ValueError(f"nodes {np.atleast_1d(nodes).tolist()}: expected at least 2 "
                                 "increasing displacements")
            object.__setattr__(self, "nodes", tuple(float(v) for v in nodes))
        object.__setattr__(self, "n_nodes", _whole("n_nodes", self.n_nodes, 2))
        object.__setattr__(self, "degree", _whole("degree", self.degree, 1))
        smoothing = float(self.smoothing)
        if not (math.isfinite(smoothing) and smoothing >= 0):
            raise ValueError(f"smoothing {self.smoothing!r}: expected a distance >= 0")
        object.__setattr__(self, "smoothing", smoothing)
        for name in ("free_breakpoints", "monotone"):
            _flag(name, getattr(self, name))
        if self.nodes is not None and self.n_nodes != 6:
            raise ValueError(f"nodes {list(self.nodes)} and n_nodes {self.n_nodes}: give the "
                             "nodes or their number, not both")
        given = {"nodes": self.nodes is not None, "n_nodes": self.n_nodes != 6,
                 "free_breakpoints": self.free_breakpoints, "monotone": not self.monotone,
                 "smoothing": smoothing > 0, "degree": self.degree != 3}
        misplaced = [name for name, kinds in APPLIES.items()
                     if given[name] and self.kind not in kinds]
        if misplaced:
            raise ValueError(f"law kind {self.kind!r}: " + "; ".join(
                f"{name} applies to {' and '.join(APPLIES[name])} only" for name in misplaced))

    @property
    def table(self) -> bool:
        """Whether the law is a table of node loads."""
        return self.kind in TABLE_KINDS


@dataclasses.dataclass(frozen=True)
class LawDynamics:
    """What of a dynamic test the model of the load `L = M(x) + c x' + J x''` includes.

    **Fields:** `damping` (fit a damper `c >= 0` on the displacement's rate; needs the data's
    time), `inertia` (a known `J`, kg m^2 for rotations or kg for translations, when the loads
    are the applied ones of a dynamic test; default 0), `rate_window` (an odd number of
    samples: the rates by local quadratic fits over it, Savitzky and Golay; 1, the default,
    by second-order differences; only with a damper or an inertia). The default, no damper
    and no inertia, is a quasi-static test. Bad values raise `ValueError`."""

    damping: bool = False
    inertia: float = 0.0
    rate_window: int = 1

    def __post_init__(self):
        _flag("damping", self.damping)
        inertia = float(self.inertia)
        if not (math.isfinite(inertia) and inertia >= 0):
            raise ValueError(f"inertia {self.inertia!r}: expected a known inertia >= 0")
        object.__setattr__(self, "inertia", inertia)
        window = _whole("rate_window", self.rate_window, 1)
        if window % 2 == 0:
            raise ValueError(f"rate_window {window}: expected an odd number of samples")
        object.__setattr__(self, "rate_window", window)
        if window != 1 and not self.needs_rates:
            raise ValueError(f"rate_window {window}: the rates serve a damper or an inertia; "
                             "this model of the load has neither")

    @property
    def needs_rates(self) -> bool:
        """Whether the model needs the displacement's rates (a damper or an inertia)."""
        return bool(self.damping) or self.inertia > 0


def misplaced_option(name: str) -> ValueError | TypeError:
    """The error for an option `fit_load_law` no longer takes itself: where it belongs."""
    for owner in (LawForm, LawDynamics):
        if name in {field.name for field in dataclasses.fields(owner)}:
            argument = "law" if owner is LawForm else "dynamics"
            return ValueError(f"fit_load_law: {name} is an option of spineid.{owner.__name__}: "
                              f"fit_load_law(data, {argument}=spineid.{owner.__name__}(..., "
                              f"{name}=...))")
    return TypeError(f"fit_load_law() got an unexpected keyword argument {name!r}")
