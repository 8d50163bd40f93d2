"""Pictures of a recording: ``hyperframes plot`` (a timeline) and ``hyperframes show``
(a contact sheet of one window).

- :mod:`~hyperframes.viz.facts`: a file's tables as arrays (index, aux, quarantine; no payload);
- :mod:`~hyperframes.viz.events`: what went wrong, inferred from them (gaps, drops, late,
  quarantined, missing and absent windows, stale periods); also the annotation topic of
  ``hyperframes export``;
- :mod:`~hyperframes.viz.timeline`, :mod:`~hyperframes.viz.contact`: the content of the
  pictures as plain dataclasses (pure, tested directly);
- :mod:`~hyperframes.viz.plot`, :mod:`~hyperframes.viz.show`: drawing them with matplotlib,
  the ``viz`` extra (``pip install 'hyperframes-sensors[viz]'``), imported only there.
"""

from hyperframes.viz.errors import (
    EmptyRangeError,
    IncompatibleFilesError,
    MissingExtraError,
    VizError,
)
from hyperframes.viz.events import Event, recording_events
from hyperframes.viz.facts import RecordingFacts, facts_from_reader, merge_facts
from hyperframes.viz.timeline import Timeline, build_timeline

__all__ = [
    "RecordingFacts",
    "facts_from_reader",
    "merge_facts",
    "Event",
    "recording_events",
    "Timeline",
    "build_timeline",
    "VizError",
    "EmptyRangeError",
    "IncompatibleFilesError",
    "MissingExtraError",
]
