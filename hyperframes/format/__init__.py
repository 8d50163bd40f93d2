"""The file format: the bytes on disk, as pure functions and types. No I/O.

Everything here turns bytes into checked values and back, and nothing here
opens, reads or writes a file (:mod:`hyperframes.storage` does that; the
reader and writer join the two). It imports nothing of hyperframes but
:mod:`hyperframes.errors` and itself, so the rules of the format are tested
on plain bytes and arrays.

- :mod:`~hyperframes.format.layout`: the header, index, window table and block
  structs, flags and dtypes (docs/FORMAT.md, byte for byte);
- :mod:`~hyperframes.format.streams`: the stream table and file metadata;
- :mod:`~hyperframes.format.meta`: the JSON metadata block, decoded with bounds;
- :mod:`~hyperframes.format.windows`: the global window grid;
- :mod:`~hyperframes.format.codecs`: per-frame codecs (none, LZ4, ZSTD, blocks,
  Blosc2) with :mod:`~hyperframes.format.payload_blocks`,
  :mod:`~hyperframes.format.blosc2` and :mod:`~hyperframes.format.split` (one
  large frame's blocks on several threads);
- :mod:`~hyperframes.format.checks`: what a valid index entry, range, window block
  and payload is (shared by reader, verify and recovery);
  :mod:`~hyperframes.format.structure`: the whole index's rules (order, ranges,
  aliasing), proven fast or found and named;
- :mod:`~hyperframes.format.crc`: CRC32C; :mod:`~hyperframes.format.buffers`:
  64-byte-aligned memory;
- :mod:`~hyperframes.format.search`: index search; :mod:`~hyperframes.format.naming`:
  segment names; :mod:`~hyperframes.format.times`: times as people write them.
"""
