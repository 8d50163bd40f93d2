"""``python -m hyperframes.cli``: the same as the ``hyperframes`` command."""

from hyperframes.cli.main import console

console()
