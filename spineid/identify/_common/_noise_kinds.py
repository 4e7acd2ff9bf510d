"""The noise models a fit can be told to use, by object or by name (`spineid.AR`, `"auto"`,
`"white"`, `"ar:P"`, `"phi:..."`): what each means is in
`spineid.identify._common._noise_model`, which fits them."""

import dataclasses
from collections.abc import Sequence

import numpy as np

MAX_ORDER = 10
"""The largest autoregressive order `"auto"` considers (it chooses among 0 to this, and at most
a tenth of the shortest record: `chosen_order`). 10, not 5: noise low-pass filtered as motion
capture and testers filter it needs orders 4-10 for its low-frequency power, which the errors
of slowly varying parameters depend on (docs/goodness-of-fit.md: under such noise the
trajectory fits' errors went from 1.4-1.5 to 1.2-1.3 times too small, the stiffness matrices'
were calibrated); orders up to 20 gave the errors of up to 10 in the linearised trajectory
study (measured with BIC's orders, which went no higher than 13)."""

ORDER_LIMIT = 20
"""The largest order a model may be given."""


@dataclasses.dataclass(frozen=True)
class AbstractNoiseModel:
    """A noise model of a fit's channels (module docstring)."""

    @property
    def name(self) -> str:
        """The model as the command line writes it (`white`, `ar:2`, `auto`)."""
        raise NotImplementedError

    @property
    def shown(self) -> str:
        """The model as its user gave it, for messages: `name`, and an autocorrelation given
        (`acf:...`) beside the coefficients it became."""
        given = getattr(self, "given_as", None)
        return self.name if given is None else f"{given} ({self.name})"


@dataclasses.dataclass(frozen=True)
class White(AbstractNoiseModel):
    """Independent errors: ordinary (weighted) least squares."""

    @property
    def name(self) -> str:
        return "white"


@dataclasses.dataclass(frozen=True)
class AR(AbstractNoiseModel):
    """Autoregressive errors of order `order` (a whole number from 1 to `ORDER_LIMIT`), or of the
    order from 0 (white) to `max_order` that the residuals prefer when `order` is `None`
    (`"auto"`: white where the Bayesian information criterion says so, else the Akaike
    criterion's order, `chosen_order`); or of the `coefficients` given (a lab that knows
    its filter: its spectrum as an autoregression), `phi_1..phi_p` for every channel or
    `{channel: phi}` (a channel not named white), the innovations' deviation then the only
    noise parameter estimated. `coefficients` are stored as given for every channel, or as
    `(channel, phi)` pairs in name order."""

    order: int | None = None
    max_order: int = MAX_ORDER
    coefficients: tuple | dict | None = None
    # (The autocorrelation `acf:...` the coefficients were made from, for messages: `shown`.)
    given_as: str | None = dataclasses.field(default=None, compare=False, repr=False)

    def __post_init__(self):
        for name, value, low in (("order", self.order, 1), ("max_order", self.max_order, 1)):
            if value is None and name == "order":
                continue
            if (isinstance(value, bool) or not isinstance(value, (int, np.integer))
                    or not low <= value <= ORDER_LIMIT):
                raise ValueError(f"AR({name}={value!r}): expected a whole number from {low} to "
                                 f"{ORDER_LIMIT}")
        if self.coefficients is None:
            return
        if self.order is not None:
            raise ValueError("AR(order=..., coefficients=...): give the order or the "
                             "coefficients, not both")
        given = self.coefficients
        if isinstance(given, dict) or (isinstance(given, tuple) and given
                                       and isinstance(given[0], tuple)):
            pairs = dict(given)
            if not pairs or not all(isinstance(k, str) and k for k in pairs):
                raise ValueError(f"AR(coefficients={given!r}): expected phi_1..phi_p, or a "
                                 "dictionary of channel names to them")
            stored = tuple((name, checked_coefficients(pairs[name], f"AR coefficients of "
                                                       f"{name}")) for name in sorted(pairs))
        else:
            stored = checked_coefficients(given, "AR(coefficients)")
        object.__setattr__(self, "coefficients", stored)

    @classmethod
    def from_autocorrelation(cls, autocorrelation) -> "AR":
        """The noise model of a noise whose autocorrelation is known (a lab that has measured
        its instrument's noise at rest, or knows its filter): `rho_0..rho_q` at lags of 0 to
        `q` samples (any scale: an autocovariance serves too), for every channel or as
        `{channel: rho}`, becomes the autoregression of order `q` with the same
        autocorrelations (`autoregression_of`: the Yule-Walker equations, by Levinson-Durbin
        recursion), given as its coefficients. Exact for an AR(q) noise; for another stationary
        noise (a low-pass filter's output) the AR(q) that matches its first `q` lags."""
        if isinstance(autocorrelation, dict):
            return cls(coefficients={name: autoregression_of(rho, f"autocorrelation of {name}")
                                     for name, rho in autocorrelation.items()})
        return cls(coefficients=autoregression_of(autocorrelation))

    @property
    def per_channel(self) -> bool:
        """Whether the coefficients given name their channels."""
        return bool(self.coefficients) and isinstance(self.coefficients[0], tuple)

    @property
    def fixed(self) -> bool:
        """Whether the order or the coefficients are given (not chosen by the residuals)."""
        return self.order is not None or self.coefficients is not None

    @property
    def highest(self) -> int:
        """The highest order the model fits or is given (`max_order` for `"auto"`)."""
        if self.coefficients is None:
            return self.max_order if self.order is None else self.order
        if self.per_channel:
            return max(len(phi) for _, phi in self.coefficients)
        return len(self.coefficients)

    def given(self, channel: str | None = None) -> tuple[float, ...] | None:
        """The coefficients given for `channel` (`()`: white, a channel not named), or `None`
        where they are estimated."""
        if self.coefficients is None:
            return None
        if not self.per_channel:
            return self.coefficients
        return dict(self.coefficients).get(channel, ())

    def check_channels(self, channels: Sequence[str], what: str) -> None:
        """Refuse coefficients given for a channel not among `channels` (`what` names the
        option)."""
        named = dict(self.coefficients) if self.per_channel else {}
        unknown = [name for name in named if name not in channels]
        if unknown:
            raise ValueError(f"{what} {self.shown}: the data have no channel {unknown[0]!r}; "
                             f"the channels are {', '.join(channels)}")

    @property
    def name(self) -> str:
        if self.coefficients is not None:
            def numbers(phi):
                return ",".join(f"{c:.6g}" for c in phi)
            if self.per_channel:
                return "phi:" + ";".join(f"{name}={numbers(phi)}"
                                         for name, phi in self.coefficients)
            return "phi:" + numbers(self.coefficients)
        return "auto" if self.order is None else f"ar:{self.order}"


NOISE_MODEL_NAMES = ("auto", "white", "ar:P", "phi:PHI,...", "phi:CH=PHI,...;...",
                     "acf:RHO,...", "acf:CH=RHO,...;...")
"""How the command line and model files name a noise model (`P` an order from 1 to 20; `PHI`
the coefficients given, for every channel or per channel `CH`; `RHO` the noise's
autocorrelation at lags 0, 1, ..., turned into the coefficients)."""


def as_noise_model(spec) -> AbstractNoiseModel:
    """The noise model `spec` names: a model object, `None` or `"auto"` (`AR()`), `"white"`,
    `"ar:P"`, or coefficients given, `"phi:0.6,-0.1"` (every channel) or
    `"phi:theta=0.8;x=0.6,-0.1"` (per channel), or the noise's autocorrelation given,
    `"acf:1,0.6,0.36"` or `"acf:x=1,0.6;theta=1,0.8"` (`AR.from_autocorrelation`). Raises
    `ValueError` with one sentence otherwise."""
    if isinstance(spec, AbstractNoiseModel):
        return spec
    if spec is None or spec == "auto":
        return AR()
    if spec == "white":
        return White()
    if isinstance(spec, str) and spec.startswith("ar:"):
        try:
            return AR(int(spec[3:]))
        except ValueError:
            pass
    if isinstance(spec, str) and spec.startswith("acf:"):
        try:
            return dataclasses.replace(AR.from_autocorrelation(
                _parsed_coefficients("phi:" + spec[4:])), given_as=spec)
        except ValueError as error:
            raise ValueError(f"noise model {spec!r}: " + str(error).split(": ", 1)[-1].replace(
                "phi:", "acf:").replace("PHI", "RHO").replace("coefficients", "values")
            ) from None
    if isinstance(spec, str) and spec.startswith("phi:"):
        try:
            return AR(coefficients=_parsed_coefficients(spec))
        except ValueError as error:
            if str(error).startswith("noise model"):
                raise
            raise ValueError(f"noise model {spec!r}: {error}") from None
    raise ValueError(f"noise model {spec!r}: expected auto, white, ar:P (P a whole number "
                     f"from 1 to {ORDER_LIMIT}), phi:PHI,... (the coefficients given) or "
                     "acf:RHO0,RHO1,... (the noise's autocorrelation given)")


def _parsed_coefficients(spec: str):
    # "phi:0.6,-0.1" -> (0.6, -0.1); "phi:theta=0.8;x=0.6,-0.1" -> {"theta": (0.8,), ...}.
    def numbers(text):
        try:
            return tuple(float(v) for v in text.split(","))
        except ValueError:
            raise ValueError(f"noise model {spec!r}: expected comma-separated coefficients "
                             "after phi: (or CH=PHI,... per channel, channels separated by ;)"
                             ) from None

    body = spec[4:].strip()
    if "=" not in body:
        return numbers(body)
    pairs = {}
    for part in body.split(";"):
        name, _, values = part.partition("=")
        if not name.strip() or name.strip() in pairs:
            raise ValueError(f"noise model {spec!r}: each channel once, as CH=PHI,...")
        pairs[name.strip()] = numbers(values)
    return pairs


def autoregression_of(autocorrelation, what: str = "autocorrelation") -> tuple[float, ...]:
    """`phi_1..phi_q` of the stationary autoregression whose autocorrelations at lags `0..q`
    are `autocorrelation` (`(q + 1,)`, `q` from 1 to `ORDER_LIMIT`; divided by its lag-0 value,
    so an autocovariance serves): the Yule-Walker equations `sum_j phi_j rho_|k-j| = rho_k`
    solved by Levinson-Durbin recursion (each reflection coefficient within (-1, 1) for a
    positive-definite sequence). `ValueError` naming `what` for a sequence that is not one."""
    try:
        rho = np.atleast_1d(np.asarray(autocorrelation, dtype=float))
    except (TypeError, ValueError):
        rho = np.array([np.nan])
    if (rho.ndim != 1 or not 2 <= rho.size <= ORDER_LIMIT + 1 or not np.all(np.isfinite(rho))
            or not rho[0] > 0):
        raise ValueError(f"{what} = {autocorrelation!r}: expected 2 to {ORDER_LIMIT + 1} finite "
                         "values at lags 0, 1, ..., the first (lag 0) positive")
    rho = rho / rho[0]
    phi, error = np.zeros(0), 1.0
    for k in range(1, rho.size):
        reflection = (rho[k] - phi @ rho[k - 1:0:-1]) / error
        if not abs(reflection) < 1.0:
            raise ValueError(f"{what} = {autocorrelation!r}: not the autocorrelation of a "
                             "stationary noise (its Toeplitz matrix is not positive definite)")
        phi = np.r_[phi - reflection * phi[::-1], reflection]
        error *= 1.0 - reflection ** 2
    return checked_coefficients(phi, what)


def checked_coefficients(coefficients, what: str) -> tuple[float, ...]:
    """Autoregressive `coefficients` `phi_1..phi_p` given by a user (a number or a sequence of
    1 to `ORDER_LIMIT` finite numbers) of a stationary process (every root of
    `1 - sum_k phi_k z^k` outside the unit circle), without trailing zeros (an order is its
    last nonzero coefficient, as the compiled whitening reads it: `autoregressive_orders`);
    `ValueError` naming `what` otherwise."""
    try:
        if isinstance(coefficients, (str, bytes, dict, bool)) or any(
                isinstance(c, bool) for c in np.atleast_1d(np.asarray(coefficients, object))):
            raise TypeError
        phi = np.atleast_1d(np.asarray(coefficients, dtype=float))
    except (TypeError, ValueError):
        phi = np.array([np.nan])
    if phi.ndim != 1 or not 1 <= phi.size <= ORDER_LIMIT or not np.all(np.isfinite(phi)):
        raise ValueError(f"{what} = {coefficients!r}: expected 1 to {ORDER_LIMIT} finite "
                         "autoregressive coefficients phi_1..phi_p")
    roots = np.roots(np.r_[-phi[::-1], 1.0])
    if np.any(np.abs(roots) <= 1.0 + 1e-9):
        raise ValueError(f"{what} = {coefficients!r}: not a stationary autoregression (a root "
                         "of 1 - sum phi_k z^k lies on or inside the unit circle; an AR(1) "
                         "needs -1 < phi < 1)")
    nonzero = np.flatnonzero(phi)
    return tuple(float(c) for c in phi[:nonzero[-1] + 1 if nonzero.size else 1])
