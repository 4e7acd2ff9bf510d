"""The `spineid` command line (docs/cli.md): the only part of spineid that parses arguments."""

from ._main import console as console, main as main
from ._parser import build_parser as build_parser
