"""``python -m together_clusters.templates [NAME]``: list the templates, or print the folder of one."""

from __future__ import annotations

import argparse
import sys

import yaml

from . import names, path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m together_clusters.templates", description=__doc__)
    parser.add_argument("name", nargs="?", help="print this template's folder (for `pulumi new`)")
    args = parser.parse_args(argv)
    if args.name is None:
        for name in names():
            template = yaml.safe_load((path(name) / "Pulumi.yaml").read_text())["template"]
            print(f"{name:<10} {template['description']}")
        return 0
    try:
        print(path(args.name))
    except ValueError as error:
        print(f"python -m together_clusters.templates: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
