"""A capnp report's columns are views of the mapped file, whatever their size: the chunks of a
column lie back to back (``write_capnp_streaming``), so reading joins nothing; names too."""
import numpy as np

from tilemem.load import capnpio, load_report, save_report


def test_chunked_columns_and_names_are_views_of_the_file(tmp_path, monkeypatch):
    r = load_report("examples/mk1-small.json")
    monkeypatch.setattr(capnpio, "CHUNK_BYTES", 1 << 14)   # big columns in several chunks
    path = tmp_path / "r.capnp"
    save_report(r, path)
    back = load_report(path)
    assert back == r
    assert r.tile.nbytes > 4 * (1 << 14) and len(r.name_blob) > 4 * (1 << 14)
    for col in (back.tile, back.size, back.offset, back.eq_class, back.interference.indices,
                back.allocation_order.indices):
        assert not col.flags.owndata and col.base is not None   # a view, not a joined copy
    assert isinstance(back.name_blob, np.ndarray) and not back.name_blob.flags.owndata
    assert [back.name(i) for i in (0, 7, r.num_vars - 1)] == [r.name(i) for i in
                                                              (0, 7, r.num_vars - 1)]


def test_builder_written_file_still_loads(tmp_path, monkeypatch):
    r = load_report("examples/mk1-small.json")
    monkeypatch.setattr(capnpio, "CHUNK_BYTES", 1 << 12)
    path = tmp_path / "b.capnp"
    with open(path, "wb") as f:
        capnpio.write_capnp(r, f)
    assert load_report(path) == r
