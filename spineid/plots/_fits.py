"""Pictures of fits: data against the fitted model, residuals in units of the noise, what the
data identify, stiffness-matrix fits and load-law fits.
"""

import math
import pathlib

import equinox as eqx
import matplotlib.pyplot as plt
import numpy as np

from ..identify._common._goodness import smoothing_width
from ..identify._kinds._stiffness_fit import AXES, generalized_loads
from ..io._measurements import LOAD_COLUMNS
from ._common import _save


_CHANNEL_DISPLAY = {"x": ("mm", 1e3), "y": ("mm", 1e3), "theta": ("deg", float(np.degrees(1.0)))}


def plot_fit(result, channels: tuple[str, ...], path: str | pathlib.Path) -> pathlib.Path:
    """Measured data (dots) against the fitted model (lines), one panel per channel, per load case.

    **Arguments:** a `FitResult`, the channel names, the PNG path.
    """
    figure, axes = plt.subplots(len(channels), 1, figsize=(8, 2.4 * len(channels)), sharex=True,
                                squeeze=False)
    for case, (measurement, predicted) in enumerate(zip(result.measurements, result.predictions)):
        for c, channel in enumerate(channels):
            unit, scale = _CHANNEL_DISPLAY.get(channel, ("SI", 1.0))
            axis = axes[c, 0]
            axis.plot(measurement.ts, measurement.values[:, c] * scale, ".", ms=2.5, alpha=0.5,
                      color=f"C{case}", label=_data_label(measurement, case) if c == 0 else None)
            axis.plot(measurement.ts, predicted[:, c] * scale, "-", lw=1.2, color="k",
                      label="fit" if c == 0 and case == 0 else None)
            axis.set_ylabel(f"{channel} [{unit}]")
            axis.grid(alpha=0.3)
    axes[0, 0].legend(loc="upper right", fontsize="small")
    axes[-1, 0].set_xlabel("t [s]")
    figure.suptitle(f"Data and fit (cost {result.cost:.4g}, {result.solver})")
    return _save(figure, path, margins=dict(left=0.85, right=0.2, bottom=0.55, top=0.5,
                                            hspace=0.12))


def _data_label(measurement, case: int) -> str:
    # The legend entry of a record: its file's name, or its place where it has none.
    source = getattr(measurement, "source", "<data>")
    return f"data {case + 1}" if source.startswith("<") else pathlib.Path(source).name


def plot_residuals(result, channels: tuple[str, ...], path: str | pathlib.Path) -> pathlib.Path:
    """Noise-normalised residuals against time and their histogram against N(0, 1), per channel.

    Structure over time or a histogram wider than the normal curve means the model misses
    something or the noise level is wrong. Values not measured (NaN) are left out.
    """
    figure, axes = plt.subplots(len(channels), 2, figsize=(10, 2.4 * len(channels)),
                                gridspec_kw={"width_ratios": [3, 1]}, squeeze=False)
    grid = np.linspace(-4, 4, 200)
    for c, channel in enumerate(channels):
        sigma = result.noise[channel]
        pooled = []
        for case, (measurement, residual) in enumerate(zip(result.measurements, result.residuals())):
            normalised = residual[:, c] / sigma
            pooled.append(normalised)
            axes[c, 0].plot(measurement.ts, normalised, ".", ms=2.5, color=f"C{case}")
            # The smooth part the verdict measures (a centred moving average: `misfit`).
            width = smoothing_width(normalised.size)
            if normalised.size >= width and np.all(np.isfinite(normalised)):
                smooth = np.convolve(normalised, np.ones(width) / width, mode="valid")
                axes[c, 0].plot(measurement.ts[width // 2: width // 2 + smooth.size], smooth,
                                lw=1.4, color="tab:red",
                                label="smooth part" if case == 0 else None)
        axes[c, 0].axhline(0.0, color="k", lw=0.8)
        axes[c, 0].set_ylabel(f"{channel} residual / sigma")
        axes[c, 0].grid(alpha=0.3)
        pooled = np.concatenate(pooled)
        pooled = pooled[np.isfinite(pooled)]  # (NaN: values not measured)
        if pooled.size:
            # (One filled outline: `hist` would draw 40 bars, each an artist of its own.)
            density, edges = np.histogram(pooled, bins=40, density=True)
            axes[c, 1].stairs(density, edges, fill=True, color="C0", alpha=0.6)
        axes[c, 1].plot(grid, np.exp(-grid**2 / 2) / np.sqrt(2 * np.pi), "k-", lw=1)
        axes[c, 1].set_xlim(-5, 5)
        axes[c, 1].set_ylabel("density")
    axes[-1, 1].set_xlabel("residual / sigma (line: N(0, 1))")
    axes[-1, 0].set_xlabel("t [s]")
    if axes[0, 0].get_legend_handles_labels()[0]:
        axes[0, 0].legend(loc="upper right", fontsize="small")
    figure.suptitle("Residuals (data - fit) in units of the noise" + _verdict_words(result))
    return _save(figure, path, margins=dict(left=0.85, right=0.3, bottom=0.55, top=0.75,
                                            hspace=0.3, wspace=0.25))


def _verdict_words(result) -> str:
    # The verdict of a fit for a figure's title: its level, with the noise given the
    # chi-square's p-value, and the largest smooth misfit.
    fit = getattr(result, "goodness_of_fit", None)
    if fit is None or fit.level is None:
        return ""
    words = {"explains": "explains the data", "describes": "describes the data",
             "does_not_describe": "does NOT describe the data"}[fit.level]
    if fit.noise_given and fit.p_value is not None:
        words += f" (chi-square p = {fit.p_value:.3g})"
    if fit.misfit:
        words += (", smooth misfit up to "
                  f"{100 * max(e['fraction_of_range'] for e in fit.misfit.values()):.2g}% of "
                  "the range")
    return f"\n{words}"


def plot_identifiability(result, path: str | pathlib.Path) -> pathlib.Path:
    """The singular values of the scaled, noise-weighted sensitivity matrix (left) and the
    parameter coefficients of the identifiable combinations (right)."""
    ident = result.identifiability
    figure, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    singular = np.asarray(ident.singular_values)
    colours = ["tab:blue" if k < ident.rank else "tab:gray" for k in range(len(singular))]
    left.bar(np.arange(1, len(singular) + 1), np.maximum(singular, 1e-300), color=colours)
    left.set_yscale("log")
    left.set_xticks(np.arange(1, len(singular) + 1))
    left.set_xlabel("direction k")
    left.set_ylabel("singular value s_k")
    left.set_title(f"rank {ident.rank} of {ident.n_parameters} (grey: not identifiable)")
    left.grid(alpha=0.3)
    if ident.combinations:
        # (on relative changes: parameters of different units compare, every one a column)
        # (a combination without its relative form, as stored by earlier versions: SI)
        matrix = np.array([[comb.get("relative", comb)["coefficients"].get(name, 0.0)
                            for name in result.names] for comb in ident.combinations])
        limit = np.max(np.abs(matrix))
        image = right.imshow(matrix, cmap="RdBu_r", vmin=-limit, vmax=limit, aspect="auto")
        right.set_yticks(range(len(matrix)), [f"comb. {k + 1}" for k in range(len(matrix))])
        right.set_xticks(range(len(result.names)), result.names, rotation=70, fontsize=7)
        relative = all("relative" in comb for comb in ident.combinations)
        figure.colorbar(image, ax=right, label="coefficient on the relative change"
                        if relative else "coefficient (SI)")
    right.set_title("identifiable combinations")
    # Fixed margins (no `tight_layout`, which measures every label by drawing the figure
    # once more): the bottom one holds the longest parameter name, rotated 70 degrees at 7
    # points (at most about 0.62 of the font size per character), the right one the colour
    # bar's label.
    longest = max((len(name) for name in result.names), default=0) if ident.combinations else 0
    bottom = max(0.6, 0.3 + longest * 0.62 * 7 / 72 * np.sin(np.radians(70)))
    figure.set_size_inches(11, 3.4 + bottom)
    return _save(figure, path, margins=dict(left=0.8, right=0.75, bottom=bottom, top=0.4,
                                            wspace=0.3))


def plot_stiffness_fit(fit, test, path: str | pathlib.Path) -> pathlib.Path:
    """Quasi-static test: measured against fitted generalized load per component (points on
    the diagonal fit), and the fitted matrix as an image."""
    figure, axes = plt.subplots(2, 4, figsize=(15, 6.5))
    measured = generalized_loads(test, fit.exact)
    for k, axis in enumerate(axes.ravel()[:6]):
        unit = "N" if k < 3 else "N m"
        low, high = measured[:, k].min(), measured[:, k].max()
        axis.plot([low, high], [low, high], color="gray", lw=1)
        axis.plot(fit.predicted[:, k], measured[:, k], ".", ms=4)
        rms = np.sqrt(np.mean(fit.residuals[:, k] ** 2))
        axis.set_title(f"{LOAD_COLUMNS[k]}: rms misfit {rms:.3g} {unit}", fontsize=9)
        axis.set_xlabel(f"fitted K y [{unit}]")
        axis.set_ylabel(f"measured [{unit}]")
    image = axes[1, 2]
    magnitude = np.log10(np.abs(fit.matrix) + 1e-300)
    shown = image.imshow(np.where(fit.matrix != 0, magnitude, np.nan), cmap="viridis")
    image.set_xticks(range(6), AXES)
    image.set_yticks(range(6), AXES)
    image.set_title("log10 |K| (blank: zero)")
    figure.colorbar(shown, ax=image, fraction=0.046)
    axes[1, 3].axis("off")
    axes[1, 3].text(0.0, 0.5, fit.summary().splitlines()[0], fontsize=8, wrap=True,
                    va="center")
    figure.suptitle(f"stiffness matrix fit ({fit.structure}): measured vs fitted loads")
    figure.tight_layout()
    return _save(figure, path)


@eqx.filter_jit
def _compiled_load(law, x):
    # A law's loads at the displacements `x`, compiled once per law layout: evaluated op by op
    # the law compiles every operation again for each new shape (a batch of plots).
    return law.load(x)


def plot_law_fit(fit, data, path: str | pathlib.Path, unit: str | None = None) -> pathlib.Path:
    """A `LawFit` against its data: the measured loads and the fitted law (with its nodes) over
    the displacement, the fitted load including the damper, and the residuals. The axes are in
    the units the data came in (`data.read_as`: the columns' units, e.g. mm and N), or the
    displacement in `unit` (`"deg"` or `"mm"`) where given; data without units read are drawn
    in SI (m or rad, N or N m)."""
    read_as = getattr(data, "read_as", None) or {}
    column = read_as.get("displacement", {})
    if unit is not None:
        scale = np.degrees(1.0) if unit == "deg" else 1e3
    elif column.get("factor"):
        unit, scale = column["unit"], 1.0 / float(column["factor"])
    else:
        unit, scale = "SI: m or rad", 1.0
    loads = read_as.get("load", {})
    load_unit, load_scale = ((loads["unit"], 1.0 / float(loads["factor"])) if loads.get("factor")
                             else ("SI: N or N m", 1.0))
    figure, (load_axis, residual_axis) = plt.subplots(
        2, 1, figsize=(7, 7), sharex=True, gridspec_kw={"height_ratios": [3, 1]})
    x = np.asarray(data.displacement)
    load_axis.plot(x * scale, np.asarray(data.load) * load_scale, ".", ms=3, color="0.5",
                   label="data")
    if fit.damping:
        load_axis.plot(x * scale, np.asarray(fit.predicted) * load_scale, lw=1.0,
                       color="tab:green",
                       label=f"fit with damper c = {fit.damping:.3g}")
    grid = np.linspace(x.min(), x.max(), 600)
    nodes = np.asarray(getattr(fit.law, "displacement", np.zeros(0)))
    loads_fitted = np.asarray(_compiled_load(fit.law, np.concatenate([grid, nodes])))
    load_axis.plot(grid * scale, loads_fitted[:grid.size] * load_scale, lw=1.8,
                   color="tab:blue", label=f"fitted {fit.kind} law")
    if nodes.size:
        load_axis.plot(nodes * scale, loads_fitted[grid.size:] * load_scale, "o",
                       color="tab:blue", ms=5, label="nodes")
    # (data - fit, as every residual figure: `LawFit.residuals` are fit - data)
    residual_axis.plot(x * scale, -np.asarray(fit.residuals) * load_scale, ".", ms=3,
                       label="data - fit")
    residual_axis.axhline(0.0, color="k", lw=0.5)
    # The smooth part of the residuals that the verdict measures (GoodnessOfFit.misfit), in
    # the samples' order, and the verdict itself.
    order = (np.arange(x.size) if getattr(data, "time", None) is not None
             else np.argsort(x, kind="stable"))
    width = smoothing_width(x.size)
    if x.size >= 2 * width:
        smooth = np.convolve(-np.asarray(fit.residuals)[order] * load_scale,
                             np.ones(width) / width, mode="valid")
        middle = order[width // 2: width // 2 + smooth.size]
        misfit = fit.goodness_of_fit.misfit.get("load")
        residual_axis.plot(x[middle] * scale, smooth, lw=1.5, color="tab:red",
                           label="smooth part" + (
                               f" (RMS {100 * misfit['fraction_of_range']:.2g}% of the range)"
                               if misfit else ""))
        residual_axis.legend(fontsize="small", loc="upper right")
    level = fit.goodness_of_fit.level
    if level is not None:
        residual_axis.set_title({"explains": "the law explains the data",
                                 "describes": "the law describes the data (systematic misfit "
                                              "within the tolerance)",
                                 "does_not_describe": "the law does NOT describe the data"
                                 }[level], fontsize=9)
    load_axis.set_ylabel(f"load [{load_unit}]")
    residual_axis.set_ylabel(f"data - fit [{load_unit}]")
    residual_axis.set_xlabel(f"displacement [{unit}]")
    load_axis.legend(fontsize="small")
    for axis in (load_axis, residual_axis):
        axis.grid(alpha=0.3)
    return _save(figure, path)


def plot_profile(profile, path: str | pathlib.Path | None = None):
    """A parameter's profile likelihood: `2 (PL - cost_min)` at the profile points, the
    Cramer-Rao parabola `((v - value) / stderr)^2` for comparison, the threshold of the
    confidence level and the interval (a `Profile` of `FitResult.profile` or
    `LawFit.profile`). Where the two curves part, the linear (Cramer-Rao) interval is not to be
    trusted. Returns the PNG path, or the figure without a path."""
    figure, axis = plt.subplots(figsize=(6.5, 4))
    order = np.argsort(profile.points)
    points, delta = profile.points[order], profile.delta[order]
    axis.plot(points, delta, "o-", color="C0", ms=4, label="profile (others refitted)")
    if np.isfinite(profile.stderr) and profile.stderr > 0:
        grid = np.linspace(points.min(), points.max(), 200)
        axis.plot(grid, ((grid - profile.value) / profile.stderr) ** 2, "--", color="C1",
                  label="Cramer-Rao (linearised)")
    axis.axhline(profile.threshold, color="k", lw=0.8,
                 label=f"{profile.level:.0%} threshold ({profile.threshold:.2f})")
    for end in profile.interval:
        if np.isfinite(end):
            axis.axvline(end, color="C0", lw=0.8, ls=":")
    axis.set_xlabel(f"{profile.name} [{profile.unit}]")
    axis.set_ylabel("2 (profile cost - best cost)")
    axis.set_ylim(bottom=0.0, top=max(2.5 * profile.threshold, float(np.min(delta[-1:]))))
    axis.grid(alpha=0.3)
    axis.legend(fontsize="small")
    lower, upper = profile.interval
    axis.set_title(f"{profile.name}: [{lower:.4g}, {upper:.4g}] {profile.unit}", fontsize=10)
    return _save(figure, path)


def plot_population(rows, path: str | pathlib.Path, title: str = "population"
                    ) -> pathlib.Path:
    """Each fitted parameter across the files of a batch (`summary.csv`'s rows: dicts with a
    `group`, a `status` and, per parameter, its value and `<name> stderr`): one panel per
    parameter (in the data's units alone where every file's column `<name> (<unit>)` gives
    them in the same unit), a point per file with its standard error, the files side by side
    by group and the group's median (of the accepted files) marked; files whose result was
    not accepted (`status` "not accepted") drawn hollow, those whose model describes its data
    with a systematic misfit (`level` "describes") as squares. Files that failed are left out
    (and counted in the title)."""
    accepted = [row for row in rows if row.get("status") != "failed"]
    names = [name for name in (accepted[0] if accepted else {})
             if f"{name} stderr" in accepted[0]]
    for row in accepted[1:]:
        names += [name for name in row if f"{name} stderr" in row and name not in names]
    # A parameter given also in the data's units (`name (N/mm)`) is drawn in those alone,
    # where every file has it in the same ones (else in SI too: files in SI or in other units).
    def in_one_lab_unit(name):
        twins = [other for other in names if other.startswith(f"{name} (")
                 and other.endswith(")")]
        return len(twins) == 1 and all(isinstance(row.get(twins[0]), (int, float))
                                       for row in accepted
                                       if isinstance(row.get(name), (int, float)))

    names = [name for name in names if not in_one_lab_unit(name)]
    groups = sorted({row.get("group", "") for row in accepted})
    columns = min(3, max(len(names), 1))
    lines = max(1, math.ceil(len(names) / columns))
    figure, axes = plt.subplots(lines, columns, figsize=(4.2 * columns, 3.0 * lines),
                                squeeze=False)
    for axis in axes.ravel()[len(names):]:
        axis.axis("off")
    if not names:
        axes[0, 0].text(0.5, 0.5, "no file gave a result", ha="center", va="center")
    for axis, name in zip(axes.ravel(), names):
        for g, group in enumerate(groups):
            members = [row for row in accepted if row.get("group", "") == group
                       and isinstance(row.get(name), (int, float))]
            values = np.array([float(row[name]) for row in members])
            errors = np.array([float(row[f"{name} stderr"])
                               if isinstance(row.get(f"{name} stderr"), (int, float)) else np.nan
                               for row in members])
            if not values.size:
                continue
            ok = np.array([row.get("status") == "ok" for row in members])
            described = np.array([row.get("level") == "describes" for row in members])
            spread = np.linspace(-0.2, 0.2, values.size) if values.size > 1 else np.zeros(1)
            for chosen, face, marker in ((ok & ~described, f"C{g}", "o"),
                                         (ok & described, f"C{g}", "s"), (~ok, "none", "o")):
                if chosen.any():
                    axis.errorbar((g + spread)[chosen], values[chosen],
                                  yerr=np.where(np.isfinite(errors), errors, 0.0)[chosen],
                                  fmt=marker, ms=4, color=f"C{g}", mfc=face, capsize=2, lw=0.8)
            if ok.any():
                axis.hlines(np.median(values[ok]), g - 0.3, g + 0.3, color="k", lw=1.5)
        axis.set_xticks(range(len(groups)), [group or "all" for group in groups])
        axis.set_title(name, fontsize=9)
        axis.grid(alpha=0.3)
    failed = len(rows) - len(accepted)
    figure.suptitle(f"{title}" + (f" ({failed} failed, not shown)" if failed else "")
                    + "\nbars: standard errors, lines: group medians, squares: described "
                    "with a systematic misfit, hollow: not accepted",
                    fontsize=10)
    return _save(figure, path)


def plot_posterior(posterior, path: str | pathlib.Path | None = None, reference=None):
    """Posterior draws (`spineid.posterior`'s `Posterior`) as a corner plot: each parameter's
    marginal histogram on the diagonal, every pair's draws below it, in SI units. With
    `reference` (a `FitResult` or anything with `values` and `stderr`), the Cramer-Rao normal
    density over each marginal and its 2-sigma ellipse over each pair, for comparison: where
    they part, the linearised interval is not to be trusted. Returns the PNG path, or the
    figure without a path."""
    draws, names = np.asarray(posterior.draws), list(posterior.names)
    p = len(names)
    figure, axes = plt.subplots(p, p, figsize=(2.6 * p + 1, 2.6 * p + 0.5), squeeze=False)
    values = None if reference is None else np.asarray(reference.values)
    errors = None if reference is None else np.asarray(reference.stderr)
    for i in range(p):
        for j in range(p):
            axis = axes[i, j]
            if j > i:
                axis.set_visible(False)
                continue
            if i == j:
                axis.hist(draws[:, i], bins=40, density=True, color="C0", alpha=0.6)
                if values is not None and np.isfinite(errors[i]) and errors[i] > 0:
                    grid = np.linspace(*axis.get_xlim(), 200)
                    axis.plot(grid, np.exp(-0.5 * ((grid - values[i]) / errors[i]) ** 2)
                              / (errors[i] * np.sqrt(2 * np.pi)), color="C1",
                              label="Cramer-Rao")
                axis.set_yticks([])
            else:
                axis.plot(draws[:, j], draws[:, i], ".", ms=1.5, color="C0", alpha=0.4)
                if values is not None and np.all(np.isfinite(errors[[i, j]])):
                    angle = np.linspace(0, 2 * np.pi, 100)
                    axis.plot(values[j] + 2 * errors[j] * np.cos(angle),
                              values[i] + 2 * errors[i] * np.sin(angle), color="C1", lw=0.8)
            if i == p - 1:
                axis.set_xlabel(names[j], fontsize=8)
            if j == 0 and i > 0:
                axis.set_ylabel(names[i], fontsize=8)
            axis.tick_params(labelsize=7)
    if values is not None:
        axes[0, 0].legend(fontsize="x-small")
    figure.suptitle(f"posterior ({len(draws)} draws; orange: Cramer-Rao, axes-aligned 2 sigma)",
                    fontsize=10)
    return _save(figure, path)


def plot_traces(posterior, path: str | pathlib.Path | None = None):
    """The chains of a `Posterior` (`spineid.posterior`), one row per parameter: each chain's
    draws in order (left) and its marginal histogram (right), in SI units, with the
    parameter's R-hat and bulk effective draws in the title: chains that agree overlap and
    look like noise about one level; a chain apart, a drift or a slow wander shows. Returns
    the PNG path, or the figure without a path."""
    chains, names = np.asarray(posterior.chain_draws), list(posterior.names)
    p = len(names)
    figure, axes = plt.subplots(p, 2, figsize=(10, 1.9 * p + 0.8), squeeze=False,
                                gridspec_kw={"width_ratios": [3, 1]})
    for j, name in enumerate(names):
        edges = np.histogram_bin_edges(chains[:, :, j], bins=30)
        for c, chain in enumerate(chains[:, :, j]):
            axes[j, 0].plot(chain, lw=0.6, color=f"C{c % 10}", alpha=0.8, label=f"chain {c + 1}")
            axes[j, 1].hist(chain, bins=edges, histtype="step", color=f"C{c % 10}",
                            density=True)
        r_hat = np.nan if posterior.r_hat is None else posterior.r_hat[j]
        axes[j, 0].set_title(f"{name}: R-hat {r_hat:.3f}, bulk ESS "
                             f"{posterior.effective_samples[j]:.0f}", fontsize=8)
        axes[j, 0].set_ylabel("value (SI)", fontsize=7)
        axes[j, 1].set_yticks([])
        for axis in axes[j]:
            axis.tick_params(labelsize=7)
    axes[-1, 0].set_xlabel("draw")
    axes[-1, 1].set_xlabel("value (SI)")
    if len(chains) > 1:
        axes[0, 0].legend(fontsize="x-small", ncol=min(len(chains), 4))
    figure.suptitle(f"{len(chains)} chain(s) of {chains.shape[1]} draws", fontsize=10)
    return _save(figure, path)


def plot_design(design, path: str | pathlib.Path | None = None, validation=None):
    """A `Design` (`spineid.design`) as bars: each free parameter's predicted relative standard
    error (log scale) with the chosen experiments and, where a baseline was given, with it;
    parameters not identifiable drawn at the top with a cross. With `validation`
    (`spineid.validate_design`'s), the realised errors of its noisy fits beside the predicted.
    Returns the PNG path, or the figure without a path."""
    bars = [("design: " + " + ".join(design.chosen), design.stderr)]
    if design.baseline:
        bars.insert(0, ("baseline: " + " + ".join(design.baseline), design.baseline_stderr))
    criterion = design.criterion if isinstance(design.criterion, str) else "named errors"
    return _error_bars(design.names, design.values, bars + _realised(validation),
                       f"{criterion}-optimal design (x: not identifiable)", path)


def plot_protocol(protocol, path: str | pathlib.Path | None = None, validation=None):
    """A `Protocol` (`spineid.optimise_protocol`) as bars, as `plot_design`: each free
    parameter's predicted relative standard error under the start and under the optimal
    protocol (and, with `validation`, the realised errors of its noisy fits). Returns the PNG
    path, or the figure without a path."""
    def shown(values):
        return ", ".join(f"{k} {v:.3g}" for k, v in values.items())

    criterion = protocol.criterion if isinstance(protocol.criterion, str) else "named errors"
    return _error_bars(protocol.names, protocol.values,
                       [("start: " + shown(protocol.start), protocol.start_stderr),
                        ("optimum: " + shown(protocol.variables), protocol.stderr)]
                       + _realised(validation),
                       f"{criterion}-optimal protocol (x: not identifiable)", path)


def _realised(validation) -> list:
    # The bar of a design's validation: the spread of its noisy fits' estimates.
    if validation is None:
        return []
    return [(f"realised: {validation.fitted} noisy fits ({np.nanmin(validation.ratio):.2f}-"
             f"{np.nanmax(validation.ratio):.2f} x predicted)", validation.realised)]


def _error_bars(names, values, bars, title, path):
    # Relative predicted standard errors, one group of bars per parameter (log scale); NaN
    # (not identifiable) drawn at the top with a cross.
    names = list(names)
    relative = [np.abs(np.asarray(stderr) / values) for _, stderr in bars]
    figure, axis = plt.subplots(figsize=(max(6.0, 0.9 * len(names) + 2), 4.2))
    finite = np.concatenate([r[np.isfinite(r)] for r in relative] + [np.ones(1)])
    top = 3.0 * finite.max()
    width = 0.8 / len(relative)
    for k, (shown, (label, _)) in enumerate(zip(relative, bars)):
        x = np.arange(len(names)) + (k - (len(relative) - 1) / 2) * width
        heights = np.where(np.isfinite(shown), shown, top)
        axis.bar(x, heights, width, label=label, color=f"C{k}", alpha=0.8)
        missing = ~np.isfinite(shown)
        axis.plot(x[missing], heights[missing], "x", color="k", ms=8)
    axis.set_yscale("log")
    axis.set_xticks(np.arange(len(names)))
    axis.set_xticklabels(names, rotation=30, ha="right", fontsize=8)
    axis.set_ylabel("standard error / nominal value")
    axis.grid(alpha=0.3, axis="y")
    axis.legend(fontsize="small")
    axis.set_title(title, fontsize=10)
    return _save(figure, path)
