"""Descriptors: the process's limit, raised at start, and the writer's reserve.

Every peer connection the ZeroMQ sockets accept costs the recorder one
descriptor (measured: 1,100 idle TCP connections, 1,100 descriptors), and a
local user can open them faster than anything closes them. Two things keep
that from costing a segment:

* :func:`raise_nofile`, at start: the soft ``RLIMIT_NOFILE`` up to
  :data:`NOFILE_TARGET` (or the hard limit, if lower), logged, with a warning
  when the limit left cannot hold what the sockets may accept
  (``zmq.max_connections``) plus :data:`OWN_DESCRIPTORS`. The unit sets
  ``LimitNOFILE=65536`` (soft and hard), so under systemd this only reports.
  (glibc's ``setrlimit`` is the ``prlimit64`` call, which the unit's filter
  allows: ``~@resources`` refuses the old ``setrlimit`` call only.)
* :func:`private_descriptor_table`, the reserve: the thread that writes
  segments (and the one that recovers leftovers) calls ``unshare(CLONE_FILES)``
  and from then on opens files in a descriptor table of its own, which peers
  never fill. ``RLIMIT_NOFILE`` bounds each table on its own, so the writer
  has the whole limit however many connections the sockets hold. What it
  opens is its own: a descriptor opened there means nothing to other threads
  and the other way round, so such a thread keeps to its files (segments, the
  event log, directory listings) and never shares a descriptor number with
  another thread. Descriptors open when it is called stay open in its copy of
  the table until the thread ends.
"""

from __future__ import annotations

import ctypes
import logging
import os
import resource
import threading
from dataclasses import dataclass
from typing import Final

__all__ = [
    "NOFILE_TARGET",
    "OWN_DESCRIPTORS",
    "NofileLimit",
    "raise_nofile",
    "private_descriptor_table",
]

_log = logging.getLogger(__name__)

NOFILE_TARGET: Final = 65536
"""The soft descriptor limit asked for at start (the unit's ``LimitNOFILE``)."""

OWN_DESCRIPTORS: Final = 256
"""Descriptors the recorder needs beside ``max_connections`` peers: about 25 at rest
(measured, one ZeroMQ socket, metrics, the control socket), up to about 200 more in the
bursts an attacker's connections arrive in before the cap cuts them (measured with
1,100 connections), and MQTT, scrapes, ``mark`` and sd_notify."""

_CLONE_FILES: Final = 0x400  # linux/sched.h


@dataclass(frozen=True, slots=True)
class NofileLimit:
    """``RLIMIT_NOFILE`` after :func:`raise_nofile`; ``low`` when below what is needed."""

    soft: int
    hard: int
    needed: int

    @property
    def low(self) -> bool:
        """True when the soft limit cannot hold ``needed`` descriptors."""
        return self.soft != resource.RLIM_INFINITY and self.soft < self.needed


def _show(n: int) -> str:
    return "unlimited" if n == resource.RLIM_INFINITY else str(n)


def raise_nofile(peers: int, target: int = NOFILE_TARGET) -> NofileLimit:
    """Raise the soft descriptor limit towards ``target``; log it, warn when too low.

    ``peers`` is how many peer connections the sockets may hold together (the
    sum of ``zmq.max_connections``); the limit is low below ``peers`` +
    :data:`OWN_DESCRIPTORS`. Never raises: a refused ``setrlimit`` is logged
    and the limit stays as it was.
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = target if hard == resource.RLIM_INFINITY else min(target, hard)
    if soft != resource.RLIM_INFINITY and soft < want:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
        except (OSError, ValueError) as exc:
            _log.warning("descriptor limit: cannot raise the soft limit %d to %d: %s",
                         soft, want, exc)  # fmt: skip
        else:
            _log.info("descriptor limit: soft limit raised from %d to %d (hard %s)",
                      soft, want, _show(hard))  # fmt: skip
            soft = want
    else:
        _log.info("descriptor limit: %s (hard %s)", _show(soft), _show(hard))
    limit = NofileLimit(soft, hard, peers + OWN_DESCRIPTORS)
    if limit.low:
        _log.warning(
            "descriptor limit %d is below the %d the recorder may need (zmq max_connections "
            "%d in all, plus %d of its own): peers can use up its descriptors; raise "
            "LimitNOFILE (hard limit %s) or lower zmq.max_connections",
            soft, limit.needed, peers, OWN_DESCRIPTORS, _show(hard),
        )  # fmt: skip
    return limit


def private_descriptor_table() -> bool:
    """Give the calling thread a descriptor table of its own (``unshare(CLONE_FILES)``).

    Meant as a thread pool's ``initializer``; see the module docstring for
    what the thread may then do. Threads it starts share its table. Never
    raises (an initializer that raises breaks its pool): on failure it logs a
    warning and the thread goes on in the shared table. Returns whether the
    table is now private.
    """
    # A line logged here, before the unshare, opens any descriptor a log handler opens
    # lazily in the shared table, where every thread finds it (journald's socket is
    # opened by setup_logging itself, whatever the level: this line may be filtered out).
    _log.info("thread %s: a descriptor table of its own, so that peer connections "
              "cannot use up the descriptors it writes with", _thread_name())  # fmt: skip
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.unshare(_CLONE_FILES) != 0:
            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err))
    except (OSError, AttributeError) as exc:
        _log.warning("thread %s: no descriptor table of its own (%s): peers that hold "
                     "every descriptor can make its writes fail", _thread_name(), exc)  # fmt: skip
        return False
    return True


def _thread_name() -> str:
    return threading.current_thread().name
