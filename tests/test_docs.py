"""The documentation site builds without a warning (`mkdocs build --strict`: a broken link, a
missing page or a docstring reference that does not resolve fails), and it documents every
command-line verb and every model kind."""

import os
import pathlib
import re
import subprocess
import sys

import spineid
from spineid.cli import build_parser

ROOT = pathlib.Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"


def test_site_builds_strictly(tmp_path):
    # The notebooks rendered unexecuted: tests/test_notebooks.py executes each one through the
    # converter the build uses (mkdocs.yml executes them by default).
    site = tmp_path / "site"
    environment = dict(os.environ, SPINEID_DOCS_EXECUTE="false")
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir",
                           str(site)], cwd=ROOT, capture_output=True, text=True, timeout=900,
                          env=environment)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    for page in ("index.html", "architecture/index.html", "cli/index.html",
                 "formats/model-files/index.html", "api/identify/index.html"):
        assert (site / page).is_file(), page
    rendered = sorted(p.parent.name for p in (site / "notebooks").glob("*/index.html"))
    assert rendered == sorted(p.stem for p in (ROOT / "notebooks").glob("*.py"))
    assert "fit_many" in (site / "api" / "identify" / "index.html").read_text()


def test_every_verb_and_model_kind_is_documented():
    cli = (DOCS / "cli.md").read_text()
    verbs = build_parser()._subparsers._group_actions[0].choices
    table = cli.split("| verb | what it does |", 1)[1].split("\n\n", 1)[0]
    for verb in verbs:
        assert f"## `{verb}`" in cli, verb
        assert f"| [`{verb}`](#{verb}) |" in table, verb  # (and in the table of verbs)
    # The README's list of verbs is the parser's.
    readme = (ROOT / "README.md").read_text()
    listed = readme.split("`spineid simulate", 1)[1].split("`", 1)[0]
    assert sorted(["simulate", *(v.strip() for v in listed.split("|") if v.strip())]) == \
        sorted(verbs)
    model_files = (DOCS / "formats" / "model-files.md").read_text()
    for kind in spineid.model_kinds():
        assert f'## `kind = "{kind}"`' in model_files, kind


def test_every_option_of_every_verb_is_in_the_docs():
    # Each option of each verb (and of the spine verb's analyses) is in the verb's section of
    # docs/cli.md, or in the text every verb shares (the introduction, exit status, batches).
    import argparse
    import re

    cli = (DOCS / "cli.md").read_text()
    parts = re.split(r"^## `([a-z]+)`", cli, flags=re.M)
    sections = dict(zip(parts[1::2], parts[2::2]))
    shared = parts[0] + cli.split("## Batches", 1)[1].split("\n## ", 1)[0]

    def options(parser):
        found = []
        for action in parser._actions:
            found += [o for o in action.option_strings if o.startswith("--") and o != "--help"]
            if isinstance(action, argparse._SubParsersAction):
                for sub in action.choices.values():
                    found += options(sub)
        return found

    verbs = build_parser()._subparsers._group_actions[0].choices
    missing = [f"{verb} {option}" for verb, parser in verbs.items() for option in options(parser)
               if f"`{option}" not in sections.get(verb, "") and f"`{option}" not in shared
               and f"[{option}" not in sections.get(verb, "")]
    assert not missing, missing


def test_the_identification_page_lists_every_public_name_once_by_importance():
    # The page names its members explicitly (in the order a user reaches for them); each of
    # spineid.identify's public names is there, once.
    import spineid.identify

    page = (DOCS / "api" / "identify.md").read_text()
    listed = [line.strip()[2:] for line in page.split("members:", 1)[1].splitlines()
              if line.strip().startswith("- ")]
    public = [name for name in dir(spineid.identify) if not name.startswith("_")]
    assert sorted(listed) == sorted(public)
    assert listed[0] == "fit"


def _python_blocks(text: str) -> list[str]:
    # The ```python blocks of a Markdown page, in order.
    return [block.split("```", 1)[0] for block in text.split("```python\n")[1:]]


def _code(block: str) -> str:
    # A block's code without its comments and blank lines: blocks that differ only there are
    # one program.
    lines = (line.split("#", 1)[0].rstrip() for line in block.splitlines())
    return "\n".join(line for line in lines if line)


def test_the_python_of_the_readme_and_the_home_page_runs_as_printed(capsys):
    # Each Python block of README.md and docs/index.md runs as a newcomer would paste it (the
    # blocks that are the same program once), and prints what its comments say: the liu-16
    # fit its verdict of three moments, the pair built in Python its parameters' names and a
    # profile interval of the second spring.
    blocks = {}
    for page in (ROOT / "README.md", DOCS / "index.md"):
        for block in _python_blocks(page.read_text()):
            blocks.setdefault(_code(block), (page.name, block))
    assert len(blocks) == 2, [name for name, _ in blocks.values()]
    printed = {}
    for name, block in blocks.values():
        exec(compile(block, name, "exec"), {"__name__": "__docs__"})
        printed[name] = capsys.readouterr().out
    assert "rank 3 of 16" in printed["README.md"]
    assert re.search(r"total_stiffness +[\d.]+ \+- [\d.]+ N/m", printed["README.md"])
    names, interval = printed["index.md"].splitlines()[-2:]
    assert names.startswith("['springs[0].stiffness', 'springs[0].damping'"), names
    low, high = map(float, re.search(r"interval \[([\d.]+), ([\d.]+)\] N/m", interval).groups())
    assert low < 20000.0 < high and high - low < 100.0, interval


def test_the_scale_out_pages_population_example_runs_as_printed(tmp_path, monkeypatch, capsys):
    # The scale-out page's one complete program (a population on two threads, a Monte-Carlo
    # study, a multi-start on the executor) runs as pasted, in a folder of its own.
    (block,) = [b for b in _python_blocks((DOCS / "scale-out.md").read_text())
                if "population_fits" in b]
    monkeypatch.chdir(tmp_path)
    exec(compile(block, "scale-out.md", "exec"), {"__name__": "__docs__"})
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].startswith("8 fit(s): 8 converged"), printed
    assert printed[1:] == ["(8, 4) (8, 4)", "(8, 4)"], printed
    assert (tmp_path / "population_fits" / "batch.json").is_file()


def _error_samples() -> list[str]:
    # The error lines the format pages show ("spineid: error: ..." in their plain blocks).
    lines = []
    for page in ("data-files.md", "model-files.md"):
        fence = None  # (the language of the open block; "" a plain one)
        for line in (DOCS / "formats" / page).read_text().splitlines():
            if line.startswith("```"):
                fence = line[3:].strip() if fence is None else None
            elif fence == "" and line.startswith("spineid: error:"):
                lines.append(line)
    return lines


def _write_records(folder, rows: dict[int, str], header: str = "t,x,y,theta") -> str:
    # run1.csv: the header on line 1, then rows of zeros at 1 ms steps, with `rows` (line number:
    # text) in place of the rows at those lines.
    lines = [header] + [",".join([f"{0.001 * k:g}"] + ["0"] * header.count(","))
                        for k in range(15)]
    for number, text in rows.items():
        lines[number - 1] = text
    (folder / "run1.csv").write_text("\n".join(lines) + "\n")
    return "run1.csv"


def _write_model(folder, name: str, text: str) -> str:
    (folder / name).write_text(text)
    return name


def test_the_error_lines_the_format_pages_show_are_what_spineid_prints(tmp_path, monkeypatch,
                                                                        capsys):
    # Each error line of docs/formats is printed as shown by the command a user would run on
    # the file the page describes (written here, in the folder the command runs in).
    from spineid.cli import main

    monkeypatch.chdir(tmp_path)
    planar = str(spineid.dataset_path("axial_4_springs.toml"))
    fit = ["fit", planar, "--free", "springs", "--out", "out"]
    spine = spineid.dataset_path("thoracolumbar_spine.toml").read_text()
    swapped = spine.replace('name = "T2"', 'name = "@"').replace('name = "T1"', 'name = "T2"')
    runs = {
        "line 7, column theta": lambda: fit[:2] + [_write_records(
            tmp_path, {7: "0.005,0,0,n/a"})] + fit[2:],
        "missing column(s)": lambda: fit[:2] + [_write_records(tmp_path, {}, "t,x,y")] + fit[2:],
        "line 12: t must be": lambda: fit[:2] + [_write_records(
            tmp_path, {11: "0.01,0,0,0", 12: "0.01,0,0,0"})] + fit[2:],
        "upper.mass": lambda: ["simulate", _write_model(
            tmp_path, "model.toml", spineid.dataset_path("liu_8_springs.toml").read_text()
            .replace("mass = 0.5", "mass = -1", 1))],
        "joints[15].upper": lambda: ["simulate", _write_model(
            tmp_path, "spine.toml", swapped.replace('name = "@"', 'name = "T1"'))],
    }
    samples = _error_samples()
    assert len(samples) == len(runs), samples
    for sample in samples:
        (key,) = [key for key in runs if key in sample]
        assert main(runs[key]()) == 2, sample
        printed = capsys.readouterr().err.strip().splitlines()
        assert printed[-1] == sample, (printed[-1], sample)
