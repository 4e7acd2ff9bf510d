"""Values shown in a unit: the one formatter every summary uses for a number in the data's
units (a channel's noise, a misfit, a law's load noise), so that they all read alike."""

Shown = dict[str, tuple[str, float]]
"""Channel -> (its unit, the factor that takes an SI value to it): `{"x": ("mm", 1e3)}`."""


def in_unit(value: float, shown: tuple[str, float] | None = None) -> str:
    """`value` (SI) as text in `shown` (a unit and the factor from SI to it): `in_unit(0.012,
    ("mm", 1e3))` is `"12 mm"`; without `shown`, or with an empty unit name, the bare number
    (in SI, or scaled by the factor) to three significant digits."""
    unit, factor = shown or ("", 1.0)
    return f"{value * factor:.3g}" + (f" {unit}" if unit else "")


def noise_line(noise: dict, estimated: bool, channels: Shown | None = None) -> str:
    """The summaries' line of per-channel noise sigmas (`noise`: channel -> sigma, SI), e.g.
    `noise sigma (given): x=0.005 mm, theta=0.02 deg`: each channel of `channels` in its unit,
    the others bare (SI)."""
    channels = channels or {}
    return ("noise sigma " + ("(estimated from residuals)" if estimated else "(given)") + ": "
            + ", ".join(f"{c}={in_unit(sigma, channels.get(c))}" for c, sigma in noise.items()))
