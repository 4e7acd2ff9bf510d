"""The `spineid` command's arguments: every verb's parser, and the checked types of its
options (docs/cli.md describes every verb)."""

import argparse
import math

from ..elements._load_laws import LAW_KINDS
from ..identify._solvers import DEFAULT_SOLVER, SOLVER_NAMES
from . import _commands as verbs
from ._arguments import (add_noise_model, inertia_text, integrator_option, quantity_option,
                         quantity_text, width_text)
from ._design_command import command_design
from ._posterior_command import command_posterior
from ._spine_command import (command_spine_flexibility, command_spine_instrument,
                             command_spine_levels)


# Verbs whose several data files are a batch (one run per file); `fit` takes `--each`.
BATCH_VERBS = ("recover", "stiffness", "table")


def _checked(convert, test, expected: str):
    # An argparse `type`: convert the text, then refuse a value that fails `test` with the
    # option's name and what was expected (argparse adds the option; status 2, the usage line).
    def parse(text: str):
        try:
            value = convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r}: expected {expected}") from None
        if not test(value):
            raise argparse.ArgumentTypeError(f"{text!r}: expected {expected}")
        return value

    parse.__name__ = expected  # argparse names the type in some messages
    return parse


POSITIVE_INT = _checked(int, lambda v: v > 0, "a whole number >= 1")
AT_LEAST_TWO = _checked(int, lambda v: v >= 2, "a whole number >= 2")
SEED = _checked(int, lambda v: 0 <= v < 2**32, "a whole number from 0 to 2**32 - 1")
WHIPLASH_END = quantity_option("s", high=600.0, expected="a positive time in s (or with its "
                              "unit, 200ms), at most 600 (1000 samples are saved per second)")
# Counts beyond what any run needs, refused before the work (a billion starts was killed for
# its memory after 90 s): whole numbers within a bound.
STARTS = _checked(int, lambda v: 1 <= v <= 10000, "a whole number from 1 to 10000")
GRID = _checked(int, lambda v: 2 <= v <= 2000, "a whole number from 2 to 2000")
DRAWS = _checked(int, lambda v: 10 <= v <= 10**6, "a whole number from 10 to 1000000")
CHAINS = _checked(int, lambda v: 1 <= v <= 64, "a whole number from 1 to 64")
SPINE_STEPS = _checked(int, lambda v: 2 <= v <= 500, "a whole number from 2 to 500")
CONTOUR = _checked(float, lambda v: math.isfinite(v) and 0 <= v <= 1, "a fraction from 0 to 1")
SPINE_MOMENT = quantity_option("N m", high=1000.0)
REPETITIONS = _checked(int, lambda v: 2 <= v <= 10000, "a whole number from 2 to 10000")
TIME_LIMIT = _checked(float, lambda v: math.isfinite(v) and 0 < v <= 1e7,
                      "a positive time in s, at most 1e7 (about 16 weeks)")
TOLERANCE = _checked(float, lambda v: math.isfinite(v) and 0 < v < 1,
                     "a relative tolerance between 0 and 1 (e.g. 1e-6)")


def _add_output(parser, required: bool = False, default: str | None = None,
                help: str = "output folder") -> None:
    # --out and --overwrite, the same for every verb (docs/cli.md, "Output folders").
    parser.add_argument("--out", required=required, default=default,
                        help=help + (f" (default {default})" if default else ""))
    parser.add_argument("--overwrite", action="store_true",
                        help="replace the outputs of an earlier run in --out (other files "
                             "there are kept); without it a folder holding files, or an "
                             "existing file, is refused")
    parser.add_argument("--time-limit", type=TIME_LIMIT, metavar="SECONDS",
                        help="stop after this many seconds (status 124), writing nothing more "
                             "(default: no limit)")


def _add_columns(parser, example: str, what: str):
    # The data file's own column names and units (docs/formats/data-files.md).
    parser.add_argument("--columns", metavar=example, help=what)
    _add_units(parser)


def _add_units(parser):
    parser.add_argument("--units", metavar="NAME=UNIT,...",
                        help="unit of a quantity or column (s, ms, m, cm, mm, um, rad, deg, N, "
                             "kN, Nm, Nmm); default: from the column name's suffix (Time_s, "
                             "disp_mm), an OpenSim file's header, or SI for spineid's own "
                             "column names")


def _add_batch(parser):
    # Options of a verb that runs as a batch over many data files.
    parser.add_argument("--group", metavar="REGEX",
                        help="in a batch: group the files by this pattern in their names (its "
                             "first capture group, e.g. '(Ant|Pos)') in summary.csv and "
                             "population.png")
    parser.add_argument("--executor", choices=("local", "dask"), default="local",
                        help="in a batch: where the files' runs go: this process (local, the "
                             "default) or the worker processes of a Dask cluster (dask; "
                             "needs spineid[dask])")
    parser.add_argument("--workers", type=POSITIVE_INT, metavar="N",
                        help="with --executor dask: worker processes of the local cluster "
                             "(default 2)")
    parser.add_argument("--threads", type=POSITIVE_INT, metavar="N",
                        help="in a batch on this process: run N files at once on N threads "
                             "(default 1; N up to the machine's cores: the fits' compiled "
                             "programs run on several cores at once, the figures are drawn "
                             "one at a time)")
    parser.add_argument("--scheduler", metavar="ADDRESS",
                        help="a running Dask scheduler to send the runs to (e.g. "
                             "tcp://host:8786); implies --executor dask")
    parser.add_argument("--resume", action="store_true",
                        help="in a batch: continue the interrupted batch in --out, running "
                             "only the files it has not finished (refused for another batch)")
    parser.add_argument("--no-plots", action="store_true",
                        help="write each file's numbers (report.json, the fitted model) but "
                             "not its plots, which take most of a batch's time (about 0.8 s "
                             "a file for a trajectory fit's three); a batch still draws "
                             "population.png")


def _add_integrator(parser, what: str) -> None:
    # `--integrator` of a verb whose model integrates by its own solver unless told otherwise.
    parser.add_argument("--integrator", type=integrator_option, default=None,
                        help=f"the ODE solver of {what}: kvaerno4, kvaerno5 or mebdf (Cash's "
                             "modified extended BDF, the seed paper's method), at the default "
                             "tolerances (rtol 1e-8); default the model's own (Tsit5 for a "
                             "pair, Kvaerno4 for the head-neck chain)")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the `spineid` command."""
    parser = argparse.ArgumentParser(
        prog="spineid",
        description="Parameter identification and inverse problems for the intervertebral joint.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    simulate_parser = commands.add_parser("simulate", help="simulate a model file, write a CSV")
    simulate_parser.add_argument("model", help="model file (TOML) or OpenSim model (.osim)")
    _add_output(simulate_parser, help="trajectory CSV, OpenSim states .sto or markers .trc "
                "(default: MODEL_trajectory.csv)")
    _add_integrator(simulate_parser, "the simulation")
    simulate_parser.set_defaults(run=verbs.command_simulate)
    fit_parser = commands.add_parser(
        "fit", help="fit model parameters to measured trajectories by least squares"
    )
    fit_parser.add_argument("model", help="model file (TOML) or OpenSim model (.osim); its "
                            "values are the starting guess")
    fit_parser.add_argument("data", nargs="+", help="trajectory file(s), repeated records of the "
                            "model's one load case (with --each, one fit per file): CSV or "
                            "OpenSim .sto/.mot, or markers .trc/.c3d with --markers")
    fit_parser.add_argument("--free", action="append", required=True, metavar="GROUP",
                            help="parameter group to fit (stiffness, damping, torsion) or a "
                                 "parameter name; repeat for several")
    _add_columns(fit_parser, "t=Time_s,x=disp_x_mm,...",
                 "the data file's column of a channel or of t (default: the channel's name)")
    fit_parser.add_argument("--each", action="store_true",
                            help="fit each data file on its own (a batch: OUT/<file stem>/, "
                                 "summary.csv, population.png) instead of all files as the "
                                 "load cases of one fit; folders and patterns name files too")
    _add_batch(fit_parser)
    fit_parser.add_argument("--markers", metavar="'upper=A,B,C;lower=D,E,F'",
                            help="for marker files (.trc, .c3d): the markers on each body (lower "
                                 "optional: the laboratory); their body coordinates come from "
                                 "the first frame that sees them all, where the model is at its "
                                 "initial pose")
    fit_parser.add_argument("--noise", metavar="CH=SIGMA,...",
                            help="measurement noise per channel, each with its unit (x=5um,theta=0.01deg) "
                                "or bare in the unit of its column (SI for spineid's own "
                                "column names); default: estimated")
    fit_parser.add_argument("--noise-max", metavar="CH=SIGMA,...",
                            help="largest plausible estimated noise per channel (with its "
                                 "unit, or bare in its column's unit); an "
                                 "estimate above it means the model does not explain the data "
                                 "(default: 1 mm for positions, 1 deg for angles)")
    add_noise_model(fit_parser)
    _add_output(fit_parser, required=True)
    fit_parser.add_argument("--solver", default=DEFAULT_SOLVER, choices=list(SOLVER_NAMES),
                            help=f"least-squares solver (default {DEFAULT_SOLVER}: spineid's "
                                 "Levenberg-Marquardt from the start, then multiple shooting and "
                                 "more starts if the model does not describe the data there)")
    fit_parser.add_argument("--starts", type=STARTS, default=None,
                            help="number of starts (multi-start, drawn 0.2x-5x around the "
                                 "model's values); with auto, those it may turn to (default 16)")
    fit_parser.add_argument("--seed", type=SEED, default=0, help="seed of the random starts")
    fit_parser.add_argument("--max-steps", type=POSITIVE_INT, default=None,
                            help="iterations of the local solver (default 200 for the "
                                 "Levenberg-Marquardt solvers, 2000 for adam and lbfgs)")
    _add_integrator(fit_parser, "the simulations inside the fit (the sensitivities are "
                    "derivatives through it)")
    fit_parser.add_argument("--si", action="store_true",
                            help="print the parameters in SI units (N/m, N m/rad, m) instead of "
                                 "the data's (N/mm, N m/deg, mm for data in mm and deg)")
    fit_parser.add_argument("--steps", action="store_true",
                            help="print every solver step as it is taken (the compiled solve "
                                 "then calls back into Python: it is compiled in every run "
                                 "instead of being loaded from the compilation cache)")
    fit_parser.add_argument("--profile", action="append", default=[], metavar="NAME",
                            help="also the profile-likelihood interval of this free parameter "
                                 "(profile_NAME.png, `profiles` in report.json); repeat for "
                                 "several")
    fit_parser.set_defaults(run=verbs.command_fit)
    posterior_parser = commands.add_parser(
        "posterior", help="a fit, then the Bayesian posterior of its free parameters (NUTS, "
                          "several chains; needs spineid[bayes])")
    posterior_parser.add_argument("model", help="model file (TOML); its values start the fit, "
                                                "its [priors] table gives the priors")
    posterior_parser.add_argument("data", nargs="+",
                                  help="trajectory file(s), repeated records of the model's "
                                       "load case: CSV or OpenSim .sto/.mot")
    posterior_parser.add_argument("--free", action="append", required=True, metavar="GROUP",
                                  help="parameter group or name to sample; repeat for several")
    _add_columns(posterior_parser, "t=Time_s,x=disp_x_mm,...",
                 "the data file's column of a channel or of t (default: the channel's name)")
    posterior_parser.add_argument("--noise", metavar="CH=SIGMA,...",
                                  help="measurement noise per channel, with its unit "
                                       "(x=5um) or bare in its column's unit; default: "
                                       "estimated by the fit, whose noise the likelihood takes")
    add_noise_model(posterior_parser)
    posterior_parser.add_argument("--samples", type=DRAWS, default=500,
                                  help="draws kept per chain (default 500)")
    posterior_parser.add_argument("--warmup", type=DRAWS, default=300,
                                  help="adaptation steps per chain (default 300)")
    posterior_parser.add_argument("--chains", type=CHAINS, default=4,
                                  help="chains, from dispersed starts (default 4)")
    posterior_parser.add_argument("--seed", type=SEED, default=0, help="seed of the sampler")
    posterior_parser.add_argument("--no-plots", action="store_true",
                                  help="write report.json and draws.csv, not the plots")
    _add_output(posterior_parser, required=True)
    posterior_parser.add_argument("--si", action="store_true",
                                  help="print the fit and the posterior in SI units instead "
                                       "of the data's (N/mm, N m/deg, ...)")
    posterior_parser.set_defaults(run=command_posterior)
    recover_parser = commands.add_parser(
        "recover", help="recover a stiffness measure (and a pin) on the model's [measure] curve"
    )
    recover_parser.add_argument("model", help="model file (TOML) with a [measure] table")
    recover_parser.add_argument("data", nargs="+",
                                help="trajectory of the upper body: CSV or OpenSim .sto/.mot; "
                                     "several files, a folder or a pattern: a batch")
    _add_batch(recover_parser)
    _add_output(recover_parser, required=True)
    _add_columns(recover_parser, "t=Time_s,x=disp_x_mm,...",
                 "the data file's column of a channel or of t (default: the channel's name)")
    recover_parser.add_argument("--noise", metavar="CH=SIGMA,...",
                                help="measurement noise per channel, each with its unit (x=5um,theta=0.01deg) "
                                "or bare in the unit of its column (SI for spineid's own "
                                "column names); default: estimated")
    add_noise_model(recover_parser)
    recover_parser.add_argument("--grid", type=GRID, metavar="N",
                                help="fit N equally spaced springs instead of off-grid atoms")
    recover_parser.add_argument("--max-atoms", type=POSITIVE_INT, default=4,
                                help="most atoms off the grid (default 4)")
    recover_parser.add_argument("--max-stiffness", type=quantity_option("N/m"),
                                metavar="N_PER_M",
                                help="ceiling on the total stiffness, N/m or with its unit "
                                     "(50N/mm; default: translational frequency at the data's "
                                     "Nyquist frequency)")
    recover_parser.set_defaults(run=verbs.command_recover)
    stiffness_parser = commands.add_parser(
        "stiffness", help="fit a 6x6 stiffness matrix to a quasi-static load-displacement test"
    )
    stiffness_parser.add_argument("data", nargs="+",
                                  help="CSV with Fx,Fy,Fz,Mx,My,Mz,dx,dy,dz,b1,b2,b3 (SI), or a "
                                       "tester's file with --columns; several files, a folder "
                                       "or a pattern: a batch")
    _add_batch(stiffness_parser)
    _add_output(stiffness_parser, required=True)
    _add_columns(stiffness_parser, "Fx=Shear_X_N,...,b1=Rot_X_deg,...",
                 "the data file's column of a load (Fx..Mz) or motion (dx..b3) (default: the "
                 "same name)")
    stiffness_parser.add_argument("--structure", default="full",
                                  choices=("full", "sagittal", "diagonal"),
                                  help="symmetric 21 entries, sagittal-symmetric 12 (eq 24 "
                                       "pattern) or diagonal 6 (default full)")
    stiffness_parser.add_argument("--noise", metavar="Fx=SIGMA,...",
                                  help="white load noise per channel, each with its unit "
                                       "(Fx=0.5N,Mx=20Nmm) or bare in its column's unit; "
                                       "default: estimated")
    add_noise_model(stiffness_parser, "each load channel's noise (rows in the order recorded)")
    stiffness_parser.add_argument("--linearised", action="store_true",
                                  help="use moments as measured instead of mapping them onto "
                                       "the Euler basis")
    stiffness_parser.add_argument("--si", action="store_true",
                                  help="print the matrix in SI units (N/m, N/rad, N m/rad) "
                                       "instead of the test's columns' (N/mm, Nm/deg, ...)")
    stiffness_parser.set_defaults(run=verbs.command_stiffness)
    table_parser = commands.add_parser(
        "table", help="fit a nonlinear load law to load-displacement data (a test or a loop)")
    table_parser.add_argument("data", nargs="+",
                              help="CSV with displacement,load[,t] (m or rad; N or N m), or a "
                                   "tester's file with --displacement, --load; several files, a "
                                   "folder or a pattern: a batch")
    _add_batch(table_parser)
    _add_output(table_parser, required=True)
    table_parser.add_argument("--displacement", metavar="COLUMN",
                              help="the data file's displacement column (default "
                                   "displacement); its unit from its suffix or --units")
    table_parser.add_argument("--load", metavar="COLUMN",
                              help="the data file's load column (default load)")
    table_parser.add_argument("--time", metavar="COLUMN",
                              help="the data file's time column (default t; only a damper or "
                                   "an inertia needs it)")
    _add_units(table_parser)
    table_parser.add_argument("--law", default="piecewise_linear", choices=LAW_KINDS,
                              help="the law's form (default piecewise_linear: a table of "
                                   "phases)")
    table_parser.add_argument("--nodes", metavar="X0,X1,...",
                              help="node displacements of a table law, each with its unit "
                                   "(1.5mm, 2deg) or bare in the displacement column's unit "
                                   "(SI for a column without one; default: --n-nodes evenly "
                                   "over the data)")
    table_parser.add_argument("--n-nodes", type=AT_LEAST_TWO, default=6,
                              help="nodes of a table law, evenly over the data, without --nodes "
                                   "(default 6)")
    table_parser.add_argument("--free-breakpoints", action="store_true",
                              help="also fit the interior node displacements (phase bounds)")
    table_parser.add_argument("--smoothing", type=width_text, metavar="W",
                              help="width over which piecewise_linear's corners are rounded, "
                                   "with its unit (0.2mm) or bare in the displacement column's "
                                   "unit (default 0: sharp corners)")
    table_parser.add_argument("--not-monotone", action="store_true",
                              help="allow a table load to decrease (negative stiffness)")
    table_parser.add_argument("--degree", type=POSITIVE_INT, default=3,
                              help="a polynomial law's degree (default 3)")
    table_parser.add_argument("--damping", action="store_true",
                              help="fit a damper on the displacement rate (needs column t)")
    table_parser.add_argument("--inertia", type=inertia_text, default="0", metavar="J",
                              help="known inertia of a dynamic test: kg m^2 for a rotation, kg "
                                   "for a translation, or with its unit (120kg mm^2)")
    table_parser.add_argument("--noise", type=quantity_text, metavar="SIGMA",
                              help="load noise (white), with its unit (0.5N, 20Nmm) or bare in "
                                   "the load column's unit; default: estimated under "
                                   "--noise-model")
    add_noise_model(table_parser, "the load noise", "a percentage of the load's range (e.g. "
                    "3%%) or a load, with its unit (0.5N) or in the load column's unit")
    table_parser.add_argument("--displacement-noise", type=quantity_text, metavar="SD",
                              help="the displacement's noise, with its unit (10um, 0.01deg) or "
                                   "bare in the displacement column's unit: errors in both "
                                   "variables, each residual weighted by its effective noise "
                                   "(docs/goodness-of-fit.md)")
    table_parser.add_argument(
        "--solver", default="auto", choices=("auto", "varpro", "lm"),
        help="auto (default): variable projection for free breakpoints of a piecewise_linear "
             "law (the least-squares breakpoints first), Levenberg-Marquardt otherwise; "
             "varpro: variable projection; lm: Levenberg-Marquardt from the given nodes")
    table_parser.add_argument("--unit", default=None, choices=("deg", "mm"),
                              help="displacement unit of the plot (default: the displacement "
                                   "column's own unit, SI where none was read)")
    table_parser.add_argument("--si", action="store_true",
                              help="print the summary in SI units (m or rad, N or N m) instead "
                                   "of the columns' (mm, N, N/mm for a test in mm and N)")
    table_parser.add_argument("--profile", action="append", default=[], metavar="NAME",
                              help="also the profile-likelihood interval of this parameter "
                                   "(e.g. gap[1]); repeat for several")
    table_parser.set_defaults(run=verbs.command_table)
    database_parser = commands.add_parser(
        "database", help="plot the bundled spine database (geometry, L5-S1 load law)")
    _add_output(database_parser, default="spineid-database")
    database_parser.set_defaults(run=verbs.command_database)
    whiplash_parser = commands.add_parser(
        "whiplash", help="the head-neck chain in a rear-end pulse: plots, energy check, summary")
    whiplash_parser.add_argument("model", nargs="?",
                                 help="kind = \"head_neck\" model file (default: the bundled "
                                      "datasets/head_neck.toml)")
    _add_output(whiplash_parser, default="spineid-whiplash")
    whiplash_parser.add_argument("--t-end", type=WHIPLASH_END, default=5.0,
                                 help="simulated time (s, default 5)")
    whiplash_parser.add_argument("--rtol", type=TOLERANCE, default=1e-5,
                                 help="relative tolerance of the integrator (default 1e-5)")
    whiplash_parser.add_argument("--integrator", type=integrator_option, default="kvaerno4",
                                 metavar="kvaerno4|kvaerno5|mebdf",
                                 help="the integrator: kvaerno4 (default), kvaerno5 or mebdf "
                                      "(Cash's modified extended BDF, the seed paper's)")
    whiplash_parser.add_argument("--max-steps", type=POSITIVE_INT, default=200_000,
                                 help="the most integrator steps of the whole run (default "
                                      "200000; the bundled chain takes about 1600 to 5 s)")
    whiplash_parser.add_argument("--sensitivity", action="store_true",
                                 help="also the elasticities of the peak ligament force with "
                                      "respect to the stiffness and damping parameters")
    whiplash_parser.set_defaults(run=verbs.command_whiplash)
    segment_parser = commands.add_parser(
        "segment", help="the nine quasi-static load cases of a motion segment (C5-C6 by "
                        "default): equilibria, displacements, facet forces; optionally a fit")
    segment_parser.add_argument("model", nargs="?",
                                help="spatial_pair model file with bushings, [[ligaments]] and "
                                     "[[facets]] (default: the bundled datasets/c5_c6.toml)")
    _add_output(segment_parser, default="spineid-segment")
    segment_parser.add_argument("--force", type=quantity_option("N"), default=20.0,
                                help="shear, tension and compression load (N or with its "
                                     "unit, 0.02kN; default 20)")
    segment_parser.add_argument("--moment", type=quantity_option("N m"), default=1.8,
                                help="bending and torsion moment (N m or with its unit, "
                                     "1800Nmm; default 1.8)")
    segment_parser.add_argument("--fit", metavar="DATA.csv",
                                help="fit the --free parameters to a quasi-static test "
                                     "(Fx..Mz,dx,dy,dz,b1,b2,b3, like the written cases.csv)")
    segment_parser.add_argument("--free", action="append", metavar="GROUP",
                                help="facets.stiffness, bushing.stiffness, ligaments.stiffness "
                                     "or a parameter name; repeat for several")
    _add_columns(segment_parser, "Fx=Shear_X_N,...,dx=Disp_X_mm,...,b1=Rot_X_deg,...",
                 "with --fit: the test file's column of a load (Fx..Mz) or motion (dx..b3) "
                 "(default: the same name)")
    segment_parser.add_argument("--noise", metavar="dx=SIGMA,...",
                                help="displacement noise of all of dx,dy,dz,b1,b2,b3, each with "
                                     "its unit (dx=0.01mm,b1=0.02deg) or bare in its column's "
                                     "unit (m, rad for spineid's own columns); default: "
                                     "estimated from the residuals")
    add_noise_model(segment_parser, "each displacement channel's noise (rows in the order "
                    "recorded; a test of ten rows or more)",
                    "a percentage of the motion's amplitude of each channel's kind (the "
                    "largest range of the translations, or of the rotations; e.g. 3%%)")
    segment_parser.add_argument("--starts", type=STARTS, default=None,
                                help="with --fit: fit from this many starts, the file's values "
                                     "and more drawn 0.2x-5x about them (spineid.MultiStart), "
                                     "the lowest cost kept (default: the file's values alone)")
    segment_parser.add_argument("--seed", type=SEED, default=None,
                                help="with --starts: seed of the random starts (default 0)")
    segment_parser.add_argument("--si", action="store_true",
                                help="with --fit: print the fit in SI units instead of the "
                                     "test's columns' (N/mm, mm, deg, ...)")
    segment_parser.set_defaults(run=verbs.command_segment)
    spine_parser = commands.add_parser(
        "spine", help="analyses of a whole spine (a spatial_chain model, Liu's T1-L5 spine by "
                      "default): flexibility tests, each level's stiffness from poses, rods")
    spine_verbs = spine_parser.add_subparsers(dest="analysis", required=True)
    flexibility_parser = spine_verbs.add_parser(
        "flexibility", help="moment-rotation curves of every motion segment, or of the whole "
                            "spine under a moment on one vertebra")
    flexibility_parser.add_argument("model", nargs="?",
                                    help="spatial_chain model file (default: the bundled "
                                         "datasets/thoracolumbar_spine.toml)")
    flexibility_parser.add_argument("--moment", type=SPINE_MOMENT, default=10.0,
                                    help="largest moment, each way (N m or with its unit, "
                                         "7500Nmm; default 10)")
    flexibility_parser.add_argument("--steps", type=SPINE_STEPS, default=20,
                                    help="load steps per side (default 20)")
    flexibility_parser.add_argument("--joints", metavar="L5-S1,L4-L5,...",
                                    help="the motion segments to test (default: every one)")
    flexibility_parser.add_argument("--loaded", metavar="BODY",
                                    help="test the whole spine instead, the moment on this "
                                         "vertebra (e.g. T1), the base fixed")
    flexibility_parser.add_argument("--no-plots", action="store_true",
                                    help="write flexibility.csv and report.json only")
    _add_output(flexibility_parser, default="spineid-flexibility")
    flexibility_parser.set_defaults(run=command_spine_flexibility)
    levels_parser = spine_verbs.add_parser(
        "levels", help="fit each joint's stiffness scales to the vertebrae's poses in a "
                       "whole-spine flexibility test")
    levels_parser.add_argument("model", nargs="?",
                               help="spatial_chain model file whose laws are scaled (default: "
                                    "the bundled datasets/thoracolumbar_spine.toml)")
    levels_parser.add_argument("poses", help="poses file: direction, moment_N_m, body, x_m, "
                                             "y_m, z_m, a1_rad, a2_rad, a3_rad (as spine "
                                             "flexibility --loaded writes it)")
    levels_parser.add_argument("--loaded", required=True, metavar="BODY",
                               help="the vertebra that carried the moment (e.g. T1)")
    levels_parser.add_argument("--observed", metavar="BODY,...",
                               help="fit to these bodies' poses only (default: every body in "
                                    "the file)")
    levels_parser.add_argument("--noise", metavar="position=SIGMA,angle=SIGMA",
                               help="pose noise, with units (position=0.1mm,angle=0.1deg; or "
                                    "per channel x,y,z,a1,a2,a3); default 0.1 mm and 0.1 deg")
    _add_output(levels_parser, default="spineid-levels")
    levels_parser.set_defaults(run=command_spine_levels)
    instrument_parser = spine_verbs.add_parser(
        "instrument", help="Liu's spine on a curve pulled onto rods at the thesis' screw "
                           "points: Cobb angle, clamp loads, the motion kept")
    instrument_parser.add_argument("--levels", required=True, metavar="L1,T12,...,T4",
                                   help="the instrumented vertebrae, bottom up (two or more)")
    instrument_parser.add_argument("--curve", metavar="CURVE.csv",
                                   help="the spine's curve: joint rotations in degrees "
                                        "(columns joint, lateral_bending_deg, ...; default "
                                        "the bundled scoliosis, 40 deg Cobb)")
    instrument_parser.add_argument("--contour", type=CONTOUR, default=0.5,
                                   help="the rods' shape: this fraction of the curve (0: "
                                        "straight rods; default 0.5)")
    instrument_parser.add_argument("--sides", default="left,right", metavar="left,right",
                                   help="one rod per side named (default both)")
    instrument_parser.add_argument("--point", default="pedicle",
                                   help="attachment point: pedicle (default), "
                                        "transverse_process, transverse_process_base, lamina, "
                                        "lamina_inferior")
    instrument_parser.add_argument("--diameter", type=quantity_option("mm"), default=5.5,
                                   help="rod diameter (mm or with its unit, 0.55cm; default "
                                        "5.5)")
    instrument_parser.add_argument("--material", default="titanium",
                                   help="rod material (default titanium)")
    instrument_parser.add_argument("--steps", type=SPINE_STEPS, default=10,
                                   help="continuation steps pulling the spine onto the rods "
                                        "(and load steps of --moment; default 10)")
    instrument_parser.add_argument("--moment", type=SPINE_MOMENT,
                                   help="also test the whole spine before and with the rods "
                                        "under this moment (N m or with its unit) on --body")
    instrument_parser.add_argument("--body", default="T1",
                                   help="the vertebra loaded with --moment (default T1)")
    instrument_parser.add_argument("--no-plots", action="store_true",
                                   help="write report.json and screws.csv only")
    _add_output(instrument_parser, default="spineid-instrument")
    instrument_parser.set_defaults(run=command_spine_instrument)
    design_parser = commands.add_parser(
        "design", help="choose the experiments that best determine a model's parameters "
                       "(Fisher information through the ODE)")
    design_parser.add_argument("design", help="design file (docs/formats/design-files.md): the "
                                              "model, free parameters, noise and candidates")
    _add_output(design_parser, default="spineid-design")
    design_parser.add_argument("--criterion", choices=("D", "A", "E"),
                               help="optimality criterion (default: the file's, else D)")
    design_parser.add_argument("--budget", type=POSITIVE_INT, metavar="N",
                               help="how many experiments to choose (default: the file's)")
    design_parser.add_argument("--check-linearity", action="store_true",
                               help="also check that the predicted standard errors hold two "
                                    "of them away from the nominal values "
                                    "(Design.check_linearity; report.json: linearity)")
    design_parser.add_argument("--validate", type=REPETITIONS, metavar="N",
                               help="validate the design: simulate it N times with noise, fit "
                                    "each from the nominal values, and compare the spread of "
                                    "the estimates with the predicted standard errors "
                                    "(spineid.validate_design; report.json: validation; "
                                    "design.png: the realised errors beside; 50 know a spread "
                                    "to about 10%%)")
    design_parser.add_argument("--seed", type=SEED, default=0,
                               help="with --validate: seed of the noise (default 0)")
    design_parser.add_argument("--threads", type=POSITIVE_INT, metavar="N",
                               dest="validate_threads",
                               help="with --validate: run N fits at once on N threads of this "
                                    "process (default 1)")
    design_parser.set_defaults(run=command_design)
    demo_parser = commands.add_parser("demo", help="the main job on bundled data")
    _add_output(demo_parser, default="spineid-demo")
    demo_parser.set_defaults(run=verbs.command_demo)
    return parser
