"""The verdict of a fit, `GoodnessOfFit`: what `assess_fit` (`_goodness.py`, whose docstring
says how it is judged) found, written for a person (`summary`, in the data's units where they
are given) and for report.json (`to_dict`, SI)."""

import dataclasses
import math

from ._noise_model import ChannelNoise
from ._shown import in_unit, Shown, under_si


@dataclasses.dataclass(frozen=True)
class GoodnessOfFit:
    """Whether a fit explains its data (module docstring).

    Fields: `explains_data` (`True`, `False`, or `None` when no test is possible: noise
    estimated, samples without order, no plausible maximum); `noise_given`; `n_data`,
    `n_parameters` (the rank: identifiable directions absorbed by the fit), `dof`;
    `chi_square` (sum of squared noise-weighted residuals), `reduced_chi_square`, `p_value`
    (of the chi-square test, noise given; `None` otherwise); `aic`, `bic`; `whiteness`
    (channel -> `lag_one_autocorrelation`, `z`, `p_value`; `None` where the samples have no
    order); `noise_check` (channel -> `estimated`, `maximum`, `plausible`; noise estimated
    only); `alpha`; `reasons` (why it does not explain the data, in words) and `advice` (what
    to try); `units` (channel -> its SI unit, where known: how `summary` shows a channel whose
    data were SI).
    """

    explains_data: bool | None
    noise_given: bool
    n_data: int
    n_parameters: int
    dof: int
    chi_square: float
    reduced_chi_square: float
    p_value: float | None
    aic: float
    bic: float
    whiteness: dict | None
    noise_check: dict
    alpha: float
    reasons: tuple[str, ...]
    advice: tuple[str, ...]
    level: str | None = None
    misfit: dict = dataclasses.field(default_factory=dict)
    noise_model: dict = dataclasses.field(default_factory=dict)
    units: dict = dataclasses.field(default_factory=dict, compare=False)

    def shown(self, shown: Shown | None = None) -> Shown:
        """Each channel's unit and factor from SI (`Shown`): those of `shown` (the data's
        units), the others in their SI `units`."""
        return under_si(self.units, shown)

    @property
    def accepted(self) -> bool | None:
        """Whether the fit's values and errors are usable: it explains or describes its data
        (`level`); `None` when no test was possible."""
        return None if self.level is None else self.level in ("explains", "describes")

    def to_dict(self) -> dict:
        """JSON-ready: the fields, numbers as floats (`null` where not finite)."""

        def number(x):
            return float(x) if x is not None and math.isfinite(x) else None

        return {
            "explains_data": None if self.explains_data is None else bool(self.explains_data),
            "noise_given": bool(self.noise_given),
            "n_data": int(self.n_data), "n_parameters": int(self.n_parameters),
            "dof": int(self.dof), "chi_square": number(self.chi_square),
            "reduced_chi_square": number(self.reduced_chi_square),
            "p_value": number(self.p_value), "aic": number(self.aic), "bic": number(self.bic),
            "whiteness": None if self.whiteness is None else {
                channel: {key: number(value) for key, value in entry.items()}
                for channel, entry in self.whiteness.items()},
            "noise_check": {channel: {"estimated": number(entry["estimated"]),
                                      "maximum": number(entry["maximum"]),
                                      "plausible": bool(entry["plausible"])}
                            for channel, entry in self.noise_check.items()},
            "alpha": self.alpha,
            "level": self.level,
            "accepted": self.accepted,
            "misfit": {channel: {key: number(value) if isinstance(value, float) else value
                                 for key, value in entry.items()}
                       for channel, entry in self.misfit.items()},
            "noise_model": {channel: dict(entry) for channel, entry in self.noise_model.items()},
            "reasons": list(self.reasons),
            "advice": list(self.advice),
        }

    def summary(self, shown: Shown | None = None) -> str:
        """Plain-language lines: the verdict, the statistics behind it, and what to try. The
        noise models, the misfits' RMS and implausible noise of the channels in `shown` (channel
        -> unit and factor from SI, e.g. `{"x": ("mm", 1e3)}`) are printed in those units; the
        rest, and every channel by default, in SI (named where `units` knows it)."""
        shown = self.shown(shown)
        if self.noise_given:
            numbers = (f"chi-square {self.chi_square:.6g} for {self.dof} degrees of freedom "
                       f"(reduced {self.reduced_chi_square:.3g}, p = {self.p_value:.3g})")
        else:
            worst = (min(self.whiteness.values(), key=lambda e: e["p_value"])
                     if self.whiteness else None)
            numbers = ("noise estimated from the residuals; " + (
                f"smallest whiteness p = {worst['p_value']:.3g} (lag-one autocorrelation "
                f"{worst['lag_one_autocorrelation']:.2g})" if worst
                else "no sample order to test whiteness"))
        if self.level == "describes":
            verdict = ("the model describes the data with a systematic misfit within the "
                       "tolerance: the values and standard errors above are usable")
        elif self.level == "does_not_describe" and self.misfit:
            verdict = ("the model does NOT describe the data: the values and standard errors "
                       "above are not to be trusted")
        elif self.explains_data is None:
            verdict = ("cannot tell whether the model explains the data (noise estimated, "
                       "samples without order): give the noise to test it")
        elif self.explains_data:
            verdict = "the model explains the data"
        else:
            verdict = ("the model does NOT explain the data: the values and standard errors "
                       "above are not to be trusted")
        lines = [f"goodness of fit: {verdict}; {numbers}; AIC {self.aic:.6g}, "
                 f"BIC {self.bic:.6g}"]
        for channel, entry in self.noise_model.items():
            described = ChannelNoise.from_dict(entry).describe(shown.get(channel))
            lines.append(f"  noise model of {channel}: {described}")
        for channel, entry in self.misfit.items():
            rms = in_unit(entry["rms"], shown.get(channel))
            lines.append(
                f"  misfit of {channel}: smooth part RMS {rms} "
                f"({100 * entry['fraction_of_range']:.2g}% of the data's range, "
                f"{entry['in_noise_sd']:.2g} noise sd; tolerance "
                f"{100 * entry['max_fraction']:.2g}%), p = {entry['p_value']:.2g}")
        for channel, entry in self.noise_check.items():
            if not entry["plausible"]:
                lines.append(f"  noise of {channel}: estimated sd "
                             f"{in_unit(entry['estimated'], shown.get(channel))}, at most "
                             f"{in_unit(entry['maximum'], shown.get(channel))} plausible")
        lines += [f"  why: {reason}" for reason in self.reasons]
        lines += [f"  try: {advice}" for advice in self.advice]
        return "\n".join(lines)
