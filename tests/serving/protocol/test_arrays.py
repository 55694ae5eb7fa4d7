"""serving/protocol/arrays.py: arrays written into a buffer read back the same, numbers and strings."""

from __future__ import annotations

import numpy as np
import pytest

from serving.protocol.arrays import (
    ALIGN,
    TensorRef,
    encode_arrays,
    encoded_bytes,
    read_arrays,
    write_arrays,
)


def _arrays() -> dict[str, np.ndarray]:
    return {"x": np.arange(6, dtype=np.int64).reshape(2, 3), "s": np.array([b"ab", b"", b"c\x00d"], dtype=object),
            "f": np.float32(2.5) * np.ones((1,), np.float32)}


def test_numbers_and_strings_round_trip_each_at_an_aligned_offset():
    buffer = memoryview(bytearray(4096))
    arrays = _arrays()
    refs = write_arrays(buffer, arrays)
    assert encoded_bytes(encode_arrays(arrays)) == 64 * 3
    assert [r.offset for r in refs] == [0, ALIGN, 2 * ALIGN]
    assert refs[0] == TensorRef("x", "<i8", (2, 3), 0, 48) and refs[1] == TensorRef("s", "O", (3,), 64, 17)
    back = read_arrays(buffer, refs, copy=True)
    assert back["x"].tolist() == arrays["x"].tolist() and back["s"].tolist() == [b"ab", b"", b"c\x00d"]
    assert back["f"].dtype == np.float32 and back["f"].tolist() == [2.5]


def test_plain_tuples_of_the_refs_fields_read_as_views_or_copies():
    buffer = memoryview(bytearray(256))
    refs = tuple(map(tuple, write_arrays(buffer, {"x": np.arange(4, dtype=np.float32)})))  # as a decoded message
    view, copy = read_arrays(buffer, refs, copy=False)["x"], read_arrays(buffer, refs, copy=True)["x"]  # type: ignore[arg-type]
    buffer[0:4] = np.float32(9).tobytes()
    assert view.tolist() == [9, 1, 2, 3] and copy.tolist() == [0, 1, 2, 3]
    del view


def test_arrays_that_do_not_fit_are_refused():
    with pytest.raises(ValueError, match="8192 bytes do not fit in 4096"):
        write_arrays(memoryview(bytearray(4096)), {"big": np.zeros(2048, np.float32)})
