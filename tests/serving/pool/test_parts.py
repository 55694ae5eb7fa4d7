"""The pool's parts alone: messages, the shared-memory slab and the arrays written into it (numbers and strings read
back the same), the port reservation, the frontends' default."""

from __future__ import annotations

import socket

import numpy as np
import pytest

from serving.pool.messages import Hello, Request, Response
from serving.pool.slab import (
    ALIGN,
    Slab,
    TensorRef,
    encode_arrays,
    encoded_bytes,
    read_arrays,
    segment_prefix,
    segments,
    slot_region,
    sweep,
    write_arrays,
)
from serving.pool.supervisor import needs_owner, reserve_port
from serving.server.flags import default_frontends, parse_args, server_config
from serving.server.handling.metrics import COMPUTE_INFER, HANDOFF, QUEUE, PhaseClock


def test_messages_round_trip_as_their_own_types():
    ref = TensorRef("images", "<f4", (2, 784), 0, 6272)
    request = Request(7, 3, "", "mnist", 1, "serving_default", 2, ("scores", "classes"), (ref,))
    back = Request.from_bytes(request.to_bytes())
    assert back == request and isinstance(back, Request)
    assert TensorRef._make(back.inputs[0]) == ref  # decoded refs: plain tuples of TensorRef's fields, in order
    response = Response(7, "INVALID_ARGUMENT", "bad", "seg", (ref,), (0.0, 1e-6))
    assert Response.from_bytes(memoryview(response.to_bytes())) == response
    assert Hello.from_bytes(Hello(1, "s", 64, 2).to_bytes()) == Hello(1, "s", 64, 2)


def test_a_slab_hands_out_its_slots_shares_them_and_is_removed():
    prefix = segment_prefix(999_999_001)
    slab = Slab(prefix, 0, slot_bytes=4096, slots=2)
    try:
        assert segments(prefix) == [slab.name]
        slots = {slab.acquire(), slab.acquire()}
        assert slots == {0, 1} and slab.acquire() is None
        slab.release(1)
        assert slab.acquire() == 1
        refs = write_arrays(slab.region(1), {"x": np.arange(6, dtype=np.int64).reshape(2, 3)})
        back = read_arrays(slot_region(slab.segment, 1, 4096), refs, copy=True)  # the owner's view of the slot
        assert back["x"].tolist() == [[0, 1, 2], [3, 4, 5]]
        with pytest.raises(ValueError, match="do not fit"):
            write_arrays(slab.region(0), {"big": np.zeros(2048, np.float32)})
    finally:
        slab.close()
    assert segments(prefix) == [] and sweep(prefix) == []


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


def test_a_remote_call_splits_into_the_owners_phases_and_the_hand_off():
    clock = PhaseClock()
    owner = [0.0] * 10
    owner[QUEUE], owner[COMPUTE_INFER] = 0.002, 0.003
    clock.started -= 0.010
    clock.last -= 0.010  # 10 ms since the last stamp, 5 of them the owner's
    clock.remote(owner)
    assert clock.durations[QUEUE] == 0.002 and clock.durations[COMPUTE_INFER] == 0.003
    assert clock.durations[HANDOFF] == pytest.approx(0.005, abs=5e-4)
    assert sum(clock.durations) == pytest.approx(clock.total_s())


def test_a_taken_port_is_refused_even_when_its_holder_allows_sharing():
    holder = socket.socket()
    holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)  # as gRPC Python's default binds
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    try:
        with pytest.raises(OSError, match=f"gRPC port {holder.getsockname()[1]} on 127.0.0.1 is already taken"):
            reserve_port("127.0.0.1", holder.getsockname()[1])
    finally:
        holder.close()
    free = reserve_port("127.0.0.1", 0)
    try:
        with pytest.raises(OSError, match="already taken"):  # a second pool cannot join the first one's port
            reserve_port("127.0.0.1", free.getsockname()[1])
    finally:
        free.close()


def test_frontends_default_to_the_environment_then_the_cores(monkeypatch):
    monkeypatch.setenv("SERVING_WORKERS", "3")
    assert default_frontends() == 3 and parse_args(["--model_base_path", "m"]).frontends == 3
    monkeypatch.delenv("SERVING_WORKERS")
    import os

    assert default_frontends() == len(os.sched_getaffinity(0))
    with pytest.raises(ValueError, match="at least 1"):
        parse_args(["--model_base_path", "m", "--workers", "0"])


def test_an_owner_runs_the_model_when_batching_or_a_gpu_or_asked():
    def owner(*flags: str) -> bool:
        return needs_owner(server_config(parse_args(["--model_base_path", "m", "--workers", "2", *flags])))

    assert not owner()
    assert owner("--enable_batching") and owner("--device", "gpu") and owner("--device_owner", "always")
