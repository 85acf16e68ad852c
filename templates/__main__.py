"""``python -m together_clusters.templates [NAME]``: list the templates, or print the folder of one."""

from __future__ import annotations

import argparse
import sys

import yaml

from . import clean_copy, names, path

DESCRIPTION = """List the pulumi new templates that come with the package, or print the folder of one
(a clean copy: no __pycache__ or *.pyc) to give to pulumi new:

    pulumi new "$(python -m together_clusters.templates finetune)"
"""


def build_parser() -> argparse.ArgumentParser:
    """The command's parser (plain-text help)."""
    parser = argparse.ArgumentParser(
        prog="python -m together_clusters.templates",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("name", nargs="?", help="print this template's folder, for pulumi new")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.name is None:
        for name in names():
            template = yaml.safe_load((path(name) / "Pulumi.yaml").read_text())["template"]
            print(f"{name:<10} {template['description']}")
        return 0
    try:
        print(clean_copy(args.name))
    except (ValueError, OSError) as error:
        print(f"python -m together_clusters.templates: error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
