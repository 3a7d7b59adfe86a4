#!/usr/bin/env python3
"""Times Shelf's recognizer against the tesseract CLI on the OCR corpus pages and scores both.

    python3 bench/ocr_bench.py [--runs N] [--example PATH]

Shelf: the `ocr` example (release; build it first with
`cargo build --release -p shelf-ocr --example ocr`), every page in one process, `--jobs 1`
(one page at a time) and `--jobs 2` (two pages at once), orientation detection on (as in
production). While it runs, the process's thread count and CPU time are sampled from /proc to
show that each page uses one core (OpenMP limited to one thread per engine).

`shelf-no-osd` is the same without orientation detection (like for like with the CLI).

CLI: `OMP_THREAD_LIMIT=1 tesseract FILE -`, one process per page, one at a time and two at
once. The CLI runs no orientation detection and loads its models once per page.

Accuracy: character error rate with /work/shared/bench/fidelity.py --cer against each page's
ground truth. Only the Python standard library is used.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests/corpus/ocr/tesseract"
PAGES = ["phototest.tif", "eurotext.tif", "8071_093.3B.tif", "8087_054.3B.tif"]
FIDELITY = Path("/work/shared/bench/fidelity.py")
TARGET = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))


def cer(expected: Path, candidate: Path) -> float:
    out = subprocess.run([sys.executable, str(FIDELITY), "--cer", "--json", str(expected), str(candidate)],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out.splitlines()[0])["cer"]


def sample(pid: int, stop: threading.Event, seen: dict) -> None:
    """Largest thread count of `pid` while it runs."""
    while not stop.is_set():
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("Threads:"):
                    seen["threads"] = max(seen.get("threads", 0), int(line.split()[1]))
        except OSError:
            return
        time.sleep(0.02)


def run_shelf(example: Path, jobs: int, out: Path, extra: list[str]) -> dict:
    files = [str(CORPUS / p) for p in PAGES]
    start = time.perf_counter()
    before = os.times()
    proc = subprocess.Popen([str(example), "--quiet", "--jobs", str(jobs), "--out", str(out), *extra, *files],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    stop, seen = threading.Event(), {}
    t = threading.Thread(target=sample, args=(proc.pid, stop, seen))
    t.start()
    stdout, stderr = proc.communicate()
    stop.set()
    t.join()
    wall = time.perf_counter() - start
    after = os.times()
    if proc.returncode != 0:
        raise SystemExit(f"shelf example failed:\n{stdout}\n{stderr}")
    cpu = (after.children_user - before.children_user) + (after.children_system - before.children_system)
    return {"wall": wall, "cpu": cpu, "threads": seen.get("threads", 0), "log": stdout}


def run_cli(jobs: int, out: Path) -> dict:
    env = dict(os.environ, OMP_THREAD_LIMIT="1")

    def one(page: str) -> None:
        text = subprocess.run(["tesseract", str(CORPUS / page), "-"], env=env, check=True,
                              capture_output=True, text=True).stdout
        (out / f"{Path(page).stem}-0.txt").write_text(text)

    start = time.perf_counter()
    before = os.times()
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        list(pool.map(one, PAGES))
    after = os.times()
    cpu = (after.children_user - before.children_user) + (after.children_system - before.children_system)
    return {"wall": time.perf_counter() - start, "cpu": cpu}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3, help="runs per configuration; the best is kept")
    ap.add_argument("--example", type=Path, default=TARGET / "release/examples/ocr")
    a = ap.parse_args()
    if not a.example.exists():
        raise SystemExit(f"{a.example} is missing: cargo build --release -p shelf-ocr --example ocr")
    rows = []
    scores: dict[str, dict[str, float]] = {}
    configs = [("shelf", 1, []), ("shelf", 2, []), ("shelf-no-osd", 1, ["--no-osd"]),
               ("shelf-no-osd", 2, ["--no-osd"]), ("cli", 1, []), ("cli", 2, [])]
    for name, jobs, extra in configs:
        best = None
        for _ in range(a.runs):
            with tempfile.TemporaryDirectory() as tmp:
                out = Path(tmp)
                r = (run_shelf(a.example, jobs, out, extra) if name.startswith("shelf")
                     else run_cli(jobs, out))
                if best is None or r["wall"] < best["wall"]:
                    best = r
                    scores[name] = {p: cer(CORPUS / (Path(p).stem + ".txt"), out / f"{Path(p).stem}-0.txt")
                                    for p in PAGES}
        rows.append((name, jobs, best))
    print(f"{len(PAGES)} pages: {', '.join(PAGES)}; best of {a.runs} runs; {os.cpu_count()} cores")
    print(f"{'engine':13} {'at once':>7} {'wall s':>7} {'pages/s':>8} {'cpu s':>6} {'cpu/wall':>8} {'threads':>7}")
    for name, jobs, r in rows:
        threads = r.get("threads", "")
        print(f"{name:13} {jobs:>7} {r['wall']:7.2f} {len(PAGES) / r['wall']:8.2f} {r['cpu']:6.2f} "
              f"{r['cpu'] / r['wall']:8.2f} {threads!s:>7}")
    print()
    print(f"{'page':22} {'shelf CER':>9} {'cli CER':>8}")
    for p in PAGES:
        print(f"{p:22} {scores['shelf'][p]:9.4f} {scores['cli'][p]:8.4f}")
    mean = lambda k: sum(scores[k].values()) / len(PAGES)
    print(f"{'mean':22} {mean('shelf'):9.4f} {mean('cli'):8.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
