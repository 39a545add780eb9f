"""Collecting for real, on one machine: a server, a collection, 10,000 devices over 10 epochs.

What it does (``make serve-demo``):

1. starts ``longldp serve`` on 127.0.0.1 with a SQLite file in a temporary folder (on
   /dev/shm when available: the demo's data is deleted at the end anyway);
2. creates a collection (L-OSUE over 16 app categories, ε∞ = 2, ε1 = 1) with the admin token;
3. plays 10,000 devices with the real device client (``longldp.client.DeviceClient``): each
   keeps its state file (memos, budget, upload queue; on /dev/shm when available, so 200,000
   atomic saves do not wait for a disk) and reports its category of the day in each of 10
   epochs; the popularity of one category grows over the epochs, so the chart has a trend;
4. uploads: every device enrolls on its first upload with the collection's enrollment token
   (device identities, docs/server.md), keeps its credential in its state file, and flushes its
   own queue with the client's ``Uploader`` every 5 epochs; a report leaves a device's queue
   only after the server's 200;
5. prints true and estimated frequencies of the last epoch, and the dashboard URL; the server
   keeps running until Ctrl-C (``--exit`` stops it at once).

Stopping it any way (Ctrl-C, SIGTERM, SIGHUP, or the death of the process that started it,
such as ``make``) stops the server and the device processes and removes both temporary
folders.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import numpy as np

import longldp as ll
from longldp.client import DeviceClient
from longldp.client.upload import Uploader

ROOT = Path(__file__).resolve().parents[1]
SPEC = {"name": "L-OSUE", "params": {"k": 16, "eps_perm": 2.0, "eps_1": 1.0}}


def http(
    method: str, url: str, token: str, body: bytes | None = None, kind: str = "application/json"
) -> dict:
    req = urllib.request.Request(
        url,
        data=body,
        method=method,
        headers={"Authorization": f"Bearer {token}", "Content-Type": kind},
    )
    with urllib.request.urlopen(req, timeout=60) as resp:
        return json.loads(resp.read())


def free_port(preferred: int) -> int:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", preferred))
        except OSError:
            s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def values_of(rng: np.random.Generator, habits: np.ndarray, epoch: int, k: int) -> np.ndarray:
    """Each device's category this epoch: its habit, or (growing with the epoch) category 3."""
    n = habits.size
    trend = rng.random(n) < 0.03 * epoch
    other = rng.random(n) < 0.2
    out = np.where(other, rng.integers(0, k, n), habits)
    return np.where(trend, 3, out)


WORKERS = 2


#: Devices upload every this many epochs (and after the last): fewer requests, and a queue
#: spanning a few epochs, as a device that is often offline would have.
UPLOAD_EVERY = 5


def play_devices(job: tuple) -> dict:
    """One process's share of the devices, over every epoch: report, then upload. Each device
    enrolls on its first upload (the collection's enrollment token) and keeps its credential
    in its state file; every report it uploads is bound to it."""
    worker, first, values, base, enroll_token, states = job
    proto = ll.protocol(SPEC["name"], **SPEC["params"])
    devices = [
        DeviceClient(states / f"d{first + i}.json", proto, "app-usage", secret=os.urandom(32))
        for i in range(values.shape[1])
    ]
    uploader = Uploader(base, "app-usage", enroll_token=enroll_token, base_delay=0.2)
    t0 = time.perf_counter()
    for epoch, row in enumerate(values):
        for dev, v in zip(devices, row, strict=True):
            dev.report(int(v), epoch)
        if (epoch + 1) % UPLOAD_EVERY == 0 or epoch == len(values) - 1:
            for dev in devices:
                uploader.flush(dev)
        if worker == 0:
            print(
                f"epoch {epoch}: reported ({time.perf_counter() - t0:.0f} s)",
                flush=True,
            )
    b = devices[0].spent_budget
    return {"left": sum(len(d.queue) for d in devices), "spent": (b.epsilon, b.reports, b.memos)}


def _stop(signum: int, _frame: object) -> None:
    """SIGTERM and SIGHUP end the demo like Ctrl-C: through main()'s cleanup."""
    raise SystemExit(128 + signum)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--devices", type=int, default=10_000)
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--port", type=int, default=8000)
    ap.add_argument("--seed", type=int, default=2026, help="seed of the simulated true values")
    ap.add_argument("--exit", action="store_true", help="stop the server when done")
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGHUP, _stop)
    parent = os.getppid()
    # The demo's database and device states are thrown away at the end: on /dev/shm (memory)
    # when there is one, so that the ~30,000 commits wait for no disk.
    shm = Path("/dev/shm")
    work = Path(tempfile.mkdtemp(prefix="longldp-demo-", dir=shm if shm.is_dir() else None))
    states = Path(
        tempfile.mkdtemp(prefix="longldp-demo-devices-", dir=shm if shm.is_dir() else None)
    )
    print(f"temporary folders: {work} {states}", flush=True)
    server: subprocess.Popen | None = None
    pool = None
    try:
        port = free_port(args.port)
        base = f"http://127.0.0.1:{port}"
        admin = "ll_admin_" + secrets.token_urlsafe(24)
        env = {
            **os.environ,
            "LONGLDP_ADMIN_TOKEN": admin,
            "PYTHONPATH": str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""),
        }
        db = work / "demo.db"
        server = subprocess.Popen(
            [sys.executable, "-m", "longldp", "serve", "--db", str(db), "--port", str(port)],
            env=env,
        )
        print(f"server process: {server.pid}", flush=True)
        for _ in range(300):
            try:
                urllib.request.urlopen(f"{base}/healthz", timeout=1)
                break
            except OSError:
                time.sleep(0.1)
        col = http(
            "POST",
            f"{base}/v1/collections",
            admin,
            json.dumps(
                {
                    "name": "app-usage",
                    "protocol": SPEC,
                    # Devices upload every few epochs and the two device processes do not
                    # keep pace: a window as long as the demo keeps late reports open.
                    "epoch_window": max(8, args.epochs),
                    # The demo's devices all enroll within a minute or two: the collection
                    # expects them and admits them at that rate (docs/server.md, "Sybil
                    # bounds"; the server's default rate is 600 a minute).
                    "expected_devices": args.devices,
                    "max_devices": args.devices,
                    "enroll_per_minute": max(600, args.devices),
                    "postprocess": "norm-sub",
                    "description": "Category of the most used app of the day (simulated devices).",
                }
            ).encode(),
        )
        print(f"server: {base} (database {db})")
        print(f"collection 'app-usage': {col['privacy']['words']}")
        proto = ll.protocol(SPEC["name"], **SPEC["params"])
        rng = np.random.default_rng(args.seed)
        habits = np.minimum(rng.geometric(0.25, args.devices) - 1, proto.k - 1)
        values = np.stack([values_of(rng, habits, e, proto.k) for e in range(args.epochs)])
        truth = [np.bincount(v, minlength=proto.k) / args.devices for v in values]
        # Two processes, each playing half of the devices (the machine's two cores).
        cut = np.linspace(0, args.devices, WORKERS + 1).astype(int)
        jobs = [
            (w, int(cut[w]), values[:, cut[w] : cut[w + 1]], base, col["enroll_token"], states)
            for w in range(WORKERS)
        ]
        t0 = time.perf_counter()
        pool = multiprocessing.get_context("fork").Pool(WORKERS)
        results = pool.map(play_devices, jobs)
        pool.close()
        pool.join()
        pool = None
        left = sum(r["left"] for r in results)
        print(
            f"{args.devices:,} devices × {args.epochs} epochs in "
            f"{time.perf_counter() - t0:.0f} s; {left} reports left in queues"
        )
        spent = results[0]["spent"]
        print(f"device 0 spent ε = {spent[0]:.3g} over {spent[1]} reports ({spent[2]} memos)")
        last = args.epochs - 1
        est = http(
            "GET",
            f"{base}/v1/collections/app-usage/epochs/{last}/estimate?postprocess=none",
            col["read_token"],
        )
        print(f"epoch {last}: value, true frequency, estimate ± 1.96 SE")
        for v in range(proto.k):
            print(
                f"  {v:2d}  {truth[-1][v]:.3f}  {est['estimate'][v]:+.3f} ± "
                f"{1.959963984540054 * est['se'][v]:.3f}"
            )
        print(f"\ndashboard: {base}/collections/app-usage/dashboard?token={col['read_token']}")
        if args.exit:
            return
        print("server running; Ctrl-C to stop.", flush=True)
        # Serve until interrupted, the server dies, or whoever started the demo is gone.
        while server.poll() is None and os.getppid() == parent:
            time.sleep(0.5)
    except KeyboardInterrupt:
        pass
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, signal.SIG_IGN)  # the cleanup itself is not interrupted
        if pool is not None:
            pool.terminate()
            pool.join()
        if server is not None and server.poll() is None:
            server.terminate()
            try:
                server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()
        shutil.rmtree(states, ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
