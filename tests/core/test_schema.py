"""kda/core/schema.py: every error names the file (where), the key path and what was expected."""
import pytest

from kda.core.errors import KdaError
from kda.core.schema import Field, ListOf, MapOf, one_of, positive, validate

WHERE = "some/dir/config.toml"

SPEC = {
    "task": Field({
        "name": Field(str, doc="folder name"),
        "trials": Field(int, check=positive),
        "ratio": Field(float),
        "mode": Field(str, required=False, default="hot", check=one_of("hot", "cold")),
    }),
    "items": Field(ListOf({"path": Field(str), "n": Field(int)})),
    "tol": Field(MapOf({"atol": Field(float)}), required=False, default={}),
    "maybe": Field(({"d": Field(str)}, type(None)), required=False),
}


def good():
    return {"task": {"name": "t", "trials": 3, "ratio": 2}, "items": [{"path": "a", "n": 1}],
            "tol": {"bf16": {"atol": 1}}}


def err(value, kind=SPEC) -> str:
    with pytest.raises(KdaError) as e:
        validate(value, kind, WHERE)
    msg = str(e.value)
    assert msg.startswith(WHERE + ":"), msg
    return msg


def test_valid_fills_defaults_and_coerces_int_to_float():
    out = validate(good(), SPEC, WHERE)
    assert out["task"]["mode"] == "hot"
    assert out["task"]["ratio"] == 2.0 and isinstance(out["task"]["ratio"], float)
    assert out["tol"]["bf16"]["atol"] == 1.0 and isinstance(out["tol"]["bf16"]["atol"], float)
    assert out["maybe"] is None
    assert out["items"] == [{"path": "a", "n": 1}]


def test_missing_nested_key_names_path_expected_type_and_doc():
    v = good()
    del v["task"]["name"]
    msg = err(v)
    assert "missing key 'task.name'" in msg
    assert "a string" in msg and "folder name" in msg


def test_missing_top_level_section():
    v = good()
    del v["items"]
    msg = err(v)
    assert "missing key 'items'" in msg and "a list of a table" in msg


def test_unknown_key_names_full_path_and_known_keys():
    v = good()
    v["task"]["nmae"] = "x"
    msg = err(v)
    assert "unknown key 'task.nmae'" in msg
    for known in ("mode", "name", "ratio", "trials"):
        assert known in msg


def test_unknown_top_level_key():
    v = good()
    v["extra"] = 1
    assert "unknown key 'extra'" in err(v)


@pytest.mark.parametrize("bad, expected", [("3", "an integer"), (True, "an integer"), (2.5, "an integer")])
def test_wrong_scalar_type(bad, expected):
    v = good()
    v["task"]["trials"] = bad
    msg = err(v)
    assert "task.trials must be " + expected in msg
    assert repr(bad) in msg


def test_bool_is_not_a_number():
    v = good()
    v["task"]["ratio"] = False
    assert "task.ratio must be a number" in err(v)


def test_list_item_path_has_index():
    v = good()
    v["items"].append({"path": "b", "n": "two"})
    assert "items[1].n must be an integer" in err(v)


def test_list_item_unknown_key_has_index():
    v = good()
    v["items"][0]["zzz"] = 1
    assert "unknown key 'items[0].zzz'" in err(v)


def test_list_expected_got_dict():
    v = good()
    v["items"] = {"path": "a"}
    msg = err(v)
    assert "items must be a list of a table" in msg and "got dict" in msg


def test_map_value_path_names_the_map_key():
    v = good()
    v["tol"]["fp16"] = {"atol": "x"}
    assert "tol.fp16.atol must be a number" in err(v)


def test_map_expected_table():
    v = good()
    v["tol"] = [1]
    assert "tol must be a table of a table" in err(v)


def test_section_must_be_table():
    v = good()
    v["task"] = "oops"
    msg = err(v)
    assert "task must be a table" in msg and "got str" in msg


def test_check_failure_names_key_and_problem():
    v = good()
    v["task"]["trials"] = 0
    msg = err(v)
    assert "key 'task.trials'" in msg and "positive" in msg
    v = good()
    v["task"]["mode"] = "warm"
    msg = err(v)
    assert "key 'task.mode'" in msg and "hot, cold" in msg and "'warm'" in msg


def test_union_dict_or_none():
    v = good()
    v["maybe"] = None
    assert validate(v, SPEC, WHERE)["maybe"] is None
    v["maybe"] = {"d": "x"}
    assert validate(v, SPEC, WHERE)["maybe"] == {"d": "x"}
    v["maybe"] = 5
    msg = err(v)
    assert "maybe must be a table or null" in msg and "5" in msg
    v["maybe"] = {"d": 3}
    assert "maybe.d must be a string" in err(v)
    v["maybe"] = {"e": "x"}
    assert "unknown key 'maybe.e'" in err(v)


def test_union_list_or_none():
    kind = {"stride": Field((ListOf(int), type(None)), required=False)}
    assert validate({"stride": [1, 2]}, kind, WHERE) == {"stride": [1, 2]}
    assert validate({"stride": None}, kind, WHERE) == {"stride": None}
    assert "stride[1] must be an integer" in err({"stride": [1, "2"]}, kind)
    assert "stride must be a list of an integer or null" in err({"stride": 3}, kind)


def test_scalar_union():
    kind = MapOf((int, float, bool, str, type(None)))
    assert validate({"a": 1, "b": 1.5, "c": True, "d": "s", "e": None}, kind, WHERE)["c"] is True
    assert "x.y must be an integer or a number" in err({"x": {"y": [1]}}, {"x": Field(MapOf((int, float)))})
    msg = err({"y": [1]}, MapOf((int, float)))
    assert "y must be an integer or a number" in msg


def test_top_level_label():
    msg = err([1], {"a": Field(int)})
    assert "(top level) must be a table" in msg
