"""Inputs made for any model from its signature: dtypes, shapes, `-1` filling, seeds, and the user's .npz."""

from __future__ import annotations

import numpy as np
import pytest
from tensorflow.core.framework import types_pb2

from loadtest.load.inputs import InputError, InputOptions, model_inputs, parse_int_range, parse_shapes
from loadtest.load.outputs import check_grpc
from loadtest.load.signature import Signature
from serving.protocol.signatures import SignatureSpec, TensorSpec
from serving.protocol.tensors import from_numpy
from tests.support.cli import invoke


def spec(alias: str, dtype_enum: int, shape: tuple[int, ...]) -> TensorSpec:
    return TensorSpec(alias=alias, tensor_name=f"{alias}:0", dtype_enum=dtype_enum, shape=shape)


SIGNATURE = Signature("ranker", SignatureSpec("serving_default", "",
                      {"ids": spec("ids", types_pb2.DT_INT64, (-1, 8)),
                       "features": spec("features", types_pb2.DT_FLOAT, (-1, 4, -1)),
                       "flag": spec("flag", types_pb2.DT_BOOL, (-1,)),
                       "query": spec("query", types_pb2.DT_STRING, (-1,)),
                       "scale": spec("scale", types_pb2.DT_FLOAT, ())},
                      {"score": spec("score", types_pb2.DT_FLOAT, (-1,)),
                       "label": spec("label", types_pb2.DT_INT64, (-1,))}))


def test_random_inputs_have_the_signatures_dtypes_and_shapes_the_batch_filling_the_first_dim():
    request = model_inputs(SIGNATURE, InputOptions("random", seed=3)).request(0, 5)
    got = {name: (values.dtype, values.shape) for name, values in request.inputs.items()}
    assert got == {"ids": (np.dtype("int64"), (5, 8)), "features": (np.dtype("float32"), (5, 4, 1)),
                   "flag": (np.dtype(bool), (5,)), "query": (np.dtype(object), (5,)),
                   "scale": (np.dtype("float32"), ())}  # a fixed-shape input is sent as it is
    assert request.rows == 5 and request.expected_outputs == {}
    assert ((request.inputs["ids"] >= 0) & (request.inputs["ids"] < 100)).all()
    assert ((request.inputs["features"] >= 0) & (request.inputs["features"] < 1)).all()
    assert all(isinstance(v, bytes) and len(v) == 8 for v in request.inputs["query"])


def test_an_input_shape_fills_the_other_minus_one_dims_and_the_int_range_bounds_integers():
    inputs = model_inputs(SIGNATURE, InputOptions("random", int_range=(5, 7), shapes={"features": (4, 3)}))
    request = inputs.request(2, 3)
    assert request.inputs["features"].shape == (3, 4, 3)
    assert set(np.unique(request.inputs["ids"])) <= {5, 6}
    with pytest.raises(InputError, match="does not fit"):
        model_inputs(SIGNATURE, InputOptions("random", shapes={"features": (5, 3)}))  # 4 is fixed
    with pytest.raises(InputError, match="not an input"):
        model_inputs(SIGNATURE, InputOptions("random", shapes={"nope": (1,)}))


def test_random_inputs_are_reproducible_by_seed_and_zeros_are_zeros():
    def first(seed: int) -> np.ndarray:
        return model_inputs(SIGNATURE, InputOptions("random", seed=seed)).request(0, 4).inputs["features"]

    assert np.array_equal(first(1), first(1)) and not np.array_equal(first(1), first(2))
    zeros = model_inputs(SIGNATURE, InputOptions("zeros")).request(1, 2).inputs
    assert not zeros["ids"].any() and not zeros["flag"].any() and list(zeros["query"]) == [b"", b""]


def test_requests_cycle_through_every_row():
    inputs = model_inputs(SIGNATURE, InputOptions("random", rows=10))
    assert inputs.variants(3) == 4
    sent = np.concatenate([inputs.request(i, 3).inputs["ids"] for i in range(4)])
    assert {tuple(row) for row in sent} == {tuple(row) for row in inputs.batched["ids"]}


def test_an_npz_gives_rows_and_expected_outputs(tmp_path):
    path = tmp_path / "mine.npz"
    np.savez(path, ids=np.arange(16).reshape(2, 8), features=np.ones((2, 4, 2)), flag=np.array([True, False]),
             query=np.array([b"a", b"b"]), scale=np.float32(2), **{"expected:label": np.array([3, 4])})
    request = model_inputs(SIGNATURE, InputOptions(str(path))).request(1, 3)
    assert request.inputs["ids"].dtype == np.int64 and request.inputs["features"].dtype == np.float32
    assert list(request.inputs["ids"][:, 0]) == [8, 0, 8] and list(request.inputs["query"]) == [b"b", b"a", b"b"]
    assert list(request.expected_outputs["label"]) == [4, 3, 4]


def test_an_npz_without_an_input_says_which(tmp_path):
    path = tmp_path / "short.npz"
    np.savez(path, ids=np.zeros((2, 8)))
    with pytest.raises(InputError, match=r"lacks input\(s\) \['features', 'flag', 'query', 'scale'\]"):
        model_inputs(SIGNATURE, InputOptions(str(path)))


@pytest.mark.parametrize("content, message", [(b"not a zip", "not a readable .npz")])
def test_a_file_that_is_not_an_npz_is_one_clear_error(tmp_path, content, message):
    path = tmp_path / "bad.npz"
    path.write_bytes(content)
    with pytest.raises(InputError, match=message):
        model_inputs(SIGNATURE, InputOptions(str(path)))


def test_the_cli_refuses_a_bad_input_data_file_in_one_line(tmp_path):
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"not a zip")
    for data, message in ((bad, "not a readable .npz"), (tmp_path / "missing.npz", "not found")):
        done = invoke("loadtest", "--target", "127.0.0.1:1", "--model-name", "ranker", "--input-data", data,
                      "--no-report", "--results-dir", tmp_path)
        assert done.exit_code == 1 and message in done.stderr and len(done.stderr.strip().splitlines()) == 1
    done = invoke("loadtest", "--target", "127.0.0.1:1", "--model-name", "ranker", "--int-range", "9,1")
    assert done.exit_code == 1 and "HI must be above LO" in done.stderr


def test_int_range_and_shape_flags_parse():
    assert parse_int_range("0,100") == (0, 100) and parse_shapes(("a:4,4", "b:2")) == {"a": (4, 4), "b": (2,)}
    assert parse_shapes("a:1;b:3") == {"a": (1,), "b": (3,)}
    for bad in ("a", "a:0", "a:x"):
        with pytest.raises(InputError):
            parse_shapes((bad,))


def test_the_outputs_check_judges_names_dtypes_shapes_and_expected_values():
    outputs = {"score": from_numpy(np.array([0.5, 1.0], np.float32)), "label": from_numpy(np.array([1, 2]))}
    assert check_grpc(outputs, SIGNATURE, 2, {}).status == "OK"
    close = check_grpc(outputs, SIGNATURE, 2, {"score": np.array([0.500001, 2.0], np.float32),
                                                "label": np.array([1, 2])})
    assert (close.status, close.correct, close.checked) == ("OK", 1, 2)  # the second row's score differs
    assert check_grpc(outputs, SIGNATURE, 3, {}).error == "output score has shape [2], expected [3]"
    assert "the signature says int64" in check_grpc({**outputs, "label": from_numpy(np.array([1.0, 2.0]))},
                                                    SIGNATURE, 2, {}).error
    assert check_grpc({"score": outputs["score"]}, SIGNATURE, 2, {}).status == "WRONG_ANSWER"
