"""The ``hyperframes`` command line: the shell's face of every part (docs/CLI.md).

- :mod:`~hyperframes.cli.main`: the entry point, the core commands (``info``,
  ``verify``, ``recover``, ``synth``, ``events``...) and the plugin commands
  registered through the ``hyperframes.commands`` entry point group (the
  recorder's and the converter's, which this package never imports);
- :mod:`~hyperframes.cli.common`: what every command shares: exit codes,
  one-line errors, progress;
- :mod:`~hyperframes.cli.drive`: ``ls``, ``slice``, ``cat``, ``du``;
- :mod:`~hyperframes.cli.mcap`, :mod:`~hyperframes.cli.viz`,
  :mod:`~hyperframes.cli.sync`: ``export``/``import``, ``plot``/``show``,
  ``sync-report``.

``python -m hyperframes.cli`` is the same as the ``hyperframes`` command.
"""
