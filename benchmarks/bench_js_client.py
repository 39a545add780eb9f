"""Reports per second of the JavaScript device client in Node beside the Python client's.

Both clients do the same work per report: check the value, the memo (JS: derived once per
value and kept in memory; Python: re-derived from the secret at every report), round 2 from
the OS CSPRNG, a random report id, the budget, and an atomic save of the authenticated state
(JSON + HMAC tag, temporary file, fsync, rename); the queue is acknowledged every 100 reports
as an uploading app would. The state files live on /dev/shm when it exists, so the numbers
measure the clients, not the disk. Measured in one run, for L-OSUE at k = 1,000 and OLOLOHA at
k = 1,000 (ε∞ = 2, ε1 = 1), 5 distinct values reported in turn:

- Python ``DeviceClient`` (state file);
- JS ``DeviceClient`` with ``FileStore`` (the same files) and with ``MemoryStore``;
- JS first reports: every report a new value, so round 1 (the HMAC stream over WebCrypto) is
  derived each time.

Each figure is the best of three runs.

Usage: ``python benchmarks/bench_js_client.py [--reports 500]``; results in
benchmarks/results/js_client.json. Needs node ≥ 20 on the PATH.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import longldp as ll
from longldp.client import DeviceClient

ROOT = Path(__file__).resolve().parents[1]
SPECS = {
    "L-OSUE k=1000": {"name": "L-OSUE", "params": {"k": 1000, "eps_perm": 2.0, "eps_1": 1.0}},
    "OLOLOHA k=1000": {"name": "OLOLOHA", "params": {"k": 1000, "eps_perm": 2.0, "eps_1": 1.0}},
}
VALUES = 5


def python_rate(spec: dict, reports: int, folder: Path) -> float:
    folder.mkdir()
    client = DeviceClient(folder / "py-state.json", ll.protocol_from_spec(spec), "bench")
    t0 = time.perf_counter()
    for i in range(reports):
        client.report(i % VALUES, epoch=i)
        if len(client.queue) >= 100:
            client.acknowledge([q.id for q in client.queue])
    return reports / (time.perf_counter() - t0)


def js_rates(spec: dict, reports: int, folder: Path) -> dict[str, float]:
    node = shutil.which("node")
    if node is None:
        raise SystemExit("bench_js_client: node (>= 20) is required on the PATH")
    arg = json.dumps({"spec": spec, "reports": reports, "values": VALUES, "dir": str(folder)})
    out = subprocess.run(
        [node, str(ROOT / "benchmarks" / "bench_js_client.mjs"), arg],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reports", type=int, default=500)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "js_client.json")
    args = ap.parse_args()
    base = Path("/dev/shm") if Path("/dev/shm").is_dir() else None
    rows = []
    for label, spec in SPECS.items():
        with tempfile.TemporaryDirectory(dir=base) as tmp:
            folder = Path(tmp)
            # best of three runs each, as the JS side does (the machine is shared)
            py = max(python_rate(spec, args.reports, folder / str(i)) for i in range(3))
            js = js_rates(spec, args.reports, folder)
        rows.append(
            {
                "protocol": label,
                "python_reports_per_s": round(py, 1),
                "js_file_reports_per_s": round(js["file"], 1),
                "js_memory_reports_per_s": round(js["memory"], 1),
                "js_first_reports_per_s": round(js["first_memory"], 1),
                "js_file_over_python": round(js["file"] / py, 2),
            }
        )
        print(json.dumps(rows[-1]))
    args.out.write_text(
        json.dumps({"reports": args.reports, "state_dir": str(base), "rows": rows}, indent=2) + "\n"
    )


if __name__ == "__main__":
    main()
