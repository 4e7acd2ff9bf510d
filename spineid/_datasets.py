"""Bundled data: models and tables shipped inside the package (`spineid/datasets` in a wheel)."""

import importlib.resources
import pathlib


def dataset_path(name: str) -> pathlib.Path:
    """Path of a bundled data file, e.g. `dataset_path("liu_8_springs.toml")`.

    Looks in the installed package first and then in the source tree's `datasets/` folder;
    an unknown name raises `ValueError` listing the files that exist.
    """
    candidates = [
        pathlib.Path(str(importlib.resources.files("spineid"))) / "datasets",
        pathlib.Path(__file__).resolve().parent.parent / "datasets",
    ]
    for folder in candidates:
        if (folder / name).is_file():
            return folder / name
    available = sorted(
        {p.name for folder in candidates if folder.is_dir() for p in folder.iterdir()}
    )
    raise ValueError(f"unknown dataset {name!r}; bundled files are {available}")
