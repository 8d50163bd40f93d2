"""How to install what is missing: one place builds every install hint.

The distribution is ``hyperframes-sensors`` (the import name stays
``hyperframes``; the name ``hyperframes`` on the package index belongs to an
unrelated project), so every message that tells a user to install an extra
comes from :func:`install_hint` and cannot drift.
"""

from __future__ import annotations

__all__ = ["DISTRIBUTION", "install_hint"]

#: The name to ``pip install`` (and to ask ``importlib.metadata`` about).
DISTRIBUTION = "hyperframes-sensors"


def install_hint(extra: str) -> str:
    """The command that installs ``extra``, for messages: from the index or a checkout."""
    return f"pip install '{DISTRIBUTION}[{extra}]' (in a checkout: scripts/setup.sh {extra})"
