"""The documentation cannot drift from the code: the command reference is what the parsers render now, every
command line the pages show parses, the README stays short, and the figures' index names every result file."""

import argparse
import re
import shlex
from pathlib import Path

from nosqltune.cli import build_parser
from nosqltune.cli.reference import commands, documented_actions, render

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
PAGES = sorted(DOCS.glob("*.md")) + [ROOT / "README.md"]


def test_the_committed_reference_is_what_the_parsers_render():
    assert (DOCS / "reference.md").read_text() == render(), \
        "docs/reference.md is stale: a command or flag changed; run `make reference` and commit docs/reference.md"


def test_the_reference_covers_every_command_and_flag():
    text = (DOCS / "reference.md").read_text()
    sections = dict(re.findall(r"(?ms)^## (nosqltune [^\n]*)\n(.*?)(?=^## |\Z)", text))
    parser = build_parser()
    found = list(commands(parser))
    assert {p[0] for p, _, _ in found} >= {"bench", "tune", "best", "compare", "report", "model", "cluster", "datasets"}
    for path, sub, _ in found:
        name = " ".join(("nosqltune", *path))
        assert name in sections, f"{name} has no section in docs/reference.md"
        rows = [line for line in sections[name].splitlines() if line.startswith("| `")]
        for action in documented_actions(sub):
            shown = action.option_strings or [action.metavar or action.dest]
            assert any(all(f"`{o}`" in row for o in shown) for row in rows), f"{name}: {shown[0]} is not in its table"


def _code_lines(text: str):
    """(line number, line) of every line inside a code block: fenced (```) or indented by 4 spaces after a blank
    line, as Markdown reads them."""
    fenced = False
    indented = False
    previous_blank = True
    for number, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if fenced:
            yield number, line
        elif line.startswith("    ") and (indented or previous_blank):
            indented = True
            yield number, line
        else:
            indented = indented and not line.strip() == "" and line.startswith("    ")
        previous_blank = not line.strip()


def command_lines(path: Path):
    """(line number, argv) of every `nosqltune ...` command line in a page's code blocks; a line ending in a
    backslash continues on the next one, and a `#` comment is left out."""
    pending = None
    for number, line in _code_lines(path.read_text()):
        stripped = line.strip()
        if pending is not None:
            start, words = pending
            pending = None
            stripped = f"{words} {stripped}"
            number = start
        elif not stripped.startswith("nosqltune "):
            continue
        if stripped.endswith("\\"):
            pending = (number, stripped[:-1])
            continue
        yield number, stripped


# A line that shows a shape rather than a command cannot parse as written: `...` stands for "the rest of your
# flags" (`tune --optimizer rafiki ...`) and `<name>` for a word to fill in; such lines are left out. An optional
# part, `[--json]`, is parsed as if given.
PLACEHOLDER = re.compile(r"\.\.\.|<[a-z_]+>")
OPTIONAL = re.compile(r"\[(--[^\[\]]*)\]")


def parse_all(pages: list[Path]) -> tuple[list[str], list[str]]:
    """(command lines checked, refusals as 'page:line: command (exit N)') over the pages' code blocks."""
    parser = build_parser()
    checked, failures = [], []
    for page in pages:
        where = page.relative_to(ROOT) if page.is_relative_to(ROOT) else page
        for number, line in command_lines(page):
            argv = shlex.split(OPTIONAL.sub(r"\1", line), comments=True)[1:]
            if PLACEHOLDER.search(" ".join(argv)):
                continue
            try:
                parser.parse_args(argv)
            except SystemExit as exc:   # argparse refuses by exiting
                failures.append(f"{where}:{number}: {line} (exit {exc.code})")
            checked.append(line)
    return checked, failures


def test_every_command_line_in_the_docs_parses():
    """Every `nosqltune ...` line in a code block of docs/*.md and README.md parses with the current CLI (parsed
    only: build_parser().parse_args, nothing runs; a refusal is reported with its page and line). Lines with
    shell placeholders, `...` for "your other flags" or `<name>`, are skipped: they show a shape, not a command
    (today: `tune --optimizer rafiki ...`, `tune --system surrogate:wide24 ...`, `tune --system external
    --target-file my-target.yaml --knobs ...`, and the two `tune --nodes/--design ... --knobs eppinger ...` of
    the clusters page). An optional part in brackets (`cluster status [--json]`) is parsed as if given. The
    test also checks that it found the command lines at all."""
    checked, failures = parse_all(PAGES)
    assert not failures, "command lines in the docs that the CLI refuses:\n" + "\n".join(failures)
    assert len(checked) >= 40, f"only {len(checked)} command lines found in the docs"


def test_a_refused_command_line_is_reported_with_its_page_and_line(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("Text.\n\n    nosqltune bench --no-such-flag   # a comment\n    nosqltune knobs redis\n\n"
                    "```\nnosqltune tune --workload ycsb-a \\\n    --budget nine\nnosqltune tune ... # skipped\n```\n")
    checked, failures = parse_all([page])
    assert len(checked) == 3
    assert failures == [f"{page}:3: nosqltune bench --no-such-flag   # a comment (exit 2)",
                        f"{page}:7: nosqltune tune --workload ycsb-a  --budget nine (exit 2)"]


def test_the_readme_fits_on_a_screen_or_two():
    assert len((ROOT / "README.md").read_text().splitlines()) < 200


def test_the_figures_page_indexes_every_result_file():
    figures = (DOCS / "figures.md").read_text()
    for result in sorted((ROOT / "bench" / "results").glob("*.md")):
        assert f"(results/{result.name})" in figures, f"docs/figures.md does not index {result.name}"


LINK = re.compile(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def _links(page: Path):
    """(line number, target) of every Markdown link and image of a page, code spans and blocks left out."""
    code = {number for number, _ in _code_lines(page.read_text())}
    for number, line in enumerate(page.read_text().splitlines(), 1):
        if number not in code:
            for target in LINK.findall(re.sub(r"`[^`]*`", "", line)):
                yield number, target


def test_no_page_links_a_root_absolute_path():
    """A link like /bench/results/drift.md works on a code host but not in the site opened from the disk
    (build/site/index.html): it would point at the disk's root. Results are linked relatively (results/drift.md),
    and mkdocs.yml's absolute_links: warn fails the strict build on one too."""
    found = [f"{page.name}:{number}: {target}" for page in sorted(DOCS.glob("*.md"))
             for number, target in _links(page) if target.startswith("/")]
    assert not found, "root-absolute links in docs/ (link results as results/<file>):\n" + "\n".join(found)


def test_every_results_link_names_a_file_the_site_gets():
    """The build adds bench/results/'s pages, figures and report to the site as results/ (scripts/mkdocs_results.py);
    a page's link results/<path> must name such a file (not a .db store or .json data, which stay out)."""
    import importlib.util   # the hook is a script of the build, not a module of the package
    spec = importlib.util.spec_from_file_location("mkdocs_results", ROOT / "scripts" / "mkdocs_results.py")
    hook = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hook)
    site = {f.src_uri for f in hook.results_files(str(ROOT / "build" / "site"), False)}
    assert "results/figures.md" not in site and "results/drift.md" in site and "results/online.png" in site
    assert not any(uri.endswith((".db", ".json")) for uri in site)
    links = [(page.name, number, target.split("#")[0]) for page in sorted(DOCS.glob("*.md"))
             for number, target in _links(page) if target.startswith("results/")]
    assert len(links) >= 40, f"only {len(links)} links to results found"
    broken = [f"{name}:{number}: {target}" for name, number, target in links if target not in site]
    assert not broken, "links to results the site does not get:\n" + "\n".join(broken)


def test_the_pages_name_no_internal_issue_or_seed_number():
    """Readers have neither the project's issue tracker nor its seed documents: a page names the feature, the
    results file or the published work (docs/references.md), not "issue 38" or "seed 001"; docs/reference.md, made
    from the help texts, and the results pages the site takes from bench/results/ included."""
    internal = re.compile(r"seed ?00[0-4]|issues? [0-9]", re.IGNORECASE)
    found = [f"{page.relative_to(ROOT)}:{number}: {line.strip()[:100]}"
             for page in PAGES + sorted((ROOT / "bench" / "results").rglob("*.md"))
             for number, line in enumerate(page.read_text().splitlines(), 1) if internal.search(line)]
    assert not found, "internal numbers in the docs:\n" + "\n".join(found)


def test_the_home_page_links_every_page():
    index = (DOCS / "index.md").read_text()
    for page in sorted(DOCS.glob("*.md")):
        if page.name != "index.md":
            assert f"]({page.name})" in index, f"docs/index.md does not link {page.name}"


def test_every_page_is_in_the_site_navigation():
    config = (ROOT / "mkdocs.yml").read_text()
    for page in sorted(DOCS.glob("*.md")):
        assert f": {page.name}" in config, f"{page.name} is not in mkdocs.yml's nav"


def test_reference_renders_a_flag_added_to_a_parser():
    parser = build_parser()
    sub = next(s for p, s, _ in commands(parser) if p == ("knobs",))
    sub.add_argument("--brand-new", metavar="N", help="a flag | with <markup> *here*")
    text = render(parser)
    assert r"| `--brand-new` | `N` | a flag \| with &lt;markup> \*here\* |" in text
    assert isinstance(sub, argparse.ArgumentParser)
