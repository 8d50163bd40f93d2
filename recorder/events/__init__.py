"""Events in the recorder: a message, a rule or ``hyperframes mark``, and what each keeps.

- :mod:`~hyperframes.recorder.events.config`: the ``events:`` section of the YAML;
- :mod:`~hyperframes.recorder.events.intake`: events taken on the event loop and
  written on the writer thread;
- :mod:`~hyperframes.recorder.events.rules`: events raised from sensor values;
- :mod:`~hyperframes.recorder.events.control`: the control socket ``mark`` talks to;
- :mod:`~hyperframes.recorder.events.log`: the durable event log beside the segments;
- :mod:`~hyperframes.recorder.events.retention`: which segments events protect;
- :mod:`~hyperframes.recorder.events.clips`: which event clips are due, their names, their
  budget (cut by :mod:`hyperframes.recorder.upload.clipper`);
- :mod:`~hyperframes.recorder.events.stats`: their counts.

The event itself (its fields, JSON, protection windows) is the library's:
:mod:`hyperframes.events`.
"""
