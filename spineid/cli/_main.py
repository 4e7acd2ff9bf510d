"""The `spineid` command: its arguments and its entry point. The command line is the only part
of spineid that parses arguments (docs/cli.md describes every verb)."""

import _thread
import argparse
import gc
import math
import signal
import sys
import threading
import time
import warnings

import equinox as eqx
import numpy as np

from ..elements._load_laws import LAW_KINDS
from ..identify._solvers import DEFAULT_SOLVER, SOLVER_NAMES
from ..plots import use_file_backend
from . import _commands as verbs
from . import _drawing
from ._arguments import add_noise_model
from ._batch import data_files, is_batch, run_batch, uses_dask
from ._outputs import figures, OutputFolder

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
POSITIVE = _checked(float, lambda v: math.isfinite(v) and v > 0, "a positive number")
NON_NEGATIVE = _checked(float, lambda v: math.isfinite(v) and v >= 0, "a number >= 0")
WHIPLASH_END = _checked(float, lambda v: math.isfinite(v) and 0 < v <= 600,
                        "a positive time in s, at most 600 (1000 samples are saved per second)")
# Counts beyond what any run needs, refused before the work (a billion starts was killed for
# its memory after 90 s): whole numbers within a bound.
STARTS = _checked(int, lambda v: 1 <= v <= 10000, "a whole number from 1 to 10000")
GRID = _checked(int, lambda v: 2 <= v <= 2000, "a whole number from 2 to 2000")
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


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the `spineid` command."""
    parser = argparse.ArgumentParser(
        prog="spineid",
        description="Parameter identification and inverse problems for the intervertebral joint.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    simulate_parser = commands.add_parser("simulate", help="simulate a model file, write a CSV")
    simulate_parser.add_argument("model", help="model file (TOML)")
    _add_output(simulate_parser, help="trajectory CSV (default: MODEL_trajectory.csv)")
    simulate_parser.set_defaults(run=verbs.command_simulate)
    fit_parser = commands.add_parser(
        "fit", help="fit model parameters to measured trajectories by least squares"
    )
    fit_parser.add_argument("model", help="model file (TOML); its values are the starting guess")
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
                            help="measurement noise per channel (SI); default: estimated")
    fit_parser.add_argument("--noise-max", metavar="CH=SIGMA,...",
                            help="largest plausible estimated noise per channel (SI); an "
                                 "estimate above it means the model does not explain the data "
                                 "(default: 1 mm for positions, 1 deg for angles)")
    add_noise_model(fit_parser)
    _add_output(fit_parser, required=True)
    fit_parser.add_argument("--solver", default=DEFAULT_SOLVER, choices=list(SOLVER_NAMES),
                            help=f"least-squares solver (default {DEFAULT_SOLVER}: spineid's "
                                 "Levenberg-Marquardt from the start, then more starts if the "
                                 "model does not explain the data there)")
    fit_parser.add_argument("--starts", type=STARTS, default=None,
                            help="number of starts (multi-start, drawn 0.2x-5x around the "
                                 "model's values); with auto, those it may turn to (default 16)")
    fit_parser.add_argument("--seed", type=SEED, default=0, help="seed of the random starts")
    fit_parser.add_argument("--max-steps", type=POSITIVE_INT, default=None,
                            help="iterations of the local solver (default 200 for the "
                                 "Levenberg-Marquardt solvers, 2000 for adam and lbfgs)")
    fit_parser.add_argument("--steps", action="store_true",
                            help="print every solver step as it is taken (the compiled solve "
                                 "then calls back into Python: it is compiled in every run "
                                 "instead of being loaded from the compilation cache)")
    fit_parser.add_argument("--profile", action="append", default=[], metavar="NAME",
                            help="also the profile-likelihood interval of this free parameter "
                                 "(profile_NAME.png, `profiles` in report.json); repeat for "
                                 "several")
    fit_parser.set_defaults(run=verbs.command_fit)
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
                                help="measurement noise per channel (SI); default: estimated")
    add_noise_model(recover_parser)
    recover_parser.add_argument("--grid", type=GRID, metavar="N",
                                help="fit N equally spaced springs instead of off-grid atoms")
    recover_parser.add_argument("--max-atoms", type=POSITIVE_INT, default=4,
                                help="most atoms off the grid (default 4)")
    recover_parser.add_argument("--max-stiffness", type=POSITIVE, metavar="N_PER_M",
                                help="ceiling on the total stiffness (default: translational "
                                     "frequency at the data's Nyquist frequency)")
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
                                  help="white load noise per channel (N, N m); default: estimated")
    add_noise_model(stiffness_parser, "each load channel's noise (rows in the order recorded)")
    stiffness_parser.add_argument("--linearised", action="store_true",
                                  help="use moments as measured instead of mapping them onto "
                                       "the Euler basis")
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
    table_parser.add_argument("--law", default="piecewise_linear", choices=LAW_KINDS)
    table_parser.add_argument("--nodes", metavar="X0,X1,...",
                              help="node displacements of a table law (default: --n-nodes "
                                   "evenly over the data)")
    table_parser.add_argument("--n-nodes", type=AT_LEAST_TWO, default=6)
    table_parser.add_argument("--free-breakpoints", action="store_true",
                              help="also fit the interior node displacements (phase bounds)")
    table_parser.add_argument("--smoothing", type=NON_NEGATIVE, default=0.0,
                              help="smoothing width of piecewise_linear (SI; default 0)")
    table_parser.add_argument("--not-monotone", action="store_true",
                              help="allow a table load to decrease (negative stiffness)")
    table_parser.add_argument("--degree", type=POSITIVE_INT, default=3, help="polynomial degree")
    table_parser.add_argument("--damping", action="store_true",
                              help="fit a damper on the displacement rate (needs column t)")
    table_parser.add_argument("--inertia", type=NON_NEGATIVE, default=0.0,
                              help="known inertia of a dynamic test (kg m^2 or kg)")
    table_parser.add_argument("--noise", type=POSITIVE,
                              help="load noise (SI, white); default: estimated under "
                                   "--noise-model")
    add_noise_model(table_parser, "the load noise", "a percentage of the load's range (e.g. "
                    "3%%) or a load (SI)")
    table_parser.add_argument("--displacement-noise", type=POSITIVE, metavar="SD",
                              help="the displacement's noise (SI, m or rad): errors in both "
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
    segment_parser.add_argument("--force", type=POSITIVE, default=20.0,
                                help="shear, tension and compression load (N, default 20)")
    segment_parser.add_argument("--moment", type=POSITIVE, default=1.8,
                                help="bending and torsion moment (N m, default 1.8)")
    segment_parser.add_argument("--fit", metavar="DATA.csv",
                                help="fit the --free parameters to a quasi-static test "
                                     "(Fx..Mz,dx,dy,dz,b1,b2,b3, like the written cases.csv)")
    segment_parser.add_argument("--free", action="append", metavar="GROUP",
                                help="facets.stiffness, bushing.stiffness, ligaments.stiffness "
                                     "or a parameter name; repeat for several")
    segment_parser.add_argument("--noise", metavar="dx=SIGMA,...",
                                help="displacement noise of dx,dy,dz (m) and b1,b2,b3 (rad); "
                                     "default: estimated from the residuals")
    segment_parser.set_defaults(run=verbs.command_segment)
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
    design_parser.set_defaults(run=verbs.command_design)
    demo_parser = commands.add_parser("demo", help="the main job on bundled data")
    _add_output(demo_parser, default="spineid-demo")
    demo_parser.set_defaults(run=verbs.command_demo)
    return parser


def console() -> int:
    """Entry point of the `spineid` console script and of `python -m spineid`: `main` in a
    process of its own; returns the exit status.

    What is imported before the verb runs, and what the verb leaves at its end, is taken out of
    the reach of Python's cyclic garbage collector (`gc.freeze`): the collector then does not
    walk JAX's, equinox's and matplotlib's import-time objects again, in each full collection
    during the verb nor in the one at the interpreter's exit (together about a third of a
    second of a process that imports spineid, measured against one that ends by `os._exit`;
    the whole process is timed by experiments/benchmark_cold_start.py). Only
    a process that ends after the verb may do this (objects frozen are never collected), so
    `main`, called from Python, does not. For the same reason only this entry lets `fit` draw
    its figures in worker processes forked before the verb runs (`spineid.cli._drawing`).
    """
    gc.freeze()
    try:
        status = main(figure_processes=2)
    finally:
        _drawing.stop()
    gc.freeze()
    return status


def main(argv: list[str] | None = None, *, figure_processes: int = 0) -> int:
    """Entry point of the `spineid` console script; returns the exit status (0 done, 1 a fit
    that did not converge, 2 bad input with a one-line error, 124 stopped at `--time-limit`,
    130 and 143 interrupted and terminated).

    `figure_processes`: `fit` with its plots draws its figures in this many worker processes,
    forked before the verb runs (`spineid.cli._drawing`); only for a process in which nothing
    has run in JAX yet (`console`), since a fork after JAX's threads started is unsafe. The
    caller ends them (`_drawing.stop`)."""
    arguments = build_parser().parse_args(argv)
    if (figure_processes and arguments.command == "fit" and not arguments.no_plots
            and not uses_dask(arguments)):  # (a Dask batch's workers draw their own figures)
        _drawing.start(figure_processes)
    _last_raised[0] = -math.inf  # (an earlier call in this process does not quiet this one)
    figures.forget_deferred()
    use_file_backend()  # files only: no display is needed
    in_main_thread = threading.current_thread() is threading.main_thread()
    limit = getattr(arguments, "time_limit", None)
    timed = in_main_thread and limit is not None
    if in_main_thread:  # (signals reach only the main thread)
        previous = signal.signal(signal.SIGTERM, _terminated)
        # (Ctrl-C as SIGTERM, where it is Python's default: a job started in the background
        # of a shell, which ignores it, keeps ignoring it)
        previous_interrupt = (signal.signal(signal.SIGINT, _interrupted)
                              if signal.getsignal(signal.SIGINT) is signal.default_int_handler
                              else None)
    if timed:
        previous_alarm = signal.signal(signal.SIGALRM, _timed_out)
        signal.setitimer(signal.ITIMER_REAL, limit)
    _RUN_NUMBER[0] += 1
    _RUNNING.set()
    previous_unraisable = sys.unraisablehook
    sys.unraisablehook = _answering_dropped_stops(previous_unraisable)
    try:
        try:
            return _run(arguments)
        except (KeyboardInterrupt, _Terminated, _TimedOut) as stop:
            # (Python handles signals between bytecodes: during a long compiled computation
            # the answer comes when it returns.)
            _ANSWERING.set()
            how, status = (("interrupted", 130) if isinstance(stop, KeyboardInterrupt)
                           else ("terminated", 143) if isinstance(stop, _Terminated)
                           else (f"stopped at the time limit of {limit:g} s", 124))
            print(f"spineid: {how}; every file already written is whole (files are written "
                  "atomically), the rest were not written, and an output folder begun says it "
                  "is incomplete (spineid-outputs.json)", file=sys.stderr)
            return status
    except (KeyboardInterrupt, _Terminated, _TimedOut) as stop:  # a second one while answering
        return 143 if isinstance(stop, _Terminated) else 124 if isinstance(stop, _TimedOut) \
            else 130
    finally:
        _ANSWERING.set()  # the run is over: a signal during the clean-up is not answered
        output = getattr(arguments, "output", None)
        if hasattr(output, "release"):  # (a run that did not finish lets its folder go)
            output.release()
        with _SENDING:
            _RUNNING.clear()
        sys.unraisablehook = previous_unraisable
        if timed:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM,
                          signal.SIG_DFL if previous_alarm is None else previous_alarm)
        if in_main_thread:
            signal.signal(signal.SIGTERM, signal.SIG_DFL if previous is None else previous)
            if previous_interrupt is not None:
                signal.signal(signal.SIGINT, previous_interrupt)
        _ANSWERING.clear()


def _run(arguments) -> int:
    # The verb, with refused input and unusable files turned into one line (status 2).
    try:
        # Many data files: a batch (one run per file), else the one file as the verb takes it.
        files = None
        if arguments.command in BATCH_VERBS:
            if is_batch(arguments.data):  # (marker files are trajectories: fit only)
                files = data_files(arguments.data, (".csv", ".sto", ".mot"))
            else:
                arguments.data = arguments.data[0]
        elif getattr(arguments, "each", False):
            files = data_files(arguments.data)
        if files is None:
            for option, given in (("--group", getattr(arguments, "group", None)),
                                  ("--executor dask", getattr(arguments, "executor",
                                                              "local") != "local"),
                                  ("--workers", getattr(arguments, "workers", None)),
                                  ("--threads", getattr(arguments, "threads", None)),
                                  ("--scheduler", getattr(arguments, "scheduler", None)),
                                  ("--resume", getattr(arguments, "resume", False))):
                if given:
                    raise ValueError(f"{option}: only for a batch (several data files, a "
                                     "folder or a pattern; fit: --each)")
        if getattr(arguments, "resume", False) and arguments.overwrite:
            raise ValueError("--resume and --overwrite: choose one (continue the batch in "
                             "--out, or replace it)")
        # The output folder is checked before any work (simulate checks its file itself).
        if arguments.run is not verbs.command_simulate:
            arguments.output = OutputFolder(arguments.out, arguments.command,
                                            arguments.overwrite,
                                            resume=getattr(arguments, "resume", False))
        # Overflowing numbers are caught where they matter (a result holding one is never
        # written); numpy's warnings about them would only clutter the one-line answer.
        # spineid's own warnings are one line each, without Python's source location.
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"), \
                warnings.catch_warnings():
            warnings.showwarning = _show_warning
            if files is not None:
                return run_batch(arguments, arguments.run, files)
            return arguments.run(arguments)
    except ValueError as error:
        print(f"spineid: error: {error}", file=sys.stderr)
        return 2
    except eqx.EquinoxRuntimeError as error:
        # A check inside compiled code that is not turned into a result code: its own message
        # (the line spineid wrote), without equinox's stack.
        lines = [line.strip() for line in str(error).splitlines() if line.strip()]
        ours = [line[line.index("spineid."):] for line in lines if "spineid." in line
                and not line.startswith("File ")]
        print(f"spineid: error: {(ours or lines[-1:] or ['a check in compiled code failed'])[0]}",
              file=sys.stderr)
        return 2
    except ImportError as error:
        if "pip install" not in str(error):  # (only the optional extras' own hints)
            raise
        print(f"spineid: error: {error}", file=sys.stderr)
        return 2
    except MemoryError:
        print("spineid: error: out of memory: the run needs more memory than is available "
              "(fewer samples, a shorter span or fewer data)", file=sys.stderr)
        return 2
    except OSError as error:  # a file that cannot be read or written: one line, no traceback
        where = f"{error.filename}: " if error.filename else ""
        print(f"spineid: error: {where}{error.strerror or error}", file=sys.stderr)
        return 2


def _show_warning(message, category, filename, lineno, file=None, line=None):
    print("spineid: warning: " + " ".join(str(message).split()), file=sys.stderr, flush=True)


class _Terminated(BaseException):
    """SIGTERM, raised where the program is, so that it ends like Ctrl-C: the file being
    written is removed, nothing half-written is left."""


# Set while an interruption is being answered: a SIGTERM then is ignored.
_ANSWERING = threading.Event()
# The number of the verb running (a signal sent again later is sent only to the run it
# interrupted) and whether one runs.
_RUN_NUMBER = [0]
_RUNNING = threading.Event()
# A signal is raised once, and again only after this many seconds: the first unwinds the stack
# (removing a temporary file), a second one at once would cut that short.
_SIGNAL_QUIET_S = 2.0
_last_raised = [-math.inf]
# A stop raised where Python drops what is raised ("Exception ignored in ...": a garbage-
# collection callback such as JAX's `_xla_gc_callback`, a weak reference's callback, a
# finaliser) reaches `sys.unraisablehook`; its signal is then sent again after this many
# seconds, when the program has left that callback.
_SIGNAL_AGAIN_S = 0.05


# Held while a signal is sent again, and while a run ends: no signal is sent once the run has
# begun to put back the handlers it found (a default action would end the process).
_SENDING = _thread.allocate_lock()


def _send_again(signum: int) -> None:
    # (to the main thread itself, so that a wait there is interrupted; from a bare `_thread`
    # thread, which takes none of `threading`'s locks that a garbage-collection callback may
    # have interrupted)
    number, main_thread = _RUN_NUMBER[0], threading.main_thread().ident

    def send():
        time.sleep(_SIGNAL_AGAIN_S)
        with _SENDING:
            if _RUN_NUMBER[0] == number and _RUNNING.is_set() and not _ANSWERING.is_set():
                signal.pthread_kill(main_thread, signum)

    _thread.start_new_thread(send, ())


def _answering_dropped_stops(hook):
    # A `sys.unraisablehook` that sends a dropped stop's signal again; other unraisable
    # exceptions go to `hook`.
    def unraisable(report):
        signum = _STOP_SIGNALS.get(report.exc_type)
        if signum is None or not _RUNNING.is_set():
            return hook(report)
        _last_raised[0] = -math.inf  # (the stop was lost: the next one is raised)
        _send_again(signum)

    return unraisable


def _raise_once(stop) -> None:
    now = time.monotonic()
    if _ANSWERING.is_set() or now - _last_raised[0] < _SIGNAL_QUIET_S:
        return
    _last_raised[0] = now
    if stop in (_Terminated, KeyboardInterrupt) and figures.defer(stop):
        return  # (raised when the figure being drawn is done)
    raise stop


class _TimedOut(BaseException):
    """The `--time-limit` has passed (SIGALRM), raised where the program is."""


def _timed_out(signum, frame):
    _raise_once(_TimedOut)


def _terminated(signum, frame):
    _raise_once(_Terminated)


def _interrupted(signum, frame):
    _raise_once(KeyboardInterrupt)


_STOP_SIGNALS = {_TimedOut: signal.SIGALRM, _Terminated: signal.SIGTERM,
                 KeyboardInterrupt: signal.SIGINT}
