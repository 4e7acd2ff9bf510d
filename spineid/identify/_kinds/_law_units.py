"""A load law's numbers in the units of the data it was fitted to: `LawFit.summary(units=...)`.

A law's parameters are declared in the abstract units `displacement` and `load` (a law serves a
translation, m and N, as well as a rotation, rad and N m), their products and powers:
`load/displacement^2`, `load s/displacement`. `law_units` names the units a test's columns were
read in (`mm`, `deg`, `N`, `kN`, `Nmm`, ...: `spineid.io`'s `UNITS`), and `shown_in` gives each
such unit in them with the factor that takes an SI value to it (`load/displacement` in `N/mm`:
1e-3)."""

from ...io._columns import SI_NAMES, UNITS, units_substituted
from .._common._shown import in_unit

_SI_LOAD = {"m": "N", "rad": "Nm"}
"""The SI load unit of each SI displacement unit (a translation's force, a rotation's moment)."""


def law_units(read_as: dict | None) -> tuple[str, str] | None:
    """The units `(displacement, load)` (names of `UNITS`) a test's columns were read in, from
    its `read_as` (`{"displacement": {"unit": ...}, "load": {...}}`); the SI unit of a column
    read without one (its kind the other's); `None` where neither is known (spineid's own
    columns). Both may be SI (`Disp_m`, `Force_N`: the summary then names m and N; `in_si`)."""
    units = [((read_as or {}).get(name) or {}).get("unit") for name in ("displacement", "load")]
    if not any(unit in UNITS for unit in units):
        return None
    displacement, load = units
    if displacement not in UNITS:
        if UNITS[load][0] not in ("N", "N m"):
            return None
        displacement = "m" if UNITS[load][0] == "N" else "rad"
    if UNITS[displacement][0] not in _SI_LOAD:
        return None
    if load not in UNITS:
        load = _SI_LOAD[UNITS[displacement][0]]
    return displacement, load


def in_si(units: tuple[str, str]) -> bool:
    """Whether `units` (`law_units`) are SI units (`("m", "N")`, `("rad", "Nm")`)."""
    return all(UNITS[unit][1] == 1.0 for unit in units)


def shown_in(unit: str, units: tuple[str, str]) -> tuple[str, float]:
    """A law parameter's abstract `unit` (`"load/displacement^2"`) in `units` (`law_units`),
    with the factor from SI: `("load/displacement", ("mm", "N"))` -> `("N/mm", 1e-3)`. A token
    other than `displacement` and `load` (the `s` of a damping) stays as it is."""
    names = {"displacement": units[0], "load": units[1]}
    return units_substituted(unit, lambda base, numerator, before: names.get(base))


def si_names(units: tuple[str, str]) -> tuple[str, str]:
    """The SI units of the kinds of `units` (`("mm", "kN")` -> `("m", "N")`)."""
    return tuple(SI_NAMES[UNITS[unit][0]] for unit in units)


def described(units: tuple[str, str]) -> str:
    """The line that says a summary is in the data's units."""
    return (f"(in the data's units: displacement {units[0]}, load {units[1]}; report.json in SI, "
            f"{', '.join(si_names(units))})")


def law_summary(fit, units: tuple[str, str] | None) -> list[str]:
    """The lines of `LawFit.summary` before its verdict: the fit, its method, the parameters
    and the derived node displacements, node loads and slopes, in SI or in `units`
    (`law_units`; a line says so)."""
    def unit(kind):  # (name, factor from SI) of an abstract unit; SI: no name
        return shown_in(kind, units) if units else ("", 1.0)

    lines = [f"{fit.kind} law fitted to {fit.n_data} points: "
             + ("converged" if fit.converged else "NOT converged")
             + f", cost {fit.cost:.4g}, load noise {in_unit(fit.noise, unit('load'))}"
             + (" (estimated)" if fit.noise_estimated else "")
             + ("" if fit.displacement_noise is None else ", displacement noise "
                + in_unit(fit.displacement_noise, unit('displacement'))
                + " (errors in both variables)"),
             f"method: {fit.method}", *([described(units)] if units and not in_si(units)
                                        else []),
             *fit.parameter_table(shown=[unit(u) for u in fit.units] if units else None)]
    for key, entries in fit.derived.items():
        name, factor = unit({"node_displacement": "displacement", "node_load": "load"}.get(
            key, "load/displacement"))
        lines.append(f"{key}{f' ({name})' if name else ''}: " + ", ".join(
            f"{v * factor:.4g} +- {e * factor:.2g}" for v, e in entries)
            + (" (the breakpoints: the interior nodes; gap[k] are relative spacings)"
               if key == "node_displacement" and "gap[1]" in fit.names else ""))
    return lines
