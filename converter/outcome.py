"""Outcomes: the JSON document each input comes to, and how an error becomes a failed one.

Both kinds of task (:mod:`hyperframes.converter.directory.task`,
:mod:`hyperframes.converter.bucket.task`) turn every application error into a
``failed`` outcome with the same ``fault`` and ``error`` fields, so the
ledger, the summary and the engines read them alike whatever the inbox.
"""

from __future__ import annotations

import traceback
from typing import Any

from hyperframes.converter.errors import ConverterError, InputError, VerificationError

__all__ = ["Outcome", "fault_of", "error_of"]

#: What one input came to (``input``, ``status``, ``reason``...): a JSON object.
Outcome = dict[str, Any]


def fault_of(exc: BaseException) -> str:
    """``verify`` (the output broke a rule), ``input`` (the input cannot be converted) or
    ``converter`` (anything else: not the input's fault)."""
    if isinstance(exc, VerificationError):
        return "verify"
    if isinstance(exc, InputError):
        return "input"
    return "converter"


def error_of(exc: BaseException) -> dict[str, Any]:
    """The ``error`` field: a converter error's own details, else its type, text and traceback."""
    if isinstance(exc, ConverterError):
        return exc.details()
    return {
        "error": type(exc).__name__,
        "message": f"{exc}",
        "traceback": traceback.format_exc(limit=8),
    }
