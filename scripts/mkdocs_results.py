"""mkdocs hook: the results of bench/results/ in the documentation site, under results/.

The pages cite measured figures by their results file (docs/figures.md indexes them all). This hook adds
bench/results/'s pages (.md, rendered as pages of the site), figures (.png) and the sample report (.html) to the
site's files as results/<path>, so a page links them relatively (`[drift.md](results/drift.md)` from docs/*.md),
mkdocs checks those links like any other, and the built site opens from the disk (build/site/index.html) with
every result in it. The stores (.db) and the figures as data (.json) stay out of the site.
"""

from pathlib import Path

from mkdocs.structure.files import File, Files

RESULTS = Path(__file__).resolve().parent.parent / "bench" / "results"
SITE_FOLDER = "results"
KINDS = (".md", ".png", ".html")


def results_files(site_dir: str, use_directory_urls: bool) -> list[File]:
    """Every page, figure and report under bench/results/, as files of the site under results/."""
    found = sorted(p for p in RESULTS.rglob("*") if p.is_file() and p.suffix in KINDS)
    return [File(f"{SITE_FOLDER}/{p.relative_to(RESULTS).as_posix()}", src_dir=str(RESULTS.parent),
                 dest_dir=site_dir, use_directory_urls=use_directory_urls) for p in found]


def on_files(files: Files, config) -> Files:
    for file in results_files(config["site_dir"], config["use_directory_urls"]):
        files.append(file)
    return files
