"""``python -m ggml_bridge mulmat --lib-dir BUILD/bin ...``: the bench without the workspace (or gitpython)."""

from __future__ import annotations

import sys

import click

from fusekit.errors import FusekitError

from .cli import bench


def main() -> int:
    try:
        bench.main(prog_name="python -m ggml_bridge", standalone_mode=False)
    except FusekitError as exc:
        click.echo(f"fusekit: error: {exc.message}", err=True)
        return 1
    except click.exceptions.Abort:
        return 1
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code
    return 0


if __name__ == "__main__":
    sys.exit(main())
