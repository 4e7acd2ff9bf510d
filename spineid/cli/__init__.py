"""The `spineid` command line (docs/cli.md): the only part of spineid that parses arguments."""

from ._main import build_parser as build_parser, console as console, main as main
