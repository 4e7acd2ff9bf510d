"""The values of the command's options that the library does not parse itself: noise per
channel, marker lists, number lists and a misfit tolerance (docs/cli.md)."""

import math

import numpy as np

from ..identify._common._goodness import MAX_MISFIT


def parse_noise(text: str | None, option: str = "--noise") -> dict[str, float] | None:
    """`CH=SIGMA,...` -> `{channel: sigma}`; `None` for `None`. Raises `ValueError` naming
    `option`."""
    if text is None:
        return None
    noise = {}
    for item in text.split(","):
        channel, _, value = item.partition("=")
        if channel.strip() in noise:
            raise ValueError(f"{option} {text!r}: channel {channel.strip()!r} is given twice")
        try:
            noise[channel.strip()] = float(value)
        except ValueError:
            raise ValueError(
                f"{option} {text!r}: expected CHANNEL=SIGMA pairs separated by commas, e.g. "
                f"x=5e-6,y=5e-6,theta=1.7e-4"
            ) from None
        if not (math.isfinite(noise[channel.strip()]) and noise[channel.strip()] > 0):
            raise ValueError(f"{option} {text!r}: {channel.strip()}={value.strip()}: expected a "
                             "positive finite standard deviation (in the channel's unit)")
    return noise

def misfit_fraction(misfit, span: float | None = None) -> float:
    """`--max-misfit` (`(value, relative)` as the parser reads it, or `None`: `MAX_MISFIT`) as
    a fraction of the data's range: a percentage as it is, a value (SI) over `span`, the range
    of a fit's one channel; with several channels (`span` `None`) a percentage only."""
    value, relative = misfit or (MAX_MISFIT, True)
    if relative:
        return value
    if span is None:
        raise ValueError(f"--max-misfit {value:g}: give a percentage of each channel's range "
                         "(e.g. 3%): the channels have different units")
    return value / max(float(span), 1e-300)


def parse_markers(text: str | None) -> dict | None:
    """`--markers 'upper=A,B,C;lower=D,E,F'` -> `{"upper": [...], "lower": [...]}`; `None`
    for `None`."""
    if text is None:
        return None
    bodies = {}
    for part in (p.strip() for p in text.split(";") if p.strip()):
        body, equals, names = part.partition("=")
        names = [name.strip() for name in names.split(",") if name.strip()]
        if not equals or body.strip() not in ("upper", "lower") or len(names) < 3:
            raise ValueError(f"--markers: {part!r}: expected upper=A,B,C[;lower=D,E,F], at "
                             "least three markers per body")
        if body.strip() in bodies:
            raise ValueError(f"--markers: {body.strip()} given twice")
        bodies[body.strip()] = names
    if "upper" not in bodies:
        raise ValueError("--markers: the upper body's markers are needed (upper=A,B,C)")
    return bodies

def numbers_argument(text: str | None, what: str) -> np.ndarray | None:
    """Comma-separated numbers -> `(n,)`; `None` for `None`. Raises `ValueError` naming
    `what`."""
    if text is None:
        return None
    try:
        return np.array([float(v) for v in text.split(",")])
    except ValueError:
        raise ValueError(f"{what} {text!r}: expected comma-separated numbers") from None
