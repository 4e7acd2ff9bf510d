"""`spineid posterior`: a fit, then the Bayesian posterior of its free parameters under the
fit's noise (docs/cli.md)."""

import importlib.util

import numpy as np

from ..identify import FitProblem, fit, posterior
from ..identify._design._posterior import R_HAT
from ..io import atomic_path, write_table
from ..io._columns import parse_assignments
from ._arguments import in_option_terms, parse_noise
from ._commands import _print_columns
from ._outputs import figures, write_json


def command_posterior(arguments) -> int:
    """`spineid posterior MODEL DATA... --free GROUP --out DIR`: fit the free parameters (the
    default solver), then sample their posterior with the fit's noise and noise model
    (`spineid.posterior(problem, fit=...)`: `--chains` chains of `--samples` draws after
    `--warmup` adaptation steps each; priors from the model file's `[priors]`, else weakly
    informative). Writes report.json (the fit's report and the posterior's), draws.csv (one
    row per draw: chain, draw, each parameter in SI), posterior.png (corner plot with the
    fit's Cramer-Rao normal), trace.png (the chains) and, where ArviZ is installed,
    posterior.nc (its `InferenceData`). Exit status 1 when the model does not explain the
    data or the chains disagree (R-hat above 1.01)."""
    if importlib.util.find_spec("blackjax") is None:
        raise ImportError("spineid posterior needs blackjax: pip install 'spineid[bayes]'")
    problem = FitProblem.from_files(
        arguments.model, arguments.data, arguments.free,
        parse_noise(arguments.noise, typed=True),
        columns=parse_assignments(arguments.columns, "--columns"),
        units=parse_assignments(arguments.units, "--units"), noise_model=arguments.noise_model)
    _print_columns(problem.measurements, problem.noise_read)
    print(f"fitting {len(problem.names)} parameter(s) of {arguments.model} to "
          f"{', '.join(arguments.data)} ({problem.n_data} data values), then sampling "
          f"{arguments.chains} chain(s) of {arguments.samples} draws (NUTS; the first "
          "compilations take a minute)", flush=True)
    result = fit(problem, progress=True)
    print(result.summary(si=arguments.si))
    sampled = posterior(problem, fit=result, samples=arguments.samples,
                        warmup=arguments.warmup, chains=arguments.chains, seed=arguments.seed,
                        progress=True)
    told = sampled.summary(shown=result.shown_units(arguments.si),
                           channels=result.channel_units(arguments.si))
    print("\n".join(in_option_terms(line) if line.startswith("WARNING: ") else line
                    for line in told.splitlines()))  # (the warnings name the options)
    out = arguments.output
    chains = sampled.chain_draws
    columns = {"chain": np.repeat(np.arange(1, len(chains) + 1), chains.shape[1]),
               "draw": np.tile(np.arange(1, chains.shape[1] + 1), len(chains))}
    columns.update({name: sampled.draws[:, j] for j, name in enumerate(sampled.names)})
    paths = [write_json(out / "report.json", {"fit": result.report(),
                                               "posterior": sampled.report()}),
             write_table(out / "draws.csv", columns)]
    if not arguments.no_plots:
        paths += [figures.plot_posterior(sampled, out / "posterior.png", reference=result),
                  figures.plot_traces(sampled, out / "trace.png")]
    if importlib.util.find_spec("arviz") is not None:
        with atomic_path(out / "posterior.nc") as path:
            sampled.to_inference_data().to_netcdf(str(path))
        paths.append(out / "posterior.nc")
    else:
        print("(posterior.nc not written: ArviZ is not installed; pip install "
              "'spineid[bayes]')")
    out.finish()
    print("wrote " + ", ".join(str(p) for p in paths))
    mixed = sampled.r_hat is None or bool(np.all(sampled.r_hat <= R_HAT))
    return 0 if sampled.explains_data and mixed else 1
