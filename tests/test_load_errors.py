"""Every bad-input rule of the loader: the message names the field and the record."""
import copy
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tilemem.errors import ReportError
from tilemem.load import load_report, save_report

SEED = json.loads((Path(__file__).parents[1] / "examples" / "seed.json").read_text())


def write(tmp_path, obj, name="bad.json"):
    p = tmp_path / name
    p.write_text(obj if isinstance(obj, str) else json.dumps(obj))
    return p


def error_of(tmp_path, obj) -> ReportError:
    p = write(tmp_path, obj)
    with pytest.raises(ReportError) as e:
        load_report(p)
    assert str(p) in str(e.value)
    return e.value


def seed():
    return copy.deepcopy(SEED)


def var_info(doc, var):
    return next(v for v in doc["vars"] if v["var"] == var)["info"]


def test_not_json(tmp_path):
    e = error_of(tmp_path, "this is not json")
    assert "neither JSON" in str(e)


def test_truncated(tmp_path):
    text = json.dumps(SEED)
    e = error_of(tmp_path, text[: len(text) // 2])
    assert "truncated" in str(e)


def test_empty_file(tmp_path):
    e = error_of(tmp_path, "")
    assert "the file is empty" in str(e)


def test_wrong_top_level_type(tmp_path):
    e = error_of(tmp_path, [1, 2, 3])
    assert "Expected `object`, got `array`" in str(e)


def test_missing_top_level_key(tmp_path):
    d = seed()
    del d["numTiles"]
    assert "numTiles" in str(error_of(tmp_path, d))


def test_missing_var_key(tmp_path):
    d = seed()
    del var_info(d, 1242)["sizeBytes"]
    e = error_of(tmp_path, d)
    assert e.var == 1242 and "sizeBytes" in str(e) and "var 1242" in str(e)


def test_missing_category(tmp_path):
    d = seed()
    del var_info(d, 9)["category"]
    e = error_of(tmp_path, d)
    assert e.var == 9 and "category" in str(e)


def test_wrong_type(tmp_path):
    d = seed()
    var_info(d, 6)["tile"] = "zero"
    e = error_of(tmp_path, d)
    assert e.var == 6 and "info.tile" in e.field and "Expected `int`" in str(e)


@pytest.mark.parametrize("literal", ["NaN", "1e400", "99999999999999999999999", "1.5"])
def test_nan_and_huge_numbers(tmp_path, literal):
    text = json.dumps(seed()).replace('"sizeBytes": 352', f'"sizeBytes": {literal}', 1)
    assert literal in text
    e = error_of(tmp_path, text)
    assert "sizeBytes" in str(e) or "JSON" in str(e)
    if literal != "NaN":  # NaN is not JSON at all: the parser names the byte instead
        assert e.var == 2517


def test_negative_size(tmp_path):
    d = seed()
    var_info(d, 1301)["sizeBytes"] = -16
    e = error_of(tmp_path, d)
    assert e.var == 1301 and e.tile == 0 and "sizeBytes" in e.field and "negative" in str(e)


def test_absurd_size(tmp_path):
    d = seed()
    var_info(d, 1301)["sizeBytes"] = 1 << 40
    e = error_of(tmp_path, d)
    assert e.var == 1301 and "absurd" in str(e)


@pytest.mark.parametrize("alignment", [0, 3, 12, -8])
def test_alignment_not_power_of_two(tmp_path, alignment):
    d = seed()
    var_info(d, 8)["alignment"] = alignment
    e = error_of(tmp_path, d)
    assert e.var == 8 and "alignment" in e.field and "power of two" in str(e)


def test_negative_offset(tmp_path):
    d = seed()
    var_info(d, 8)["offset"] = -4
    e = error_of(tmp_path, d)
    assert e.var == 8 and "offset" in e.field


def test_tile_outside(tmp_path):
    d = seed()
    var_info(d, 8)["tile"] = 7
    e = error_of(tmp_path, d)
    assert e.var == 8 and "numTiles" in str(e)


def test_class_outside_interference(tmp_path):
    d = seed()
    var_info(d, 8)["equivalenceClass"] = 36
    e = error_of(tmp_path, d)
    assert e.var == 8 and "equivalenceClass" in e.field and "36" in str(e)


def test_interference_names_unknown_class(tmp_path):
    d = seed()
    d["equivalenceClassInterference"][5] = [99]
    e = error_of(tmp_path, d)
    assert e.eq_class == 5 and "equivalenceClassInterference[5]" in str(e)


def test_interference_wrong_type(tmp_path):
    d = seed()
    d["equivalenceClassInterference"][3] = ["a"]
    e = error_of(tmp_path, d)
    assert e.eq_class == 3


def test_constraint_names_unknown_var(tmp_path):
    d = seed()
    var_info(d, 1242)["elementConstraints"] = [424242]
    e = error_of(tmp_path, d)
    assert e.var == 1242 and "elementConstraints" in e.field


def test_constraint_across_tiles(tmp_path):
    d = seed()
    var_info(d, 1271)["regionConstraints"] = [1301]  # 1301 is on tile 0
    e = error_of(tmp_path, d)
    assert e.var == 1271 and "regionConstraints" in e.field and "tile" in str(e)


def test_duplicate_var_ids(tmp_path):
    d = seed()
    d["vars"][3]["var"] = d["vars"][2]["var"]
    e = error_of(tmp_path, d)
    assert "duplicate var id" in str(e) and e.var == d["vars"][2]["var"]


def test_allocation_order_names_var_of_other_tile(tmp_path):
    d = seed()
    d["allocationOrderByTile"][0].append(2519)  # a tile-1 variable
    e = error_of(tmp_path, d)
    assert e.var == 2519 and e.tile == 0 and "allocationOrderByTile[0]" in e.field


def test_allocation_order_names_unknown_var(tmp_path):
    d = seed()
    d["allocationOrderByTile"][1].append(5555)
    e = error_of(tmp_path, d)
    assert e.tile == 1 and "unknown var" in str(e)


def test_allocation_order_too_many_tiles(tmp_path):
    d = seed()
    d["allocationOrderByTile"].append([])
    assert "numTiles" in str(error_of(tmp_path, d))


@pytest.mark.parametrize("offsets, needle", [
    ([16384, 32768], "start at 0"),
    ([0, 32768, 16384], "must increase"),
    ([0, 16384, 16384], "must increase"),
    ([0, 300000], "not below tileMemory"),
])
def test_bad_element_offsets(tmp_path, offsets, needle):
    d = seed()
    d["targetMemoryInfo"]["memoryElementOffsets"] = offsets
    e = error_of(tmp_path, d)
    assert needle in str(e) and "memoryElementOffsets" in e.field


def test_interleaved_start_beyond_memory(tmp_path):
    d = seed()
    d["targetMemoryInfo"]["interleavedMemoryStart"] = 262145
    e = error_of(tmp_path, d)
    assert "interleavedMemoryStart" in e.field


@pytest.mark.parametrize("key, value", [("tileMemory", 0), ("tileMemory", -5),
                                        ("numTiles", 0), ("numTiles", -1)])
def test_non_positive_geometry(tmp_path, key, value):
    d = seed()
    if key == "numTiles":
        d["numTiles"] = value
    else:
        d["targetMemoryInfo"][key] = value
    e = error_of(tmp_path, d)
    assert key in e.field


def test_class_steps_malformed(tmp_path):
    d = seed()
    d["equivalenceClassSteps"] = [[0, 1]] * 35 + [[3]]
    e = error_of(tmp_path, d)
    assert e.eq_class == 35


def test_variable_bigger_than_tile_loads(tmp_path):
    d = seed()
    var_info(d, 6)["sizeBytes"] = 1 << 20  # four times tileMemory: an OOM tile, not an error
    r = load_report(write(tmp_path, d))
    assert int(r.size[r.rows_of_vars([6])[0]]) == 1 << 20


def test_unallocated_variable_needs_no_other_fields(tmp_path):
    d = seed()
    d["vars"].append({"var": 9999, "info": {"allocated": False}})
    r = load_report(write(tmp_path, d))
    row = r.rows_of_vars([9999])[0]
    assert not r.allocated[row] and len(r.tile_rows(0)) == 8


def test_obsolete_and_unknown_fields_are_ignored(tmp_path):
    d = seed()
    d["equalAddressConstraints"] = [[1, 2]]
    d["somethingNewer"] = {"x": 1}
    assert load_report(write(tmp_path, d)).num_vars == len(SEED["vars"])


# ---- Cap'n Proto ----------------------------------------------------------------------------

def test_capnp_garbage(tmp_path):
    p = tmp_path / "bad.capnp"
    p.write_bytes(b"\x00\x01garbage" * 10)
    with pytest.raises(ReportError) as e:
        load_report(p)
    assert str(p) in str(e.value)


def test_capnp_truncated(tmp_path):
    good = tmp_path / "good.capnp"
    save_report(load_report(write(tmp_path, SEED)), good)
    data = good.read_bytes()
    p = tmp_path / "cut.capnp"
    p.write_bytes(data[: len(data) // 2])
    with pytest.raises(ReportError) as e:
        load_report(p)
    assert str(p) in str(e.value)


def test_capnp_hostile_traversal(tmp_path):
    """A message whose pointers claim far more data than the file holds is refused."""
    import struct

    p = tmp_path / "hostile.capnp"
    # one segment of 2 words: a root struct pointer to a list claiming 2^29 - 1 words
    seg = struct.pack("<Q", (0 << 2) | (1 << 48))  # struct ptr: 0 data words, 1 pointer
    seg += struct.pack("<Q", 1 | (0 << 2) | (7 << 32) | ((1 << 29) - 1) << 35)
    p.write_bytes(struct.pack("<II", 0, len(seg) // 8) + seg)
    with pytest.raises(ReportError):
        load_report(p)


# ---- CLI ------------------------------------------------------------------------------------

def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "tilemem", *args], capture_output=True,
                          text=True, timeout=120)


def test_cli_bad_input_one_line_exit_2_nothing_written(tmp_path):
    d = seed()
    var_info(d, 1301)["alignment"] = 3
    bad = write(tmp_path, d)
    out = tmp_path / "out.capnp"
    res = run_cli("convert", str(bad), str(out))
    assert res.returncode == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in res.stderr
    assert lines[0].startswith(f"tilemem: error: {bad}: alignment must be a power of two")
    assert "var 1301" in lines[0] and "tile 0" in lines[0]
    assert not out.exists() and list(tmp_path.iterdir()) == [bad]


def test_cli_missing_file():
    res = run_cli("info", "/nonexistent/vars.json")
    assert res.returncode == 2 and res.stderr.startswith("tilemem: error: /nonexistent/vars.json")


def test_json_too_large_says_its_amounts_in_a_unit_that_shows_them(tmp_path, monkeypatch):
    # a small machine's cap is said in MB or bytes, never "0.0 GB" (the refusal must say
    # why: how much reading needs against how much there is)
    from tilemem.load import JSON_BYTES_PER_FILE_BYTE, _json_fits

    monkeypatch.setenv("TILEMEM_MEMORY_AVAILABLE", "3000000")
    size = 2_500_000
    need = int(size * JSON_BYTES_PER_FILE_BYTE)
    with pytest.raises(ReportError) as e:
        _json_fits(size, tmp_path / "r.json")
    assert (f"a JSON report of {size / 1e6:.2f} MB needs about {need / 1e6:.2f} MB of memory "
            f"to read and 3.00 MB is available: convert it first") in str(e.value)
    monkeypatch.setenv("TILEMEM_MEMORY_AVAILABLE", "900")
    with pytest.raises(ReportError, match="and 900 bytes is available"):
        _json_fits(size, tmp_path / "r.json")
    monkeypatch.setenv("TILEMEM_MEMORY_AVAILABLE", str(need))   # exactly enough: read
    _json_fits(size, tmp_path / "r.json")
