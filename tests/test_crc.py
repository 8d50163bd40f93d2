"""CRC32C: the two libraries _crc may choose give the same value, the check value included."""

from __future__ import annotations

import crc32c as icrar
import numpy as np
import pytest
from fastcrc import crc32 as fast

from hyperframes.format import crc as _crc


@pytest.mark.parametrize("impl", [icrar.crc32c, fast.iscsi, _crc.crc32c])
def test_check_value_and_continuation(impl: object) -> None:
    f = impl  # type: ignore[assignment]
    assert f(b"123456789", 0) == 0xE3069283  # the catalogue's check value for CRC-32/ISCSI
    assert f(b"", 0) == 0
    assert f(b"56789", f(b"1234", 0)) == 0xE3069283  # continues from a previous value


def test_both_libraries_agree_on_every_size_and_buffer_kind() -> None:
    rng = np.random.default_rng(5)
    for n in (1, 3, 15, 16, 17, 63, 64, 255, 4096, 16383, 16384, 65537, 1 << 20):
        a = rng.integers(0, 256, n, dtype=np.uint8)
        want = icrar.crc32c(a.tobytes())
        assert fast.iscsi(a, 0) == want, n
        assert _crc.crc32c(memoryview(a.tobytes())) == want
        assert _crc.crc32c(a[n // 3 :], _crc.crc32c(a[: n // 3])) == want
    floats = np.arange(1000, dtype=np.float32)
    assert _crc.crc32c(floats) == icrar.crc32c(floats.tobytes())


def test_the_choice_follows_the_cpu() -> None:
    assert ("fastcrc" if _crc.carryless_multiply() else "crc32c") == _crc.IMPLEMENTATION
