"""`nosqltune export-config`: a tuned configuration as the files an operator applies (export/__init__.py)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ..errors import UsageError
from .options import DEFAULT_STUDY


def cmd_export_config(args: argparse.Namespace) -> int:
    from ..export import FILES, Evidence, ExportSettings, export_config, tablestats_bytes
    from ..export.source import evidence_for, rig_of

    out = Path(args.out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())) and not args.overwrite:
        raise UsageError(f"--out {out} exists and is not an empty folder: give a new one, or --overwrite")
    base = None
    if args.base:
        base = _read(args.base, "--base")
        import yaml

        try:
            if not isinstance(yaml.safe_load(base), dict):
                raise UsageError(f"--base {args.base} is not a cassandra.yaml (no mapping of settings)")
        except yaml.YAMLError as exc:
            raise UsageError(f"--base {args.base} does not parse as YAML: {str(exc).splitlines()[0]}") from None
    data_bytes = source = None
    if args.tablestats:
        data_bytes = tablestats_bytes(_read(args.tablestats, "--tablestats"), args.tables)
        if data_bytes is None:
            raise UsageError(f"--tablestats {args.tablestats} has no 'Space used (live)' line for "
                             f"{', '.join(args.tables) or 'any table'}: give `nodetool tablestats` output")
        source = f"nodetool tablestats of {', '.join(args.tables) or 'every table'}"
    config, said, study = _configuration(args)
    if study is not None:
        space, store = study.full_space, study.store
    else:
        from ..knobs import load_space

        space, store = load_space("cassandra"), None
    try:
        evidence = evidence_for(store, space, config, said) if store is not None else Evidence(source=said)
        if not evidence.confirmed and not args.force:
            raise UsageError(f"{evidence.line()}: not confirmed against the default at p < 0.05; measure it with "
                             "`nosqltune compare --repeat 10` (a 3-round confirmation cannot reach p < 0.05), or give "
                             "--force to export it marked as unconfirmed")
        optional = tuple(args.optional) or _ablated_optional(study, space, config)
        settings = ExportSettings(tables=tuple(args.tables), base_yaml=base, base_name=Path(args.base).name if
                                  args.base else "cassandra.yaml", data_bytes_per_node=data_bytes, data_source=source,
                                  device=args.device, optional=optional,
                                  rig=rig_of(study) if study is not None else None,
                                  version=_tuned_version(study))
        done = export_config(space, config, evidence, settings)
    finally:
        if study is not None:
            study.store.close()
    out.mkdir(parents=True, exist_ok=True)
    for name in FILES:
        (out / name).write_text(done.files[name])
    if args.json:
        print(json.dumps({"out": str(out), "files": [str(out / n) for n in FILES], "evidence": evidence.line(),
                          "confirmed": evidence.confirmed, "settings": [s.as_dict() for s in done.settings]},
                         default=str))
    else:
        print(f"{evidence.line()}")
        for s in done.settings:
            print(f"  {s.knob:<28} {s.before} -> {s.after}: {', '.join(s.tags) or '-'}")
        print(f"wrote {', '.join(FILES)} into {out} (PLAN.md says the order)")
    return 0


def _tuned_version(study) -> str:
    """The Cassandra version the study's trials ran ("" when not stored: this tool's)."""
    if study is None:
        return ""
    harness = ((study.record["settings"].get("tune") or {}).get("harness")) or {}
    return str(harness.get("cassandra_version") or "")


def _ablated_optional(study, space, config) -> tuple[str, ...]:
    """The settings the study's ablation marked optional, when it ablated this very configuration."""
    from ..evaluation.ablation import optional_settings
    from ..export.source import changed

    ablation = (study.record["settings"].get("ablation") if study is not None else None) or {}
    if not ablation or changed(space, ablation.get("best") or {}) != dict(config):
        return ()
    return tuple(optional_settings(ablation))


def _read(path: str, flag: str) -> str:
    try:
        return Path(path).read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"{flag} {path}: {getattr(exc, 'strerror', None) or exc}") from None


def _configuration(args: argparse.Namespace):
    """(changed settings, where they come from, the open study or None): the YAML of --config, or a study's best or
    comparison candidate. The study's store stays open for the evidence; the caller closes it."""
    from ..evaluation.study import open_study
    from ..export.source import changed, study_config
    from ..store import open_store, store_exists

    if args.config and args.candidate:
        raise UsageError("--config and --candidate name two configurations: give one")
    study = None
    if args.study or not args.config:
        where = args.study or DEFAULT_STUDY
        if not store_exists(where):
            raise UsageError(f"no study store at {where}: give the --study of a tuning run, or --config FILE")
        store = open_store(where)
        try:
            study = open_study(store, where, args.study_name, "export-config")
            if study.system != "cassandra":
                raise UsageError(f"study '{study.name}' tuned {study.system}: export-config writes Cassandra's files")
        except BaseException:
            store.close()
            raise
    try:
        if args.config:
            from ..knobs import load_config, load_space

            space = study.full_space if study is not None else load_space("cassandra")
            try:
                values = space.validate(load_config(args.config, "cassandra"), allow_outside_range=True)
            except (OSError, ValueError) as exc:
                raise UsageError(f"--config {args.config}: {exc}") from None
            return changed(space, values), f"the configuration of {args.config}", study
        config, said = study_config(study, args.candidate)
        return config, said, study
    except BaseException:
        if study is not None:
            study.store.close()
        raise


def add_parsers(sub) -> None:
    p = sub.add_parser(
        "export-config", help="a tuned configuration as files to apply: cassandra.yaml patch, JVM options, schema, "
                              "read-ahead, cass-operator block, and a plan",
        description="Write a tuned configuration as the files an operator applies to a Cassandra 5.0 cluster, each "
                    "setting tagged with how it is applied (live with its nodetool call, restart, rewrite, "
                    "cluster-wide in steps, irreversible, tuned on the rig), and PLAN.md with the evidence and the "
                    "order. Only a configuration better than the default at p < 0.05 in interleaved rounds is "
                    "exported unless --force.",
        epilog="Examples:\n"
               "  nosqltune export-config --study runs/a.db --out plan/ --table shop.orders --base /etc/cassandra/"
               "cassandra.yaml\n"
               "  nosqltune export-config --study runs/a.db --study-name random --candidate gp-best --out plan/\n"
               "  nosqltune export-config --config my-knobs.yaml --force --out plan/",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--study", default=None, metavar="PATH_OR_URL",
                   help=f"the trial store of the tuning study (default {DEFAULT_STUDY} when no --config is given)")
    p.add_argument("--study-name", default=None, help="the study within the store (default: the command tune's)")
    p.add_argument("--candidate", default=None, metavar="LABEL",
                   help="a candidate of the study's comparisons (as `compare` named it, e.g. best or gp-best) instead "
                        "of the study's best")
    p.add_argument("--config", default=None, metavar="FILE",
                   help="a YAML file of knob values to export instead (its evidence is looked up in --study when given)")
    p.add_argument("--out", required=True, metavar="DIR", help="folder to write the files into (new or empty)")
    p.add_argument("--overwrite", action="store_true", help="write into a folder that has files already")
    p.add_argument("--table", action="append", default=[], dest="tables", metavar="KS.T",
                   help="a table the ALTER statements name (repeatable; default: the benchmark's ycsb.usertable, "
                        "said as such)")
    p.add_argument("--base", default=None, metavar="FILE",
                   help="your cassandra.yaml: cassandra.yaml.patch is then a unified diff of it (patch -p0)")
    p.add_argument("--tablestats", default=None, metavar="FILE",
                   help="`nodetool tablestats` output of a node: a rewrite's I/O from its 'Space used (live)'")
    p.add_argument("--device", default="DEVICE", help="the data volume's block device for the read-ahead commands "
                                                      "(e.g. nvme1n1)")
    p.add_argument("--optional", action="append", default=[], metavar="KNOB",
                   help="a setting to list apart as optional (what the ablation found carries no gain)")
    p.add_argument("--force", action="store_true",
                   help="export a configuration that is not confirmed against the default at p < 0.05, marked so")
    p.add_argument("--json", action="store_true", help="print what was written as JSON on stdout")
    p.set_defaults(func=cmd_export_config)
