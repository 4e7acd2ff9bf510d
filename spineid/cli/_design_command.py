"""`spineid design`: choose the experiments of a design file, or optimise its protocol
(docs/cli.md)."""

from ..executors import Local
from ..identify import Candidate, design, optimise_protocol, ProtocolProblem, validate_design
from ..io import read_design_file
from ._outputs import figures, refuse_non_finite, write_json


def command_design(arguments) -> int:
    """`spineid design DESIGN.toml`: choose the experiments of a design file
    (docs/formats/design-files.md) that best determine its free parameters."""
    if arguments.validate_threads is not None and arguments.validate is None:
        raise ValueError("--threads: only with --validate")
    parsed = read_design_file(arguments.design)
    if parsed.protocol is not None:
        return _protocol_design(arguments, parsed)
    candidates = [Candidate(name, model, times, channels)
                  for name, model, times, channels in parsed.candidates]
    criterion = arguments.criterion or parsed.criterion
    budget = parsed.budget if arguments.budget is None else arguments.budget
    out = arguments.output
    print(f"spineid design: {parsed.source}, {len(candidates)} candidate experiments on "
          f"{parsed.model.source}; choosing {budget} by {criterion} -> {out}/ (the first "
          "sensitivities wait for their compilation)", flush=True)
    found = design(candidates, parsed.free, parsed.noise, criterion=criterion, budget=budget,
                   baseline=parsed.baseline, limits=parsed.limits,
                   correlation=parsed.correlation)
    print(found.summary())
    report = found.report()
    if arguments.check_linearity:
        check = found.check_linearity()
        print(check.summary())
        report["linearity"] = check.report()
    validation = _validation(arguments, found, report)
    refuse_non_finite({k: v for k, v in report.items()
                       if k not in ("parameters", "linearity", "validation")}, "design")
    paths = [write_json(out / "report.json", report),
             figures.plot_design(found, out / "design.png", validation)]
    out.finish()
    print("wrote " + ", ".join(str(p) for p in paths))
    return 0


def _validation(arguments, found, report: dict):
    """With `--validate N`: the design (or protocol) `found` simulated N times with noise and
    fitted (`validate_design`), printed and added to `report`; else `None`."""
    if arguments.validate is None:
        return None
    print(f"validating: {arguments.validate} noisy simulations of the design, each fitted "
          f"(seed {arguments.seed})", flush=True)
    validation = validate_design(found, arguments.validate, seed=arguments.seed,
                                 executor=Local(threads=arguments.validate_threads or 1),
                                 progress=True)
    print(validation.summary())
    report["validation"] = validation.report()
    return validation


def _protocol_design(arguments, parsed) -> int:
    """`spineid design` of a file with a `[protocol]`: the load amplitudes, frequencies and
    phases within their bounds that best determine the free parameters
    (`spineid.optimise_protocol`, gradients through the ODE)."""
    spec = parsed.protocol
    if arguments.budget is not None:
        raise ValueError("--budget: only for a design file of candidates (a [protocol] "
                         "designs one experiment)")
    if arguments.check_linearity:
        raise ValueError("--check-linearity: only for a design file of candidates (in "
                         "Python: design([Candidate(name, protocol.model, times)], free, "
                         "noise).check_linearity())")
    criterion = arguments.criterion or parsed.criterion
    out = arguments.output
    print(f"spineid design: {parsed.source}, a protocol of {len(spec.variables)} variable(s) "
          f"({', '.join(spec.variables)}) on {parsed.model.source}; optimising {criterion} -> "
          f"{out}/ (the first evaluation waits for its compilation)", flush=True)
    problem = ProtocolProblem(spec.build, spec.variables, spec.times, parsed.free,
                              parsed.noise, criterion=criterion, channels=spec.channels)
    found = optimise_protocol(problem, limits=parsed.limits, starts=spec.starts)
    print(found.summary())
    report = found.report()
    validation = _validation(arguments, found, report)
    refuse_non_finite({k: v for k, v in report.items() if k not in ("parameters", "validation")},
                      "design")
    paths = [write_json(out / "report.json", report),
             figures.plot_protocol(found, out / "design.png", validation)]
    out.finish()
    print("wrote " + ", ".join(str(p) for p in paths))
    return 0
