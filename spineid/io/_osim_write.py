"""Write fitted values back into the OpenSim file a `spineid.MultibodyTree` was read from
(`write_osim_values`): the user's own file with only the changed numbers replaced."""

import pathlib
import re
import warnings

import numpy as np

from ..models._multibody import MultibodyTree
from ..models._tree_parts import LIMIT_PROPERTIES, ExpressionBushing, TreeBushing
from ._atomic import write_text_atomically
from ._expressions import EXPRESSIONS, polynomial_terms, render_terms
from ._osim import (
    BUSHING_PROPERTIES,
    LIMIT_DEFAULTS,
    limit_scale,
    parameter_label,
    read_osim,
)


# An OpenSim 3 body's inertia, one property per entry (4.x: `<inertia>` of the six, this order).
_INERTIA_3 = tuple(f"inertia_{axes}" for axes in ("xx", "yy", "zz", "xy", "xz", "yz"))


def write_osim_values(model: MultibodyTree, path) -> pathlib.Path:
    """Write the OpenSim file `model` was read from (`model.source`) to `path` with its
    bodies' masses (kg), centres of mass (m) and inertias (kg m^2), its bushings' properties
    (`BushingForce`s' four vectors; `ExpressionBasedBushingForce`s' dampings, and each
    expression whose coefficients changed written anew as a sum of its terms) and its
    `CoordinateLimitForce`s' six properties (in the file's degrees for a rotational coordinate)
    set to the model's values: each number that changed is replaced in place (full float64
    precision; an OpenSim 3 file's inertia in its `<inertia_xx>` ... `<inertia_yz>`, the file
    staying in its own format), every other byte of the file is kept
    (line ends included; a commented-out bushing is left alone). Returns the path; a model not
    read from a file, a file not readable as UTF-8 text, or a force or body no longer in it
    raises `ValueError`.
    (`spineid.export_model(model, "opensim", path)` calls this.)"""
    if not model.source:
        raise ValueError("this MultibodyTree was not read from an OpenSim file: nothing to "
                         "write its values into")
    source = pathlib.Path(model.source)
    try:
        with open(source, encoding="utf-8", newline="") as file:
            text = file.read()
    except OSError as error:
        raise ValueError(f"{source}: cannot read the model file to write its values into "
                         f"({error.strerror})") from None
    except UnicodeDecodeError as error:
        raise ValueError(f"{source}: not UTF-8 text ({error.reason} at byte {error.start}); "
                         "cannot write values into it") from None
    comments = [(c.start(), c.end()) for c in re.finditer(r"<!--.*?-->", text, re.S)]
    pieces, end = [], 0
    bushings = {bushing.label: bushing for bushing in model.elements}
    limits = {parameter_label(limit.name): limit for limit in model.limits}
    bodies = _changed_bodies(model, source)
    for block in re.finditer(r'<(BushingForce|ExpressionBasedBushingForce|CoordinateLimitForce|'
                             r'Body)\s+name="([^"]*)"\s*>(.*?)</\1>', text, re.S):
        if any(a <= block.start() < b for a, b in comments):
            continue
        label = parameter_label(block.group(2))
        if block.group(1) == "Body":
            if label not in bodies:
                continue
            body, where = block.group(3), f"{source}: body {block.group(2)!r}"
            for prop, (values, read) in bodies.pop(label).items():
                if prop == "inertia" and "<inertia>" not in body and "<inertia_xx>" in body:
                    # (OpenSim 3's six numbers; only those that changed: OpenSim's upgrade,
                    # through which the file was read, keeps six digits of the others)
                    for name, value, then in zip(_INERTIA_3, values, read):
                        if read is None or value != then:
                            body = _numbers_written(body, name, [value], where)
                    continue
                body = _numbers_written(body, prop, values, where)
        elif block.group(1) == "CoordinateLimitForce":
            if label not in limits:
                continue
            limit = limits.pop(label)
            body = _limit_values(block.group(3), limit,
                                 model.coordinate_units[limit.coordinate])
        else:
            bushing = bushings.get(label)
            if bushing is None or (block.group(1) == "BushingForce") != isinstance(
                    bushing, TreeBushing):
                continue
            del bushings[bushing.label]
            body = _with_values(source, block.group(2), block.group(3), bushing)
        pieces += [text[end:block.start(3)], body]
        end = block.end(3)
    if bushings or limits or bodies:
        raise ValueError(f"{source}: no force or body "
                         f"{sorted(bushings) + sorted(limits) + sorted(bodies)} in the file "
                         "(changed since it was read?)")
    write_text_atomically(pathlib.Path(path), "".join(pieces) + text[end:])
    return pathlib.Path(path)


def _changed_bodies(model: MultibodyTree, source: pathlib.Path) -> dict:
    # Each body's mass, centre of mass and inertia that differ from the file's own (read again,
    # so that a body whose numbers the file holds otherwise, as OpenSim 3's `inertia_xx`, is
    # left alone where nothing changed), by the body's label: `{prop: (values, as read)}`
    # (`None` as read for a body the file did not have when read).
    with warnings.catch_warnings():  # (the reader's warnings were given when it was read)
        warnings.simplefilter("ignore")
        original = read_osim(source)
    ours = (model.masses, model.mass_centers, model.inertia_entries)
    theirs = (original.masses, original.mass_centers, original.inertia_entries)
    changed = {}
    for k, body in enumerate(model.body_names):
        before = original.body_names.index(body) if body in original.body_names else None
        props = {prop: (np.atleast_1d(np.asarray(now[k])),
                        None if before is None else np.atleast_1d(np.asarray(then[before])))
                 for prop, now, then in zip(("mass", "mass_center", "inertia"), ours, theirs)
                 if before is None or not np.array_equal(np.asarray(now[k]),
                                                         np.asarray(then[before]))}
        if props:
            changed[parameter_label(body)] = props
    return changed


def _with_values(source, name, body: str, bushing) -> str:
    # The body of one bushing force with each property's changed numbers replaced (and an
    # expression whose polynomial changed written anew).
    if isinstance(bushing, ExpressionBushing):
        for k, tag in enumerate(EXPRESSIONS):
            ours = {e: float(c) for o, e, c in zip(bushing.outputs, bushing.exponents,
                                                    np.asarray(bushing.coefficients)) if o == k}
            found = re.search(rf"<{tag}>([^<]*)</{tag}>", body)
            if ours == polynomial_terms(found.group(1) if found else "0.0", f"{name}: {tag}"):
                continue
            if found is None:
                raise ValueError(f"{source}: ExpressionBasedBushingForce {name!r} has no "
                                 f"<{tag}> to write its value into")
            body = body[:found.start(1)] + render_terms(list(ours.items())) + body[found.end(1):]
    for prop in BUSHING_PROPERTIES:
        if not hasattr(bushing, prop):
            continue
        body = _numbers_written(body, prop, getattr(bushing, prop),
                                f"{source}: bushing force {name!r}")
    return body


def _numbers_written(body: str, prop: str, values, where: str) -> str:
    # `body` (the text inside one component's block) with each number of its `<prop>` that
    # differs from `values` replaced (full float64 precision; spacing kept). An absent `<prop>`
    # is OpenSim's default, zeros (a body's `<mass>` is never absent: the reader requires it).
    values = np.asarray(values, dtype=float)
    found = re.search(rf"<{prop}>([^<]*)</{prop}>", body)
    if found is None:
        if np.any(values != 0.0):
            raise ValueError(f"{where} has no <{prop}> to write its value into")
        return body
    tokens = re.split(r"(\s+)", found.group(1))
    numbers = [k for k, token in enumerate(tokens) if token and not token.isspace()]
    for k, value in zip(numbers, values):
        if float(tokens[k]) != float(value):
            tokens[k] = repr(float(value))
    return body[:found.start(1)] + "".join(tokens) + body[found.end(1):]


def _limit_values(body: str, limit, unit: str) -> str:
    # The body of one CoordinateLimitForce with each property that changed written in the
    # file's units (`limit_scale`); a property the file leaves out (OpenSim's default) is added
    # before the block's end where it changed.
    for prop, (field, _, _) in LIMIT_PROPERTIES.items():
        value = float(getattr(limit, field))
        scale = limit_scale(prop, unit)
        written = value / scale
        found = re.search(rf"<{prop}>([^<]*)</{prop}>", body)
        if found is None:
            if LIMIT_DEFAULTS[prop] * scale != value:  # (added as the first line is indented)
                kept = body.rstrip()
                body = (kept + re.match(r"\s*", body).group(0) + f"<{prop}>{written!r}</{prop}>"
                        + body[len(kept):])
            continue
        if float(found.group(1)) * scale != value:
            body = body[:found.start(1)] + repr(written) + body[found.end(1):]
    return body
