"""Block notes: what an MCAP export keeps of a hyperframe file's blocks, and how an import
rebuilds them.

An export writes one ``hyperframes.Block`` message (JSON, topic
``/hyperframes/blocks``) per window block: the window, the streams missing
there, and every frame stored in the block, in write order, as (topic, log
time, sequence) with its flags, receive time and duration. A frame's message
is found by that triple, so a reader of the MCAP file alone gets back which
block held which frame (late frames sit in a later block than their window,
quarantined ones in the block being written when they arrived), the LATE,
QUARANTINED, KEYFRAME and HW_TIMESTAMP flags, and the missing-stream notes.

:func:`file_block_notes` builds the notes of one file (numpy on the reader's
tables, no payload read); :class:`BlockAssembler` (sans-IO) is the import
side: it holds frames until the note of their block has arrived and all its
frames with it, then hands back the block as a window to write.
"""

from __future__ import annotations

import json
from collections import defaultdict, deque
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

import numpy as np

from hyperframes.format.windows import window_end, window_start
from hyperframes.mcap import messages as msg
from hyperframes.mcap.errors import MessageDecodeError
from hyperframes.mcap.schemas import flag_names
from hyperframes.mcap.windowing import PendingFrame, ReadyWindow
from hyperframes.reader import HyperframeReader

__all__ = [
    "FrameNote",
    "BlockNote",
    "FrameKey",
    "quarantine_log_time",
    "file_block_notes",
    "BlockAssembler",
]

FrameKey = tuple[str, int, int]  # topic, log time, sequence: how a note names a message


@dataclass(frozen=True, slots=True)
class FrameNote:
    """One frame of a block: the message that carries it and what the message cannot say."""

    topic: str
    log_time: int
    sequence: int
    flags: int
    receive_ns: int = 0
    duration_ns: int = 0

    @property
    def key(self) -> FrameKey:
        """(topic, log time, sequence) of the frame's message."""
        return self.topic, self.log_time, self.sequence


@dataclass(frozen=True, slots=True)
class BlockNote:
    """One window block of a hyperframe file (a ``hyperframes.Block`` message)."""

    window_id: int
    window_ns: int
    file: str
    missing: tuple[str, ...]
    frames: tuple[FrameNote, ...]

    @property
    def log_time(self) -> int:
        """The note's log time: the end of its window (when the block was complete)."""
        return window_end(self.window_id, self.window_ns)

    def encode(self) -> bytes:
        """The ``hyperframes.Block`` JSON message (times as ``{"sec", "nsec"}``)."""
        return msg.encode_json(
            {
                "timestamp": msg.json_timestamp(max(self.log_time, 0)),
                "window_id": self.window_id,
                "window_ns": self.window_ns,
                "file": self.file,
                "missing": list(self.missing),
                "frames": [
                    {
                        "topic": f.topic,
                        "log_time": msg.json_timestamp(f.log_time),
                        "sequence": f.sequence,
                        "flags": f.flags,
                        "flag_names": flag_names(f.flags),
                        "receive": msg.json_timestamp(f.receive_ns),
                        "duration_ns": f.duration_ns,
                    }
                    for f in self.frames
                ],
            }
        )

    @classmethod
    def decode(cls, data: bytes | memoryview) -> BlockNote:
        """Parse a ``hyperframes.Block`` message (MessageDecodeError when it is not one)."""
        try:
            doc = json.loads(bytes(data))
            frames = tuple(
                FrameNote(
                    str(f["topic"]),
                    _ns(f["log_time"]),
                    int(f["sequence"]),
                    int(f["flags"]),
                    _ns(f.get("receive", {"sec": 0, "nsec": 0})),
                    int(f.get("duration_ns", 0)),
                )
                for f in doc["frames"]
            )
            return cls(
                int(doc["window_id"]),
                int(doc["window_ns"]),
                str(doc.get("file", "")),
                tuple(str(m) for m in doc.get("missing", [])),
                frames,
            )
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise MessageDecodeError(f"hyperframes.Block: {type(exc).__name__}: {exc}") from None


def _ns(t: object) -> int:
    if not isinstance(t, dict) or not isinstance(t.get("sec"), int) or not isinstance(
        t.get("nsec"), int
    ):  # fmt: skip
        raise ValueError(f"expected {{sec, nsec}}, got {t!r}")
    return int(t["sec"]) * 1_000_000_000 + int(t["nsec"])


def quarantine_log_time(receive_ns: int, window_id: int, window_ns: int) -> int:
    """A quarantined frame's log time: when it arrived, else the end of its block's window."""
    return receive_ns if receive_ns > 0 else window_end(window_id, window_ns)


def _block_rows(windows: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """The window-table row of the block that stores each payload offset."""
    return np.searchsorted(windows["payload_offset"], offsets, "right") - 1


def file_block_notes(
    reader: HyperframeReader,
    topics: Mapping[int, str],
    quarantine_topics: Mapping[int, str],
    lo: int,
    hi: int,
) -> Iterator[BlockNote]:
    """The block notes of one file in window order, for the streams in ``topics`` (stream
    id -> topic); built one block at a time (memory: the index arrays, not a note per frame).

    A frame is listed when it is exported: indexed frames stamped in
    ``[lo, hi]``, quarantined ones (on ``quarantine_topics``) whose log time
    (:func:`quarantine_log_time`) is in ``[lo, hi]``. A block is written when
    its window meets ``[lo, hi]`` or it lists a frame.
    """
    windows = reader.window_table
    if len(windows) == 0:
        return
    L = reader.window_ns
    ids = np.asarray(sorted(topics), np.int64)
    idx, aux = reader.index, reader.aux()
    sel = np.isin(idx["stream_id"], ids)
    sel &= (idx["timestamp_ns"] >= max(lo, 0)) & (idx["timestamp_ns"] <= max(hi, 0))
    pos = np.flatnonzero(sel)
    rows = _block_rows(windows, idx["offset"][pos])
    order = np.lexsort((idx["offset"][pos], rows))  # by block, then write order
    pos, rows = pos[order], rows[order]
    starts = np.searchsorted(rows, np.arange(len(windows) + 1), "left").tolist()
    quarantined: dict[int, list[tuple[int, FrameNote]]] = defaultdict(list)
    q = reader.quarantine()
    for row, entry in zip(_block_rows(windows, q["offset"]).tolist(), q, strict=True):
        sid = int(entry["stream_id"])
        if sid not in quarantine_topics or row < 0:
            continue
        rx = int(entry["receive_ns"])
        t = quarantine_log_time(rx, int(windows["window_id"][row]), L)
        if lo <= t <= hi:
            note = FrameNote(quarantine_topics[sid], t, int(entry["stream_index"]),
                             int(entry["flags"]) & 0xF, rx, int(entry["duration_ns"]))  # fmt: skip
            quarantined[row].append((int(entry["offset"]), note))
    names = {sid: reader.stream(sid).name for sid in topics}
    for row, wid in enumerate(windows["window_id"].tolist()):
        at = pos[starts[row] : starts[row + 1]]
        listed = _frame_notes(idx[at], aux[at] if len(aux) else None, topics)
        if quarantined.get(row):
            listed = sorted(listed + quarantined[row], key=lambda pair: pair[0])
        if not listed and (window_end(wid, L) < lo or window_start(wid, L) >= hi):
            continue
        missing = tuple(names[s] for s in reader.missing.get(wid, ()) if s in names)
        yield BlockNote(wid, L, str(reader.path), missing, tuple(n for _off, n in listed))


def _frame_notes(
    entries: np.ndarray, aux: np.ndarray | None, topics: Mapping[int, str]
) -> list[tuple[int, FrameNote]]:
    """(payload offset, note) of index entries (in write order) and their aux rows."""
    n = len(entries)
    receive = aux["receive_ns"].tolist() if aux is not None else [0] * n
    duration = aux["duration_ns"].tolist() if aux is not None else [0] * n
    return [
        (off, FrameNote(topics[sid], ts, seq, flags & 0xF, rx, du))
        for sid, flags, seq, ts, off, rx, du in zip(
            entries["stream_id"].tolist(), entries["flags"].tolist(),
            entries["stream_index"].tolist(), entries["timestamp_ns"].tolist(),
            entries["offset"].tolist(), receive, duration, strict=True,
        )
    ]  # fmt: skip


@dataclass(slots=True)
class _Waiting:
    note: BlockNote
    frames: list[FrameNote]  # the note's frames on imported topics


@dataclass(slots=True)
class BlockAssembler:
    """Rebuilds the blocks of an export from frames and notes arriving in any order.

    ``streams`` maps an imported topic to its stream id and ``names`` a
    stream name (as the notes spell it) to the stream id. Feed every imported
    message as :meth:`add_frame` and every note as :meth:`add_note`; both
    return the blocks that are complete, as windows, in note order. Frames
    that no note lists stay in :attr:`unlisted` at :meth:`finish`; listed
    frames that never came are counted in :attr:`not_found` (per topic).
    """

    streams: Mapping[str, int]
    names: Mapping[str, int]
    unlisted: list[tuple[str, PendingFrame]] = field(default_factory=list)
    not_found: dict[str, int] = field(default_factory=dict)
    late_frames: int = 0
    _frames: dict[FrameKey, deque[PendingFrame]] = field(default_factory=dict)
    _queue: deque[_Waiting] = field(default_factory=deque)
    _last_window: int | None = None

    def add_frame(self, key: FrameKey, frame: PendingFrame) -> list[ReadyWindow]:
        """A frame of an imported topic, named by its message's (topic, log time, sequence)."""
        self._frames.setdefault(key, deque()).append(frame)
        return self._ready(False)

    def add_note(self, note: BlockNote) -> list[ReadyWindow]:
        """A ``hyperframes.Block`` note."""
        mine = [f for f in note.frames if f.topic in self.streams]
        if self._queue and self._queue[-1].note.window_id == note.window_id:  # two files
            last = self._queue[-1]
            merged = BlockNote(note.window_id, note.window_ns, last.note.file,
                               tuple(dict.fromkeys(last.note.missing + note.missing)),
                               last.note.frames + note.frames)  # fmt: skip
            self._queue[-1] = _Waiting(merged, last.frames + mine)
        else:
            self._queue.append(_Waiting(note, mine))
        return self._ready(False)

    def finish(self) -> list[ReadyWindow]:
        """The blocks still waiting, with the frames that came; what is left is unlisted."""
        ready = self._ready(True)
        for (topic, _t, _s), frames in self._frames.items():
            self.unlisted += [(topic, f) for f in frames]
        self._frames.clear()
        return ready

    def _complete(self, w: _Waiting) -> bool:
        need: dict[FrameKey, int] = {}
        for f in w.frames:
            need[f.key] = need.get(f.key, 0) + 1
        return all(len(self._frames.get(k, ())) >= n for k, n in need.items())

    def _ready(self, final: bool) -> list[ReadyWindow]:
        out = []
        while self._queue and (final or self._complete(self._queue[0])):
            w = self._queue.popleft()
            wid = w.note.window_id
            if self._last_window is not None and wid <= self._last_window:
                raise MessageDecodeError(
                    f"hyperframes.Block: window {wid} after window {self._last_window}"
                )
            self._last_window = wid
            frames = []
            for note in w.frames:
                queue = self._frames.get(note.key)
                if not queue:
                    self.not_found[note.topic] = self.not_found.get(note.topic, 0) + 1
                    continue
                f = queue.popleft()
                if not queue:
                    del self._frames[note.key]
                frames.append(
                    PendingFrame(
                        f.stream_id,
                        f.timestamp_ns,
                        f.payload,
                        note.flags,
                        note.sequence,
                        note.receive_ns,
                        note.duration_ns,
                    )
                )
                self.late_frames += bool(note.flags & 4)
            missing = sorted({self.names[m] for m in w.note.missing if m in self.names})
            out.append(ReadyWindow(wid, tuple(frames), tuple(missing)))
        return out
