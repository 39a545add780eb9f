"""``python -m longldp``: the ``longldp`` command."""

from longldp.cli import app

if __name__ == "__main__":  # pragma: no branch
    app(prog_name="longldp")
