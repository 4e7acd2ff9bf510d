"""Write fitted values back into the OpenSim file a `spineid.MultibodyTree` was read from
(`write_osim_values`): the user's own file with only the changed numbers replaced."""

import pathlib
import re

import numpy as np

from ..models._multibody import MultibodyTree
from ..models._tree_parts import LIMIT_PROPERTIES, ExpressionBushing, TreeBushing
from ._atomic import write_text_atomically
from ._expressions import EXPRESSIONS, polynomial_terms, render_terms
from ._osim import BUSHING_PROPERTIES, LIMIT_DEFAULTS, limit_scale, parameter_label


def write_osim_values(model: MultibodyTree, path) -> pathlib.Path:
    """Write the OpenSim file `model` was read from (`model.source`) to `path` with its
    bodies' masses (kg), its bushings' properties (`BushingForce`s' four vectors;
    `ExpressionBasedBushingForce`s' dampings, and each expression whose coefficients changed
    written anew as a sum of its terms) and its `CoordinateLimitForce`s' six properties (in
    the file's degrees for a rotational coordinate) set to the model's values: each number that
    changed is replaced in place (full float64 precision), every other byte of the file is kept
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
    masses = {parameter_label(body): float(mass)
              for body, mass in zip(model.body_names, np.asarray(model.masses))}
    for block in re.finditer(r'<(BushingForce|ExpressionBasedBushingForce|CoordinateLimitForce|'
                             r'Body)\s+name="([^"]*)"\s*>(.*?)</\1>', text, re.S):
        if any(a <= block.start() < b for a, b in comments):
            continue
        label = parameter_label(block.group(2))
        if block.group(1) == "Body":
            if label not in masses:
                continue
            body = _mass_value(block.group(3), masses.pop(label))
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
    if bushings or limits or masses:
        raise ValueError(f"{source}: no force or body "
                         f"{sorted(bushings) + sorted(limits) + sorted(masses)} in the file "
                         "(changed since it was read?)")
    write_text_atomically(pathlib.Path(path), "".join(pieces) + text[end:])
    return pathlib.Path(path)


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
        values = np.asarray(getattr(bushing, prop), dtype=float)
        found = re.search(rf"<{prop}>([^<]*)</{prop}>", body)
        if found is None:  # (absent: OpenSim's default, zeros)
            if np.any(values != 0.0):
                raise ValueError(f"{source}: bushing force {name!r} has no <{prop}> to write "
                                 "its value into")
            continue
        tokens = re.split(r"(\s+)", found.group(1))
        numbers = [k for k, token in enumerate(tokens) if token and not token.isspace()]
        for k, value in zip(numbers, values):
            if float(tokens[k]) != float(value):
                tokens[k] = repr(float(value))
        body = body[:found.start(1)] + "".join(tokens) + body[found.end(1):]
    return body


def _mass_value(body: str, mass: float) -> str:
    # The body of one Body with its mass written where it changed (OpenSim requires the
    # property: the reader refuses a body without it).
    found = re.search(r"<mass>([^<]*)</mass>", body)
    if found is None or float(found.group(1)) == mass:
        return body
    return body[:found.start(1)] + repr(mass) + body[found.end(1):]


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
