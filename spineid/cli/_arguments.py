"""The values of the command's options that the library does not parse itself: noise per
channel, marker lists, number lists and a misfit tolerance; the noise-model options the fit
verbs share (docs/cli.md)."""

import argparse
import math
import re

import diffrax
import numpy as np

from ..identify._common._goodness import MAX_MISFIT
from ..identify._common._noise_kinds import AR
from ..identify._common._noise_model import as_noise_model
from ..io._columns import KINDS, parse_quantity, quantity_in_si, UNITS
from ..io._measurements import LOAD_COLUMNS
from ..io._model_units import quantity_in
from ..simulation import MEBDF


def _number_or(text: str, default: float) -> float:
    # `float(text)` (also nan and inf), or `default` for text that is not a number.
    try:
        return float(text)
    except ValueError:
        return default


def parse_noise(text: str | None, option: str = "--noise",
                typed: bool = False) -> dict | None:
    """`CH=SIGMA,...` -> `{channel: sigma}`; `None` for `None`. Each SIGMA may carry its unit
    (`x=10um,theta=0.02deg`, `spineid.io.quantity_in_si`). With `typed` the values are kept
    as typed, for a reader that knows the data's columns (a bare number is then in the unit
    of the channel's column, `FitProblem.from_files`); else they are SI numbers (a bare
    number SI). Raises `ValueError` naming `option`."""
    if text is None:
        return None
    noise = {}
    for item in text.split(","):
        channel, _, value = item.partition("=")
        channel = channel.strip()
        if channel in noise:
            raise ValueError(f"{option} {text!r}: channel {channel!r} is given twice")
        quantity = parse_quantity(value, f"{option} {text!r}: {channel} =") if channel else None
        if channel and quantity is None and not math.isfinite(_number_or(value, 0.0)):
            quantity = (math.inf, None)  # (nan, inf: refused below as not finite)
        if not channel or quantity is None:
            raise ValueError(
                f"{option} {text!r}: expected CHANNEL=SIGMA pairs separated by commas, each "
                f"SIGMA with its unit or without, e.g. x=5e-6,y=5e-6,theta=1.7e-4 or "
                f"x=5um,theta=0.01deg")
        number, unit = quantity
        sigma = number * (UNITS[unit][1] if unit else 1.0)
        if not (math.isfinite(sigma) and sigma > 0):
            raise ValueError(f"{option} {text!r}: {channel}={value.strip()}: expected a "
                             "positive finite standard deviation")
        noise[channel] = value.strip() if typed else sigma
    return noise

def misfit_fraction(misfit, span: float | None = None, column_unit: str | None = None,
                    si_unit: str | None = None) -> float:
    """`--max-misfit` (`(value, relative, unit)` as the parser reads it, or `None`:
    `MAX_MISFIT`) as a fraction of the data's range: a percentage as it is, a load over
    `span` (the range of a fit's one channel, SI): with its unit (`0.5N`, `200Nmm`), or bare
    in the unit of the channel's column (`column_unit`) where there is one, else SI
    (`si_unit`, the channel's: `"N"` or `"N m"`; `None` where the file does not say, any
    load unit then taken); with several channels (`span` `None`) a percentage only."""
    value, relative, unit = misfit or (MAX_MISFIT, True, None)
    if relative:
        return value
    if span is None:
        raise ValueError(f"--max-misfit {value:g}{unit or ''}: give a percentage of each "
                         "channel's range (e.g. 3%): the channels have different units")
    number = f"{value:g}" if float(f"{value:g}") == value else repr(value)  # (as typed)
    value, _ = column_quantity(f"{number}{unit or ''}", "--max-misfit", column_unit,
                               (si_unit,) if si_unit else ("N", "N m"))
    return value / max(float(span), 1e-300)


# The fit functions' arguments that the command line gives by an option of another name (a
# table fit's `noise` holds its noise model where the command has --noise-model).
_OPTIONS = {"noise_model": "--noise-model", "max_misfit": "--max-misfit",
            "displacement_noise": "--displacement-noise", "noise_max": "--noise-max"}
_ARGUMENT = re.compile(r"(?<![\w/\\.'-])(?:(" + "|".join(_OPTIONS) + r")(?![\w/\\'-]|\.\w)"
                       r"|noise(?= (?:ar|phi|acf):)|noise='(\w+)')")
# (A trajectory fit's per-channel noise, refused at the message's start; a posterior's draws;
# whiplash's end time and an instrumentation's rod levels.)
_OTHERS = ((re.compile(r"^noise(?=: )"), "--noise"),
           (re.compile(r"\(samples=\.\.\.\)"), "(--samples N)"),
           (re.compile(r"\(warmup=\.\.\.\)"), "(--warmup N)"),
           (re.compile(r"^(?=the simulation ends at .* before the pulse does)"), "--t-end: "),
           (re.compile(r"^Rod levels "), "--levels "))


def in_option_terms(message: str) -> str:
    """`message` (an error or warning of a fit function) with the Python arguments it names
    written as the command's options (`noise_model ar:4` -> `--noise-model ar:4`,
    `noise='white'` -> `--noise-model white`); file names, quoted column names and longer
    names (`noise_model.csv`, `'noise_max'`, `my_noise_model`) left as they are."""
    def option(match):
        if match.group(2):
            return f"--noise-model {match.group(2)}"
        return _OPTIONS.get(match.group(1), "--noise-model")

    message = _ARGUMENT.sub(option, message)
    for pattern, option_name in _OTHERS:
        message = pattern.sub(option_name, message)
    return message


def check_batch_options(arguments) -> None:
    """Refuse, before any file of a batch is read or anything written, the options that no file
    could make right (each file's run would fail alike): for `stiffness` and `table`, whose
    channels do not depend on the file (the six loads `Fx..Mz`; the one `load`),
    `--noise-model` coefficients for another channel; a `--max-misfit` other than a percentage
    for `stiffness` (six channels of two kinds), or typed in a unit no load has for `table`;
    and `table`'s `--noise` typed in such a unit. What rests on a file (a bare number in its
    column's unit, an order its rows cannot support) is checked with each file."""
    channels = {"stiffness": LOAD_COLUMNS, "table": ("load",)}.get(arguments.command)
    if channels is None:
        return
    model = as_noise_model(arguments.noise_model)
    if isinstance(model, AR):
        model.check_channels(channels, "--noise-model")
    # (a span of 1 for the one load channel: a load with its unit is checked for its kind, a
    # bare number, taken as SI here, passes; with no span, only a percentage)
    misfit_fraction(arguments.max_misfit, None if arguments.command == "stiffness" else 1.0)
    if arguments.command == "table" and arguments.noise is not None:
        column_quantity(arguments.noise, "--noise", None, ("N", "N m"))


def column_quantity(text: str, option: str, column_unit: str | None,
                    kinds: tuple[str, ...], sign: str = "positive") -> tuple[float, str]:
    """A quantity typed for one column of a data file (`table --noise 0.5N`, `--max-misfit`,
    `--displacement-noise 10um`, `--smoothing`, each of `--nodes`), in SI, and how it was read
    (`quantity_in_si`): with its unit, or bare in the column's unit `column_unit` (one of
    `UNITS`; `None` where the file gave none: SI). `kinds` are the SI units the column may
    hold (a load: `("N", "N m")`; one where the verb knows the kind), the first taken for a bare
    number in a column of unknown kind (said so in how it was read). `sign`: `"positive"`,
    `"non-negative"` or `"any"` (finite, as every value)."""
    column_unit = column_unit if column_unit in UNITS else None  # ("SI": spineid's own name)
    si_unit = UNITS[column_unit][0] if column_unit else None
    if si_unit is None:
        typed = parse_quantity(text, option)
        si_unit = UNITS[typed[1]][0] if typed and typed[1] else kinds[0]
        if si_unit not in kinds:
            raise ValueError(f"{option} {text!r}: {typed[1]} is {KINDS[si_unit]}, expected "
                             + " or ".join(f"{KINDS[k]} ({k})" for k in kinds))
    value, how = quantity_in_si(text, si_unit, column_unit, option)
    if column_unit is None and len(kinds) > 1 and not (parse_quantity(text, option) or
                                                       (0, None))[1]:
        how = f"{value:g} in SI ({' or '.join(kinds)}: neither column gives a unit)"
    allowed = {"positive": value > 0, "non-negative": value >= 0, "any": True}[sign]
    if not (math.isfinite(value) and allowed):
        wanted = "a finite value" if sign == "any" else f"a {sign} finite value"
        raise ValueError(f"{option} {text!r}: expected {wanted}")
    return value, how


def column_values(text: str, option: str, column_unit: str | None,
                  kinds: tuple[str, ...]) -> tuple[np.ndarray, str]:
    """Comma-separated values typed for one column (`table --nodes=0,1.5,3`, or with units:
    `0mm,1.5mm,3mm`) -> `((n,)` in SI, how they were read), each as `column_quantity` reads it
    (any sign); values of two kinds (a length and an angle) are refused."""
    parts = text.split(",")
    if not all(part.strip() for part in parts):
        raise ValueError(f"{option} {text!r}: an empty value (two commas, or one at an end)")
    if column_unit is None:  # (each value's own unit decides; with a column's, each follows it)
        typed = [(parse_quantity(part, option) or (0.0, None))[1] for part in parts]
        units = sorted({unit for unit in typed if unit})
        if len({UNITS[unit][0] for unit in units}) > 1:
            raise ValueError(f"{option} {text!r}: values of two kinds ({', '.join(units)}); "
                             "give them in one")
        if units and None in typed:
            raise ValueError(f"{option} {text!r}: some values with a unit and some bare (SI, "
                             "for a column without a unit); give every value its unit, or none")
    read = [column_quantity(part, option, column_unit, kinds, "any") for part in parts]
    shown = [how.split(" ", 2) + [""] for _, how in read]  # (number, unit, rule)
    if len({(unit, rule) for _, unit, rule, *_ in shown}) == 1:  # (`0, 1.5, 3 mm, the ...`)
        _, unit, rule, *_ = shown[0]
        how = f"{', '.join(number for number, *_ in shown)} {unit} {rule}".rstrip()
    else:
        how = "; ".join(how for _, how in read)
    return np.array([value for value, _ in read]), how


def quantity_text(text: str, zero: bool = False) -> str:
    """An option's quantity as typed (`0.5N`, `10um`, `0.002`), checked to be a positive
    number (or zero, with `zero`) with a known unit or none, kept as text: the verb converts it
    when it knows the data's columns (`column_quantity`)."""
    try:
        quantity = parse_quantity(text, "")
    except ValueError as error:  # (an unknown unit)
        raise argparse.ArgumentTypeError(str(error)) from None
    if quantity is None or not (math.isfinite(quantity[0])
                                and (quantity[0] > 0 or zero and quantity[0] == 0)):
        raise argparse.ArgumentTypeError(
            f"{text!r}: expected a {'non-negative' if zero else 'positive'} number, with its "
            "unit (0.5N, 10um) or in the column's unit")
    return text.strip()


def quantity_option(unit: str, high: float = math.inf, expected: str | None = None):
    """An argparse `type` for an option stated in `unit` (`"N"`, `"N m"`, `"mm"`, `"N/m"`,
    `"s"`): a positive number of at most `high`, bare in `unit` or typed with a unit of its
    kind (`--moment 1800Nmm` for an option in N m, `--diameter 0.55cm`, `--t-end 200ms`),
    returned in `unit`; `expected` says what is expected where the default words do not."""
    limit = f" of at most {high:g} {unit}" if math.isfinite(high) else ""
    expected = expected or f"a positive number{limit}, in {unit} or with its unit (e.g. " \
                           f"2{unit.replace(' ', '')})"

    def parse(text: str) -> float:
        try:
            value = quantity_in(text, unit)
        except ValueError as error:
            raise argparse.ArgumentTypeError(f"{text!r}: {error}") from None
        if value is None or not (math.isfinite(value) and 0 < value <= high):
            raise argparse.ArgumentTypeError(f"{text!r}: expected {expected}")
        return value

    parse.__name__ = f"a positive number in {unit}"  # (argparse names the type in messages)
    return parse


def inertia_text(text: str) -> str:
    """`table --inertia`: a number >= 0, bare (kg m^2 for a rotation, kg for a translation) or
    with a unit of either kind (`120kg mm^2`, `0.4kg`), kept as text: the verb converts it
    when it knows the displacement's kind (`inertia_in_si`)."""
    try:
        value = inertia_in_si(text, None)
    except ValueError:
        value = None
    if value is None or not (math.isfinite(value) and value >= 0):
        raise argparse.ArgumentTypeError(f"{text!r}: expected an inertia >= 0, bare or with "
                                         "its unit (kg m^2 or kg: 120kg mm^2, 0.4kg)")
    return text.strip()


def inertia_in_si(text: str, rotation: bool | None) -> float:
    """`table --inertia` (`inertia_text`) in SI: kg m^2 where the displacement is a
    `rotation`, kg where it is a translation; a bare number is taken as it is where the kind
    is not known (a column without a unit). A unit of the other kind raises `ValueError`."""
    kinds = {True: ("kg m^2",), False: ("kg",), None: ("kg m^2", "kg")}[rotation]
    for unit in kinds:
        try:
            return quantity_in(text, unit)
        except ValueError:
            continue
    what = "a rotation's (kg m^2)" if rotation else "a translation's (kg)"
    raise ValueError(f"--inertia {text!r}: expected {what} inertia, as the displacement is")


def width_text(text: str) -> str:
    """`quantity_text` that takes zero too (`table --smoothing 0`)."""
    return quantity_text(text, zero=True)


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


def noise_model_name(text: str) -> str:
    """`--noise-model`: auto, white, ar:P or phi:..., refused with the forms allowed."""
    try:
        as_noise_model(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    return text


def misfit_option(text: str, loads: bool = True) -> tuple[float, bool, str | None]:
    """`--max-misfit`: `(value, relative, unit)`: a percentage of the range (`3%`), or a load
    with its unit (`0.5N`, `200Nmm`) or bare (`misfit_fraction` converts it); `loads`: whether
    the verb takes a load (`table`), for the message that refuses text that is neither."""
    relative = text.strip().endswith("%")
    try:  # (one percent sign: "2%%" is not a percentage)
        quantity = parse_quantity(text.strip()[:-1] if relative else text.strip(), "")
    except ValueError as error:  # (an unknown unit)
        raise argparse.ArgumentTypeError(str(error)) from None
    if quantity is None or (relative and quantity[1]):
        raise argparse.ArgumentTypeError(
            f"{text!r}: expected a percentage of the data's range (3%) or a load, with its "
            "unit (0.5N) or in the load column's unit" if loads else
            f"{text!r}: expected a percentage of each channel's range (3%)") from None
    value, unit = quantity
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"{text!r}: expected a positive misfit")
    return (value / 100.0 if relative else value), relative, unit


def add_noise_model(parser, what: str = "each channel's noise",
                     misfit: str = "a percentage of each channel's range (e.g. 3%%)"):
    """Add `--noise-model` and `--max-misfit` (docs/goodness-of-fit.md) to `parser`, alike for
    every fit verb: `what` is whose noise, `misfit` what a tolerance is."""
    parser.add_argument(
        "--noise-model", default="auto", type=noise_model_name,
        metavar="auto|white|ar:P|phi:PHI,...",
        help=f"how {what} is correlated from sample to sample (with the noise estimated): auto "
             "(default: white where the residuals are, else the autoregressive order they "
             "need), white, ar:P (an autoregression of order P), phi:PHI,... (the "
             "autoregression's coefficients given, for every channel, or per channel as "
             "'phi:CH=PHI,...;CH=PHI,...', quoted for the shell), or acf:RHO0,RHO1,... (the "
             "noise's autocorrelation at lags 0, 1, ... given, turned into those "
             "coefficients; per channel alike); the fit is weighted by it and its standard "
             "errors hold under it (docs/goodness-of-fit.md)")
    parser.add_argument(
        "--max-misfit", default=None, metavar="P%" if "load" not in misfit else "P%|LOAD",
        type=misfit_option if "load" in misfit else lambda text: misfit_option(text, False),
        help=f"the largest smooth misfit a fit may leave and still be accepted: {misfit}; "
             "default 2%%")


INTEGRATORS = {"kvaerno4": diffrax.Kvaerno4, "kvaerno5": diffrax.Kvaerno5, "mebdf": MEBDF}
"""`--integrator`'s names and the diffrax solvers they make (MEBDF: `spineid.MEBDF`, the seed
paper's method, its chord iteration set by `integrator`; docs/performance.md measures them on
the head-neck chain)."""


def integrator_option(text: str) -> str:
    """`--integrator`: the name of a solver of `INTEGRATORS`, refused with the names allowed."""
    if text.strip().lower() not in INTEGRATORS:
        raise argparse.ArgumentTypeError(f"{text!r}: expected one of {', '.join(INTEGRATORS)}")
    return text.strip().lower()


def integrator(name: str, rtol: float):
    """The solver `name` of `INTEGRATORS` for a step-size controller at `rtol`: MEBDF's chord
    iteration stops a hundred times tighter (`rtol / 100`, `atol` `rtol / 1e4`)."""
    if name == "mebdf":
        return MEBDF(rtol=rtol / 100, atol=rtol / 1e4)
    return INTEGRATORS[name]()
