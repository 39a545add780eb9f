"""Wire format v1 (docs/wire-format.md): test vectors, refusals, aggregator merge and state."""

from __future__ import annotations

import base64
import hashlib
import json
import re
from pathlib import Path

import numpy as np
import pytest

import longldp as ll
from longldp.protocols import wire
from protocol_table import PROTOCOLS, K
from registry_cases import cases

DOC = Path(__file__).resolve().parents[1] / "docs" / "wire-format.md"


def make(case: str, k: int = K) -> ll.FrequencyOracle:
    name, params = PROTOCOLS[case]
    return ll.protocol(name, k=k, **params)


def reports_of(proto, n: int = 40, seed: int = 0):
    rng = np.random.default_rng(seed)
    values = proto.as_inputs(rng.integers(0, proto.domain_size or 100, n))
    return proto.perturb(values, proto.new_memo(n), rng)


# ---------------------------------------------------------------------- test vectors


def vectors() -> list[tuple[str, str]]:
    """(label, hex or text) pairs printed in docs/wire-format.md; built from fixed records."""
    out: list[tuple[str, str]] = []
    lgrr = ll.protocol("L-GRR", k=10, eps_perm=2.0, eps_1=1.0)
    rec_lgrr = np.array([7])
    osue = ll.protocol("L-OSUE", k=12, eps_perm=2.0, eps_1=1.0)
    bits = np.zeros((1, 12), dtype=bool)
    bits[0, [0, 3, 11]] = True
    rec_osue = np.packbits(bits, axis=1)
    lh = ll.protocol("OLOLOHA", k=100, eps_perm=2.0, eps_1=1.0, hash_pool=256)
    rec_lh = np.zeros(1, dtype=[("hash_id", "<i8"), ("bucket", "<i8")])
    rec_lh["hash_id"], rec_lh["bucket"] = 5, 1
    olh = ll.protocol("OLOLOHA", k=100, eps_perm=2.0, eps_1=1.0)
    rec_olh = rec_lh.copy()
    rec_olh["hash_id"] = 0x0123456789ABCDEF
    dbf = ll.protocol("dBitFlipPM", k=8, eps_perm=1.0, d=2)
    rec_dbf = np.zeros(1, dtype=dbf.report_dtype)
    rec_dbf["buckets"], rec_dbf["bits"] = [[2, 6]], [[0, 1]]
    for label, proto, rec in [
        ("L-GRR", lgrr, rec_lgrr),
        ("L-OSUE", osue, rec_osue),
        ("OLOLOHA-pool", lh, rec_lh),
        ("OLOLOHA", olh, rec_olh),
        ("dBitFlipPM", dbf, rec_dbf),
    ]:
        out.append((f"{label} spec", wire.canonical_json(proto.spec()).decode()))
        out.append((f"{label} fingerprint", proto.fingerprint().hex()))
        out.append((f"{label} report", proto.encode_reports(rec).hex()))
    ids = [bytes(range(16)), bytes(range(16, 32))]
    reports = lgrr.encode_reports(np.array([7, 0]))
    out.append(("L-GRR batch", wire.encode_records(lgrr, ids, [3, 70000], reports).hex()))
    blobs = [reports[:13], reports[13:]]
    out.append(("L-GRR JSON batch", json.dumps(wire.encode_json_batch(ids, [3, 70000], blobs))))
    return out


def test_vectors_are_in_the_document():
    text = DOC.read_text()
    for label, value in vectors():
        assert value in text, f"vector {label!r} is missing from docs/wire-format.md: {value}"


def test_vectors_decode_from_the_document_alone():
    """Rebuild a fingerprint and a report from the bytes the document spells out."""
    spec = '{"name":"L-GRR","params":{"calibration":"exact","eps_1":1.0,"eps_perm":2.0,"k":10}}'
    fp = hashlib.sha256(spec.encode()).digest()[:8]
    lgrr = ll.protocol("L-GRR", k=10, eps_perm=2.0, eps_1=1.0)
    assert lgrr.fingerprint() == fp
    assert lgrr.encode_reports(np.array([7])) == b"LL\x01\x06" + fp + b"\x07"
    text = DOC.read_text()
    m = re.search(r"L-GRR batch[^`]*`([0-9a-f]+)`", text)
    assert m is not None
    ids, epochs, recs = wire.decode_records(lgrr, bytes.fromhex(m.group(1)))
    assert [bytes(i) for i in ids] == [bytes(range(16)), bytes(range(16, 32))]
    assert epochs.tolist() == [3, 70000]
    assert recs.tolist() == [7, 0]


def test_protocol_ids_are_fixed_and_cover_the_registry():
    """The id table of docs/wire-format.md §1 is the registry's, row by row: an id once
    published cannot change, and a new protocol must be documented with its id."""
    rows = re.findall(r"^\| (\d+) \| ([^|]+?) \| ([a-z-]+) \|$", DOC.read_text(), re.M)
    documented = {(int(i), name, kind) for i, name, kind in rows}
    registered = {(info.wire_id, info.name, info.report_kind) for info in ll.list_protocols()}
    assert documented == registered
    assert len(set(wire.PROTOCOL_IDS.values())) == len(wire.PROTOCOL_IDS) == len(registered)
    assert ll.protocol("dBitFlipPM", k=3, eps_perm=1.0).wire_id == 13


def test_wire_is_a_plain_codec_without_an_import_circle():
    """No protocol module imports the public wire module; the byte codec imports no protocol."""
    import ast

    folder = Path(ll.protocols.__file__).parent
    for path in folder.glob("*.py"):
        imported = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                imported |= {f"{node.module}.{a.name}" for a in node.names} | {node.module}
            elif isinstance(node, ast.Import):
                imported |= {a.name for a in node.names}
        if path.name not in ("__init__.py", "wire.py"):
            assert "longldp.protocols.wire" not in imported, path.name
        if path.name == "_codec.py":
            assert not any(m.startswith("longldp") for m in imported), imported


def test_a_reused_wire_id_is_refused_at_class_creation():
    from longldp.protocols import GRR

    with pytest.raises(TypeError, match="wire id 1 is already GRR's"):
        type("Impostor", (GRR,), {"name": "Impostor", "wire_id": 1})


# ---------------------------------------------------------------------- spec and fingerprint


@pytest.mark.parametrize("proto", cases(k=K))
def test_spec_round_trip_and_fingerprint(proto):
    spec = json.loads(json.dumps(proto.spec()))
    again = ll.protocol_from_spec(spec)
    assert again == proto
    assert again.fingerprint() == proto.fingerprint()
    assert proto.wire_header == b"LL\x01" + bytes([proto.wire_id]) + proto.fingerprint()


def test_fingerprint_normalizes_and_separates_parameters():
    a = ll.protocol("L-GRR", k=10, eps_perm=2, eps_1=1)
    b = ll.protocol("L-GRR", k=10, eps_perm=2.0, eps_1=np.float64(1.0), calibration="EXACT")
    assert a.fingerprint() == b.fingerprint()
    assert a.fingerprint() != ll.protocol("L-GRR", k=10, eps_perm=2.0, eps_1=1.5).fingerprint()
    assert a.fingerprint() != ll.protocol("L-GRR", k=11, eps_perm=2.0, eps_1=1.0).fingerprint()
    pooled = ll.protocol("OLOLOHA", k=10, eps_perm=2.0, eps_1=1.0, hash_pool=16)
    other_seed = ll.protocol("OLOLOHA", k=10, eps_perm=2.0, eps_1=1.0, hash_pool=16, pool_seed=1)
    assert pooled.fingerprint() != other_seed.fingerprint()


def test_protocol_from_spec_refuses_bad_specs():
    with pytest.raises(ValueError, match="must be an object"):
        ll.protocol_from_spec({"params": {}})
    with pytest.raises(ValueError, match="unknown key"):
        ll.protocol_from_spec({"name": "GRR", "params": {"k": 3, "eps": 1.0}, "x": 1})
    with pytest.raises(ValueError, match="unknown parameter"):
        ll.protocol_from_spec({"name": "GRR", "params": {"k": 3, "eps": 1.0, "g": 2}})
    with pytest.raises(ValueError, match="'name' must be one of"):
        ll.protocol_from_spec({"name": "NOPE", "params": {}})


# ---------------------------------------------------------------------- reports and refusals


@pytest.mark.parametrize("proto", cases(k=K))
def test_reports_round_trip(proto):
    reports = reports_of(proto)
    data = proto.encode_reports(reports)
    assert len(data) == 40 * proto.wire_size
    back = proto.decode_reports(data)
    np.testing.assert_array_equal(proto.support_counts(back), proto.support_counts(reports))
    agg = proto.aggregator()
    agg.add_bytes(data)
    assert agg.n == 40


def test_refusals_name_the_item():
    proto = make("L-OSUE")
    data = bytearray(proto.encode_reports(reports_of(proto, 5)))
    size = proto.wire_size
    other_params = make("L-SUE")
    other_proto = ll.protocol("L-OSUE", k=K, eps_perm=2.0, eps_1=0.5)
    agg = proto.aggregator()
    with pytest.raises(ValueError, match=r"report 0 is of protocol id 7 .L-SUE."):
        agg.add_bytes(other_params.encode_reports(reports_of(other_params, 3)))
    with pytest.raises(ValueError, match="report 0 has parameter fingerprint"):
        agg.add_bytes(other_proto.encode_reports(reports_of(other_proto, 3)))
    bad = bytearray(data)
    bad[3 * size + 2] = 2
    with pytest.raises(ValueError, match="report 3 has wire format version 2") as err:
        agg.add_bytes(bytes(bad))
    assert err.value.index == 3
    bad = bytearray(data)
    bad[2 * size] = ord("X")
    with pytest.raises(ValueError, match="report 2 does not start with the magic"):
        agg.add_bytes(bytes(bad))
    with pytest.raises(ValueError, match="report 4 is truncated: 9 bytes where a report has 13"):
        agg.add_bytes(bytes(data[:-4]))
    bad = bytearray(data)
    bad[4 * size - 1] = 0xFF  # k = 6: bits beyond position 6 set in report 3's body
    with pytest.raises(ValueError, match=r"report 3 has an invalid body: .*beyond position k"):
        agg.add_bytes(bytes(bad))
    assert agg.n == 0, "a refused batch must count nothing"


def test_records_round_trip_and_refusals():
    proto = make("OLOLOHA")
    reports = reports_of(proto, 6)
    ids = np.arange(6 * 16, dtype=np.uint8).reshape(6, 16)
    data = wire.encode_records(proto, ids, np.arange(6) * 1000, proto.encode_reports(reports))
    assert len(data) == 6 * wire.record_size(proto) == 6 * (20 + proto.wire_size)
    got_ids, epochs, recs = wire.decode_records(proto, data)
    np.testing.assert_array_equal(got_ids, ids)
    assert epochs.tolist() == [0, 1000, 2000, 3000, 4000, 5000]
    np.testing.assert_array_equal(recs, reports)
    bad = bytearray(data)
    bad[4 * wire.record_size(proto) + 20 + 5] ^= 1  # fingerprint of record 4
    with pytest.raises(ValueError, match="record 4 has parameter fingerprint") as err:
        wire.split_records(proto, bytes(bad))
    assert err.value.index == 4
    with pytest.raises(ValueError, match="record 5 is truncated"):
        wire.split_records(proto, data[:-1])
    with pytest.raises(ValueError, match="every epoch must be in"):
        wire.encode_records(proto, ids, np.full(6, 2**32), proto.encode_reports(reports))
    with pytest.raises(ValueError, match="6 ids of 16 bytes"):
        wire.encode_records(proto, ids[:5], np.arange(6), proto.encode_reports(reports))


def test_json_batch_equals_binary_batch():
    proto = make("L-GRR")
    reports = reports_of(proto, 4)
    blobs = [proto.encode_reports(reports[i : i + 1]) for i in range(4)]
    ids = [bytes([i]) * 16 for i in range(4)]
    obj = json.loads(json.dumps(wire.encode_json_batch(ids, [1, 2, 3, 4], blobs)))
    assert wire.json_batch_to_records(proto, obj) == wire.encode_records(
        proto, ids, [1, 2, 3, 4], b"".join(blobs)
    )
    bad = json.loads(json.dumps(obj))
    bad["reports"][2]["report"] = base64.b64encode(blobs[2][:-1]).decode()
    with pytest.raises(ValueError, match="record 2: the report has 12 bytes") as err:
        wire.json_batch_to_records(proto, bad)
    assert err.value.index == 2
    bad = json.loads(json.dumps(obj))
    bad["reports"][1]["id"] = "zz" * 16
    with pytest.raises(ValueError, match=r"reports\[1\].id must be 32 hex digits"):
        wire.json_batch_to_records(proto, bad)
    with pytest.raises(ValueError, match=r"reports\[0\].epoch must be an integer"):
        wire.json_batch_to_records(proto, {"reports": [dict(obj["reports"][0], epoch=-1)]})


# ---------------------------------------------------------------------- merge and state


@pytest.mark.parametrize("proto", cases(k=K))
def test_merge_and_state_equal_one_aggregation(proto):
    reports = reports_of(proto, 60, seed=5)
    whole = proto.aggregator()
    whole.add(reports)
    shards = [proto.aggregator() for _ in range(3)]
    for i, shard in enumerate(shards):
        shard.add(reports[i * 20 : (i + 1) * 20])
    restored = [proto.aggregator_from_state(json.loads(json.dumps(s.state()))) for s in shards]
    total = proto.aggregator()
    for shard in restored:
        total.merge(shard)
    # counts are integers and add exactly; a numeric mean's sums are floats, whose shards add
    # up to the whole to rounding (docs/math.md (20.3))
    same = (
        np.testing.assert_array_equal
        if np.asarray(whole.support_counts).dtype.kind != "f"
        else lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)
    )
    same(total.support_counts, whole.support_counts)
    assert total.n == whole.n == 60
    same(total.estimate(), whole.estimate())
    same(proto.estimate(total.support_counts, total.n), whole.estimate())
    again = ll.protocols.aggregator_from_state(total.state())
    same(again.support_counts, whole.support_counts)


def test_merge_and_state_refuse_other_protocols():
    a = make("L-OSUE")
    b = ll.protocol("L-OSUE", k=K, eps_perm=2.0, eps_1=0.5)
    agg_a, agg_b = a.aggregator(), b.aggregator()
    agg_b.add(reports_of(b, 5))
    with pytest.raises(ValueError, match="cannot merge counts"):
        agg_a.merge(agg_b)
    with pytest.raises(ValueError, match="aggregator state is of"):
        a.aggregator_from_state(agg_b.state())
    state = agg_b.state()
    state["support"] = [1, 2]
    with pytest.raises(ValueError, match="'support' must have shape"):
        b.aggregator_from_state(state)
    state["support"] = [-1] * K
    with pytest.raises(ValueError, match=r"'support' must hold integers in \[0, n\]"):
        b.aggregator_from_state(state)
    with pytest.raises(ValueError, match="must be an object with format"):
        b.aggregator_from_state({"n": 3})
    empty = b.aggregator_from_state(b.aggregator().state())
    assert empty.n == 0


def test_new_report_id_is_the_epoch_then_the_entropy():
    rid = wire.new_report_id(7, bytes(range(12)))
    assert rid == (7).to_bytes(4, "big") + bytes(range(12))
    assert len(rid) == wire.ID_SIZE == wire.EPOCH_SIZE + wire.ID_ENTROPY


@pytest.mark.parametrize(
    ("epoch", "entropy", "match"),
    [
        (-1, bytes(12), "'epoch' must be in"),
        (2**32, bytes(12), "'epoch' must be in"),
        (0, bytes(11), "'entropy' must be 12 bytes; got 11"),
        (0, bytes(16), "'entropy' must be 12 bytes; got 16"),
    ],
)
def test_new_report_id_refuses_bad_input(epoch, entropy, match):
    with pytest.raises(ValueError, match=match):
        wire.new_report_id(epoch, entropy)
