"""The guide's audit and ASR tables (docs/guide/privacy-audit.md) follow the registry.

One registry drives the docs' tables: every registered protocol has, at each of the two
settings of ``experiments/audit_table.py``, a row or a line naming it with the reason it is not
audited, in the audit table and in the ASR table; the guide shows the committed results of the
script; and each protocol is shown audited the way its traits decide today (game, black box,
or refused with the audit's own reason). Nothing here runs an audit: a newly registered
protocol fails these tests until the script is re-run.
"""

from __future__ import annotations

import importlib.util
import re
import sys
import types

import pytest

import longldp as ll
from server_helpers import ROOT

GUIDE = ROOT / "docs" / "guide" / "privacy-audit.md"
RESULTS = ROOT / "experiments" / "results" / "audit"
#: The two tables, by a word of their header row.
TABLES = {"audit": "one-report bound", "asr": "memo alone"}


@pytest.fixture(scope="module")
def script() -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(
        "audit_table", ROOT / "experiments" / "audit_table.py"
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["audit_table"] = module
    spec.loader.exec_module(module)
    return module


def listed(text: str) -> dict[tuple[str, str], set[str]]:
    """Per (table, setting) of ``text``: the protocols it names, in a row (the first cell,
    less a parenthesized note such as "(example plan)") or in a line under the table
    ("- Not audited here: **NAME** (…), **OTHER**: reason")."""
    found: dict[tuple[str, str], set[str]] = {}
    key = None
    setting = None
    for line in text.splitlines():
        head = re.match(r"Setting (\w+):", line)
        if head:
            setting, key = head.group(1), None
            continue
        if setting is None:
            continue
        if line.startswith("| protocol |"):
            kind = [t for t, word in TABLES.items() if word in line]
            key = (kind[0], setting) if kind else None
            if key is not None:
                found.setdefault(key, set())
            continue
        if key is None:
            continue
        row = re.match(r"\| ([^|]+?) \|", line)
        if row and not row.group(1).startswith("---"):
            found[key].add(re.sub(r" \(.*\)$", "", row.group(1)))
            continue
        if re.match(r"- Not \w+ here: ", line):  # every **NAME** of the line
            found[key] |= set(re.findall(r"\*\*([^*]+)\*\*", line))
        elif line.startswith("#"):
            key = setting = None
    return found


def missing(text: str, settings: list[str]) -> list[str]:
    """Every (table, setting, protocol) of the registry that ``text`` does not name."""
    names = {info.name for info in ll.list_protocols()}
    got = listed(text)
    out = []
    for table in TABLES:
        for setting in settings:
            have = got.get((table, setting), set())
            out += [f"{table} {setting}: {name}" for name in sorted(names - have)]
    return out


def test_every_registered_protocol_is_in_both_tables_at_both_settings(script):
    settings = [label for label, *_ in script.SETTINGS]
    gone = missing(GUIDE.read_text(encoding="utf-8"), settings)
    assert not gone, (
        "docs/guide/privacy-audit.md leaves registered protocols out of its tables "
        f"(run python experiments/audit_table.py --part table and --part asr): {gone}"
    )


def test_the_check_fails_for_a_protocol_left_out(script):
    """The check can fail: a row removed, or a refusal line removed, is seen."""
    text = (RESULTS / "table.md").read_text(encoding="utf-8")
    text += "\n" + (RESULTS / "asr.md").read_text(encoding="utf-8")
    assert missing(text, ["A", "B"]) == []
    row = next(line for line in text.splitlines() if line.startswith("| HR |"))
    assert missing(text.replace(row + "\n", "", 1), ["A", "B"]) == ["audit A: HR"]
    line = next(line for line in text.splitlines() if line.startswith("- Not audited"))
    names = re.findall(r"\*\*(.+?)\*\*", line)
    want = [f"audit A: {name}" for name in sorted(names)]
    assert names and missing(text.replace(line + "\n", "", 1), ["A", "B"]) == want


def test_the_guide_shows_the_committed_tables(script):
    """The guide's generated blocks are the script's committed results, as written."""
    guide = GUIDE.read_text(encoding="utf-8")
    for block, name in (("audit table", "table.md"), ("asr table", "asr.md")):
        committed = (RESULTS / name).read_text(encoding="utf-8")
        assert script.with_block(guide, block, committed) == guide, (
            f"docs/guide/privacy-audit.md: its {block} is not {name}; run "
            "python experiments/audit_table.py"
        )


def mismatches(script: types.ModuleType) -> list[str]:
    """The committed rows and lines against the audit plan the traits give today (no audit
    run): each protocol shown the same way (game, black box, refused) and, when refused, with
    the audit's own reason; the ASR table likewise."""
    text = (RESULTS / "table.md").read_text(encoding="utf-8")
    asr = (RESULTS / "asr.md").read_text(encoding="utf-8")
    out = []
    for label, eps_perm, eps_1, rappor in script.SETTINGS:
        section = text.split(f"Setting {label}:")[1].split("Setting ")[0]
        asr_section = asr.split(f"Setting {label}:")[1].split("Setting ")[0]
        for entry in script.entries(eps_perm, eps_1, rappor):
            if entry.audit == "refused":
                why = re.escape(script.refusal_text(entry.label, entry.reason))
                shown = re.search(rf"\*\*{re.escape(entry.label)}\*\*.*{why}", section)
            else:
                how = "game" if entry.audit == "game" else "black box (binned)"
                shown = f"| {entry.label} | {how} |" in section
            if not shown:
                out.append(f"audit {label}: {entry.label}")
        for name, why in script.asr_refusals(eps_perm, eps_1, rappor).items():
            if why is None:
                row = rf"^\| {re.escape(name)}( \(example plan\))? \|"
                shown = re.search(row, asr_section, re.M)
            else:
                why = re.escape(script.refusal_text(name, why))
                shown = re.search(rf"\*\*{re.escape(name)}\*\*.*{why}", asr_section)
            if not shown:
                out.append(f"asr {label}: {name}")
    return out


def test_each_protocol_is_shown_audited_as_its_traits_decide(script):
    assert mismatches(script) == [], "run python experiments/audit_table.py"


def test_a_changed_trait_is_seen(script, monkeypatch):
    """The check can fail: were the game to accept every report kind, the black-box rows and
    the history-dependent mechanisms' lines would no longer be what the traits decide."""
    monkeypatch.setattr(script, "game_refusal", lambda proto: None)
    wrong = mismatches(script)
    assert "audit A: PM" in wrong and "audit B: DDRM" in wrong
    assert not [w for w in wrong if w.startswith("asr")]
