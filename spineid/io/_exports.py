"""Writing a model in the file format of another program, by the format's name: what a model
can be written to, it says itself (`AbstractLagrangianSystem.export_formats`)."""

import pathlib

from ..models._mechanics import AbstractLagrangianSystem
from ._opensim import write_opensim_model

EXPORT_FORMATS = {"opensim": (".osim", write_opensim_model)}
"""Format name -> `(file suffix, writer(model, path))`."""


def export_model(model: AbstractLagrangianSystem, format: str, path: str | pathlib.Path
                 ) -> pathlib.Path:
    """Write `model` in `format` (a name of `EXPORT_FORMATS`, one of the model's
    `export_formats()`) to `path`; returns the path. A format the model cannot be written to
    raises `ValueError`."""
    if format not in EXPORT_FORMATS:
        raise ValueError(f"export format {format!r}: expected one of {sorted(EXPORT_FORMATS)}")
    if format not in model.export_formats():
        raise ValueError(f"a {type(model).__name__} with these elements cannot be written as "
                         f"{format!r}; it can be written as {list(model.export_formats())}")
    return EXPORT_FORMATS[format][1](model, path)
