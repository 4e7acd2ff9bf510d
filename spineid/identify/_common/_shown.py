"""Values shown in a unit: the one formatter every summary uses for a number in the data's
units (a channel's noise, a misfit, a law's load noise), so that they all read alike."""

from ...io._columns import column_unit, UNITS

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


def data_channel_units(measurements, channels, si: bool = False) -> Shown:
    """Each of `channels` in the unit its `measurements` were read in (mm, deg, ...: where
    every file gave it in the same one) and the factor that takes an SI value to it
    (`{"x": ("mm", 1e3)}`); channels in SI, or files in different units, left out; none with
    `si`."""
    shown = {}
    for channel in channels:
        try:
            unit = None if si else column_unit(measurements, channel, "noise")
        except ValueError:  # (files in different units)
            unit = None
        if unit is not None:
            shown[channel] = (unit, 1.0 / UNITS[unit][1])
    return shown


def under_si(si_units: dict, shown: Shown | None = None) -> Shown:
    """The channels of `shown` (the data's units) with the others in their SI units
    (`si_units`: channel -> SI unit name, factor 1; channels without a unit name left out)."""
    return {**{channel: (unit, 1.0) for channel, unit in si_units.items() if unit},
            **(shown or {})}


def problem_channel_units(problem) -> Shown:
    """`data_channel_units` of a trajectory fit problem's records, its other channels in their
    SI units (the model's `observable_units`)."""
    return under_si(dict(zip(problem.channels, problem.models[0].observable_units)),
                    data_channel_units(problem.measurements, problem.channels))


def noise_values(problem, sigma) -> str:
    """`x=0.0049 mm, theta=0.011 deg`: a trajectory fit problem's noise `sigma` (`(c,)`, SI)
    in its channels' units (`problem_channel_units`)."""
    shown = problem_channel_units(problem)
    return ", ".join(f"{c}={in_unit(v, shown.get(c))}" for c, v in zip(problem.channels, sigma))
