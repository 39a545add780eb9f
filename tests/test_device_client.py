"""The device client (docs/client.md): persisted memos and budget, refusals, derived round 1."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

import longldp as ll
from longldp.client import BudgetExceededError, DeviceClient
from longldp.protocols import DerivedRound1, SecureRandom, wire
from protocol_table import PROTOCOLS, K
from registry_cases import build, cases


def derived(proto, secret: bytes, round2=None) -> ll.protocols.Client:
    """The device's client path without files: round 1 derived from ``secret``."""
    round1 = DerivedRound1(secret, DerivedRound1.context_of(proto, "demo"))
    return proto.client(round1=round1, round2=round2 or SecureRandom())


def make(case: str, k: int = K) -> ll.FrequencyOracle:
    name, params = PROTOCOLS[case]
    return ll.protocol(name, k=k, **params)


def test_restart_keeps_memos_budget_and_queue(tmp_path):
    proto = make("L-OSUE")
    path = tmp_path / "state.json"
    a = DeviceClient(path, proto, "demo")
    ids = [a.report(v, epoch=e) for e, v in enumerate([1, 2, 1, 3, 1])]
    memos = [a.memo(v) for v in range(K)]
    before = a.spent_budget
    assert (before.reports, before.memos) == (5, 3)
    b = DeviceClient(path, proto, "demo")
    assert b.spent_budget == before
    assert [q.id for q in b.queue] == ids
    assert [q.epoch for q in b.queue] == [0, 1, 2, 3, 4]
    for v in range(K):
        np.testing.assert_array_equal(b.memo(v), memos[v])
    c = DeviceClient(path)  # the protocol is rebuilt from the state file
    assert c.proto == proto and c.spent_budget == before


def test_report_ids_are_the_epoch_then_fresh_random_bytes(tmp_path):
    """docs/wire-format.md §4: a report's id is its epoch (u32 big-endian) then 12 CSPRNG
    bytes; two reports of one epoch share the prefix and nothing else."""
    client = DeviceClient(tmp_path / "state.json", make("L-OSUE"), "demo")
    epochs = [0, 5, 5, 2**32 - 1]
    ids = [client.report(1, epoch=e) for e in epochs]
    assert all(len(i) == wire.ID_SIZE for i in ids)
    assert [int.from_bytes(i[:4], "big") for i in ids] == epochs
    tails = {i[4:] for i in ids}
    assert len(tails) == len(ids) and all(len(t) == wire.ID_ENTROPY for t in tails)


@pytest.mark.parametrize(("cls", "params"), cases(where=lambda cls: cls.longitudinal))
def test_deleted_store_reproduces_round1(tmp_path, cls, params):
    proto = build(cls, params, K)
    values = list(proto.as_inputs(np.arange(K) % (proto.domain_size or K)))
    path = tmp_path / "state.json"
    a = DeviceClient(path, proto, "demo")
    a.report(values[0], epoch=0)
    memos = [a.memo(v) for v in values]
    state = {name: arr.copy() for name, arr in a.user_state.items()}
    path.unlink()  # the memo store is lost; the secret file is not
    b = DeviceClient(path, proto, "demo")
    assert b.spent_budget.reports == 0
    for v, memo in zip(values, memos, strict=True):
        np.testing.assert_array_equal(b.memo(v), memo)
    for name, arr in state.items():
        np.testing.assert_array_equal(b.user_state[name], arr)
    b.report(values[0], epoch=1)
    assert proto.decode_reports(b.queue[0].report).shape[0] == 1


def test_other_secret_or_collection_gives_other_memos(tmp_path):
    proto = make("L-OSUE", k=64)
    a = DeviceClient(tmp_path / "a", proto, "demo")
    b = DeviceClient(tmp_path / "b", proto, "demo")  # its own secret file
    c = DeviceClient(tmp_path / "c", proto, "other", secret_path=tmp_path / "a.secret")
    same = DeviceClient(tmp_path / "d", proto, "demo", secret_path=tmp_path / "a.secret")
    assert not np.array_equal(a.memo(5), b.memo(5))
    assert not np.array_equal(a.memo(5), c.memo(5))
    np.testing.assert_array_equal(a.memo(5), same.memo(5))


def test_reports_are_wire_reports_with_ids(tmp_path):
    proto = make("OLOLOHA")
    client = DeviceClient(tmp_path / "s", proto, "demo")
    ids = [client.report(v, epoch=7) for v in [0, 1, 2]]
    assert len(set(ids)) == 3 and all(len(i) == 16 for i in ids)
    _, data = client.batch(10)
    got_ids, epochs, recs = wire.decode_records(proto, data)
    assert [bytes(i) for i in got_ids] == ids and epochs.tolist() == [7, 7, 7]
    assert np.unique(recs["hash_id"]).size == 1  # one device, one hash function
    client.acknowledge(ids[:2])
    assert [q.id for q in DeviceClient(tmp_path / "s", proto, "demo").queue] == ids[2:]


def test_one_shot_protocols_spend_every_report(tmp_path):
    proto = make("OLH")
    client = DeviceClient(tmp_path / "s", proto, "demo", max_epsilon=2.0)
    client.report(1, 0)
    client.report(1, 1)
    assert client.spent_budget.epsilon == pytest.approx(2 * proto.single_report_epsilon())
    with pytest.raises(BudgetExceededError):
        client.report(1, 2)
    with pytest.raises(ValueError, match="memoizes nothing"):
        client.memo(1)


def test_max_epsilon_uses_the_memo_cap_and_survives_restart(tmp_path):
    proto = ll.protocol("L-GRR", k=4, eps_perm=2.0, eps_1=1.0)
    e1, einf = proto.single_report_epsilon(), proto.first_round_epsilon()
    path = tmp_path / "s"
    client = DeviceClient(path, proto, "demo", max_epsilon=2.5)
    for epoch in range(5):  # one value forever: capped at ε∞ = 2
        client.report(0, epoch)
    assert client.spent_budget.epsilon == pytest.approx(min(5 * e1, einf))
    with pytest.raises(BudgetExceededError, match=r"past max_epsilon = 2\.5"):
        client.report(1, 5)  # a second memo: min(6·ε1, 2·ε∞) = 4 > 2.5
    assert client.spent_budget.reports == 5 and len(client.queue) == 5
    again = DeviceClient(path, proto, "demo", max_epsilon=2.5)
    assert again.spent_budget == client.spent_budget
    with pytest.raises(BudgetExceededError):
        again.report(1, 5)
    again.report(0, 6)
    with pytest.raises(ValueError, match="'max_epsilon' must be positive"):
        DeviceClient(path, proto, "demo", max_epsilon=0)


def test_queue_is_bounded_and_survives_restart(tmp_path, caplog):
    proto = make("L-GRR")
    client = DeviceClient(tmp_path / "s", proto, "demo", queue_limit=3)
    ids = [client.report(1, e) for e in range(5)]
    assert [q.id for q in client.queue] == ids[2:] and client.dropped == 2
    assert "upload queue full" in caplog.text
    again = DeviceClient(tmp_path / "s", proto, "demo", queue_limit=3)
    assert [q.id for q in again.queue] == ids[2:] and again.dropped == 2


# ---------------------------------------------------------------------- refused state


def test_tampered_state_refused(tmp_path):
    proto = make("L-OSUE")
    path = tmp_path / "s"
    client = DeviceClient(path, proto, "demo")
    client.report(1, 0)
    client.report(2, 0)
    good = path.read_bytes()
    body = json.loads(good)
    body["reports"] = 0  # understate the budget: a valid JSON edit without the secret
    path.write_text(json.dumps(body))
    with pytest.raises(ValueError, match="authentication tag does not match"):
        DeviceClient(path, proto, "demo")
    path.write_bytes(good[: len(good) // 2])
    with pytest.raises(ValueError, match="corrupt"):
        DeviceClient(path, proto, "demo")
    flipped = bytearray(good)
    flipped[good.index(b'"memo_keys":[') + 13] ^= 0x01  # a digit of a memo key
    path.write_bytes(bytes(flipped))
    with pytest.raises(ValueError, match=r"authentication tag|corrupt"):
        DeviceClient(path, proto, "demo")
    path.write_bytes(good)
    assert DeviceClient(path, proto, "demo").spent_budget.reports == 2
    assert path.read_bytes() == good, "loading must not rewrite the file"


def test_foreign_state_refused(tmp_path):
    proto = make("L-OSUE")
    path = tmp_path / "s"
    DeviceClient(path, proto, "demo").report(1, 0)
    other = ll.protocol("L-OSUE", k=K, eps_perm=2.0, eps_1=0.5)
    with pytest.raises(ValueError, match="it belongs to"):
        DeviceClient(path, other, "demo")
    with pytest.raises(ValueError, match="belongs to collection 'demo'"):
        DeviceClient(path, proto, "elsewhere")
    with pytest.raises(ValueError, match="another device secret"):
        DeviceClient(path, proto, "demo", secret_path=tmp_path / "another.secret")
    path.write_text(json.dumps({"format": "something-else"}))
    with pytest.raises(ValueError, match="not a longldp device state"):
        DeviceClient(path, proto, "demo")


def test_corrupt_secret_refused_not_replaced(tmp_path):
    proto = make("L-OSUE")
    DeviceClient(tmp_path / "s", proto, "demo")
    secret = tmp_path / "s.secret"
    data = bytearray(secret.read_bytes())
    data[10] ^= 0xFF
    secret.write_bytes(bytes(data))
    with pytest.raises(ValueError, match="corrupt or not a longldp secret"):
        DeviceClient(tmp_path / "s", proto, "demo")
    assert secret.read_bytes() == bytes(data)


def test_files_are_written_atomically_and_privately(tmp_path):
    proto = make("L-OSUE")
    client = DeviceClient(tmp_path / "s", proto, "demo")
    client.report(1, 0)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s", "s.secret"]  # no temp left
    assert os.stat(tmp_path / "s.secret").st_mode & 0o077 == 0


def test_bad_arguments(tmp_path):
    proto = make("L-OSUE")
    with pytest.raises(ValueError, match="pass the collection's protocol"):
        DeviceClient(tmp_path / "none")
    client = DeviceClient(tmp_path / "s", proto, "demo")
    with pytest.raises(ValueError, match=r"'value' must be an int in \[0, 6\)"):
        client.report(6, 0)
    with pytest.raises(ValueError, match="'epoch' must be in"):
        client.report(1, -1)
    with pytest.raises(ValueError, match="'secret' must be 32 bytes"):
        DeviceClient(tmp_path / "t", proto, "demo", secret=b"short")
    assert client.spent_budget.reports == 0


# ---------------------------------------------------------------------- privacy unaffected


def test_hmac_round1_has_the_protocol_distribution_lgrr():
    """Over many secrets, memo(0) of L-GRR is 0 w.p. p1 and each other symbol w.p. q1, and the
    memos of two values are independent (p1² for both faithful): the exact channel's law."""
    proto = ll.protocol("L-GRR", k=4, eps_perm=2.0, eps_1=1.0)
    n = 2500
    rng = np.random.default_rng(1)
    pairs = np.empty((n, 2), dtype=np.int64)
    reports = np.empty(n, dtype=np.int64)
    os_rng = SecureRandom()
    for i in range(n):
        d = derived(proto, rng.bytes(32), os_rng)
        pairs[i] = [d.memo(0)[0], d.memo(1)[0]]
        reports[i] = d.report(0)
    # The composed channel of one report (derived round 1, OS round 2): P1 on 0, P0 elsewhere.
    seen = np.bincount(reports, minlength=4)
    law = n * np.array([proto.P1, proto.P0, proto.P0, proto.P0])
    assert np.all(np.abs(seen - law) < 5 * np.sqrt(law * (1 - law / n)))
    counts = np.bincount(pairs[:, 0], minlength=4)
    expected = n * np.array([proto.p1, proto.q1, proto.q1, proto.q1])
    assert np.all(np.abs(counts - expected) < 5 * np.sqrt(expected * (1 - expected / n)))
    both = np.count_nonzero((pairs[:, 0] == 0) & (pairs[:, 1] == 1))
    p = proto.p1**2
    assert abs(both - n * p) < 5 * np.sqrt(n * p * (1 - p))


def test_hmac_round1_has_the_protocol_distribution_ue_and_lh():
    osue = ll.protocol("L-OSUE", k=6, eps_perm=2.0, eps_1=1.0)
    lh = ll.protocol("OLOLOHA", k=6, eps_perm=2.0, eps_1=1.0)
    n = 1500
    rng = np.random.default_rng(2)
    bits = np.empty((n, 6), dtype=bool)
    faithful = np.empty(n, dtype=bool)
    for i in range(n):
        secret = rng.bytes(32)
        d = derived(osue, secret)
        bits[i] = np.unpackbits(d.memo(2), count=6).astype(bool)
        h = derived(lh, secret)
        faithful[i] = h.memo(3)[0] == h.memo_key(3)
    prob = np.full(6, osue.q1)
    prob[2] = osue.p1
    ones = bits.sum(axis=0)
    assert np.all(np.abs(ones - n * prob) < 5 * np.sqrt(n * prob * (1 - prob)))
    got = np.count_nonzero(faithful)
    assert abs(got - n * lh.p1) < 5 * np.sqrt(n * lh.p1 * (1 - lh.p1))


def test_rappor_prr_is_reproduced_and_budgeted(tmp_path):
    proto = ll.protocol("RAPPOR", k=16, h=2, m=4, f=0.5, p=0.5, q=0.75)
    path = tmp_path / "s"
    a = DeviceClient(path, proto, "urls")
    a.report("example.com", 0)
    a.report("example.com", 1)
    a.report("other.org", 1)
    budget = a.spent_budget
    assert (budget.reports, budget.memos) == (3, 2)
    prr = a.memo("example.com")
    assert DeviceClient(path, proto, "urls").spent_budget == budget
    path.unlink()
    b = DeviceClient(path, proto, "urls")
    np.testing.assert_array_equal(b.memo("example.com"), prr)
    recs = proto.decode_reports(b"".join(q.report for q in a.queue))
    assert np.unique(recs["cohort"]).size == 1
    with pytest.raises(ValueError, match="must be a string or bytes"):
        b.report(3, 0)


def test_a_failed_save_leaves_the_old_state_and_no_report(tmp_path, monkeypatch):
    proto = make("L-OSUE")
    path = tmp_path / "s"
    client = DeviceClient(path, proto, "demo")
    client.report(1, 0)
    good = path.read_bytes()

    def crash(*_args):
        raise OSError("disk full")

    monkeypatch.setattr("longldp.client._store.os.replace", crash)
    with pytest.raises(OSError, match="disk full"):
        client.report(2, 0)
    monkeypatch.undo()
    assert path.read_bytes() == good
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s", "s.secret"]
    assert client.spent_budget.reports == 1 and len(client.queue) == 1
    assert DeviceClient(path, proto, "demo").spent_budget == client.spent_budget


# ---------------------------------------------------------------------- the documented derivation


class _Stream:
    """docs/client.md §2.1–§2.2 written from the document alone (hashlib, no longldp code)."""

    def __init__(self, key: bytes, context: bytes):
        import hashlib
        import hmac

        self._block = lambda i: hmac.new(key, context + i.to_bytes(8, "big"), hashlib.sha256)
        self._buf, self._i = b"", 0

    def _word(self) -> int:
        while len(self._buf) < 8:
            self._buf += self._block(self._i).digest()
            self._i += 1
        w, self._buf = int.from_bytes(self._buf[:8], "little"), self._buf[8:]
        return w

    def random(self, n: int) -> list[float]:
        return [(self._word() >> 11) * 2.0**-53 for _ in range(n)]

    def integers(self, lo: int, hi: int, n: int) -> list[int]:
        span, out = hi - lo, []
        limit = 2**64 - 2**64 % span
        while len(out) < n:
            words = [self._word() for _ in range(n - len(out))]
            out += [lo + w % span for w in words if w < limit]
        return out


def _grr(stream: _Stream, x: int, m: int, p1: float) -> int:
    s = stream.integers(1, m, 1)[0]
    return x if stream.random(1)[0] < p1 else (x + s) % m


@pytest.mark.parametrize(
    "spec",
    [
        {"name": "L-GRR", "params": {"k": 7, "eps_perm": 2.0, "eps_1": 1.0}},
        {"name": "L-OSUE", "params": {"k": 11, "eps_perm": 2.0, "eps_1": 1.0}},
        {"name": "OLOLOHA", "params": {"k": 30, "eps_perm": 3.0, "eps_1": 1.0}},
        {"name": "dBitFlipPM", "params": {"k": 12, "eps_perm": 2.0, "b": 6, "d": 2}},
        {"name": "L-SH", "params": {"k": 12, "eps_perm": 2.0, "eps_1": 1.0}},
        {"name": "RAPPOR", "params": {"k": 16, "h": 2, "m": 8, "f": 0.5, "p": 0.5, "q": 0.75}},
    ],
    ids=lambda s: s["name"],
)
def test_the_documented_draw_order_reproduces_a_device(tmp_path, spec):
    """A client in another language that follows docs/client.md §2 gets the device's memos."""
    from longldp.protocols.lh import mix_hash

    proto = ll.protocol_from_spec(spec)
    device = DeviceClient(tmp_path / "s", proto, "demo")
    secret = (tmp_path / "s.secret").read_bytes()[4:36]
    name = b"demo"
    ctx = proto.wire_header + len(name).to_bytes(2, "big") + name
    state = _Stream(secret, b"longldp/state/v1|" + ctx)
    kind = proto.report_kind
    values = proto.as_inputs(np.arange(5)) if proto.domain_size is None else range(5)
    if kind == "hashed":
        seed = state.integers(0, 2**63, 1)[0]
    if kind == "hadamard":
        row = state.integers(0, proto.m, 1)[0]
    if kind == "sampled-bits":
        u = state.random(proto.b)
        sampled = sorted(np.argsort(u, kind="stable")[: proto.d])
    if kind == "cohort-bits":
        cohort = state.integers(0, proto.m, 1)[0]
    for v in values:
        if kind in ("symbol", "bits"):
            key = v
        elif kind == "hashed":
            key = int(mix_hash(np.array([seed]), np.array([v]), proto.g)[0])
        elif kind == "hadamard":
            key = bin(row & v).count("1") % 2
        elif kind == "sampled-bits":
            key = v * proto.b // proto.k
        else:  # cohort-bits: the Bloom filter's packed bytes
            key = proto.encode([v], [cohort]).tobytes()
        xk = key if isinstance(key, bytes) else int(key).to_bytes(8, "big")
        memo = _Stream(secret, b"longldp/round1/v1|" + ctx + xk)
        if kind == "symbol":
            want = [_grr(memo, key, proto.k, proto.p1)]
        elif kind in ("hashed", "hadamard"):
            want = [_grr(memo, key, proto.g, proto.p1)]
        elif kind == "bits":
            u = memo.random(proto.k)
            bits = [ui < proto.q1 for ui in u]
            bits[v] = memo.random(1)[0] < proto.p1
            want = np.packbits(bits).tolist()
        elif kind == "sampled-bits":
            u = memo.random(proto.d)
            truth = [j == key for j in sampled]
            want = np.packbits(
                [t if ui < proto.p1 else not t for t, ui in zip(truth, u, strict=True)]
            ).tolist()
        else:
            enc = np.unpackbits(np.frombuffer(key, np.uint8), count=proto.k).astype(bool)
            u = memo.random(proto.k)
            want = np.packbits(
                [ui < (proto.p1 if e else proto.q1) for e, ui in zip(enc, u, strict=True)]
            ).tolist()
        assert np.asarray(device.memo(v)).ravel().tolist() == want, (spec["name"], v)
