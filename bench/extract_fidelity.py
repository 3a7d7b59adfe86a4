#!/usr/bin/env python3
"""Fidelity and speed of Shelf's extractors against ground truth, beside the tools a user could
pick instead: `pdftotext` (poppler) for PDF, MarkItDown for office, e-book and web documents.

    python3 bench/extract_fidelity.py [--corpus ../shared/corpus] [--markitdown VENV_PYTHON]
                                      [--kinds pdf,docx,...] [--json OUT.json]

Builds nothing: run `cargo build --release -p shelf-extractors --example extract` first (the
script says so if the binary is missing). Scores with ../shared/bench/fidelity.py (word-sequence
similarity `seq` and word F1 after its normalization); a file a tool fails on scores 0.
Speed is measured in process for both Shelf (the example binary's own per-file timing) and
MarkItDown (its `convert` call timed inside one Python process); pdftotext is timed per
process, as a user runs it. MarkItDown is optional: `python3 -m venv /tmp/mid-venv &&
/tmp/mid-venv/bin/pip install 'markitdown[all]'`, then `--markitdown /tmp/mid-venv/bin/python`.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXTRACT = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target")) / "release/examples/extract"

# kind -> (sources dir, expected dir, how a source's expected file is named)
KINDS = {
    "pdf": ("pdf/docling/sources", "pdf/docling/expected", "stem"),
    "docx": ("office/docx/sources", "office/docx/expected", "name"),
    "pptx": ("office/pptx/sources", "office/pptx/expected", "name"),
    "xlsx": ("office/xlsx/sources", "office/xlsx/expected", "name"),
    "odf": ("office/odf/sources", "office/odf/expected", "name"),
    "epub": ("office/epub/sources", "office/epub/expected", "name"),
    "html": ("office/html/sources", "office/html/expected", "name"),
    "webvtt": ("office/webvtt/sources", "office/webvtt/expected", "name"),
    # Email, notebooks, markup sources, XML dialects and YAML: documents written for this
    # bench with the text a careful reader takes from each (bench/fidelity/README.md).
    "made": (str(ROOT / "bench/fidelity/sources"), str(ROOT / "bench/fidelity/expected"), "name"),
}

MARKITDOWN_SCRIPT = r"""
import sys, time, json
from pathlib import Path
from markitdown import MarkItDown
md = MarkItDown()
out = Path(sys.argv[1])
for src in sys.argv[2:]:
    t = time.perf_counter()
    try:
        text = md.convert(src).text_content
        ok = True
    except Exception as e:
        text, ok = "", False
    ms = (time.perf_counter() - t) * 1000
    (out / (Path(src).name + ".md")).write_text(text or "", encoding="utf-8")
    print(json.dumps({"file": Path(src).name, "ok": ok, "ms": ms}), flush=True)
"""


def load_fidelity(bench_dir: Path):
    sys.path.insert(0, str(bench_dir))
    import fidelity  # noqa: E402

    return fidelity


def pairs_for(corpus: Path, kind: str) -> list[tuple[Path, Path]]:
    src_dir, exp_dir, naming = KINDS[kind]
    out = []
    for src in sorted((corpus / src_dir).iterdir()):
        if src.suffix.lower() in (".pdf",) and kind == "odf":
            continue  # the PDF renderings beside the ODF sources
        expected = corpus / exp_dir / (src.stem + ".md" if naming == "stem" else src.name + ".md")
        if expected.exists():
            out.append((src, expected))
    return out


def run_shelf(files: list[Path], out: Path) -> dict[str, dict]:
    proc = subprocess.run([str(EXTRACT), "--out", str(out), *map(str, files)],
                          capture_output=True, text=True)
    stats = {}
    for line in proc.stderr.splitlines():
        parts = line.split("\t")
        if len(parts) >= 3 and parts[1] != "warning":
            try:
                stats[parts[0]] = {"ok": parts[1] == "ok", "ms": float(parts[2])}
            except ValueError:
                pass
    return stats


def run_pdftotext(files: list[Path], out: Path) -> dict[str, dict]:
    stats = {}
    for f in files:
        t = time.perf_counter()
        proc = subprocess.run(["pdftotext", "-enc", "UTF-8", str(f), str(out / (f.name + ".md"))],
                              capture_output=True)
        stats[f.name] = {"ok": proc.returncode == 0, "ms": (time.perf_counter() - t) * 1000}
    return stats


def run_markitdown(python: str, files: list[Path], out: Path) -> dict[str, dict]:
    proc = subprocess.run([python, "-c", MARKITDOWN_SCRIPT, str(out), *map(str, files)],
                          capture_output=True, text=True)
    stats = {}
    for line in proc.stdout.splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            continue
        stats[row["file"]] = {"ok": row["ok"], "ms": row["ms"]}
    return stats


def score_all(fidelity, pairs, out: Path, stats: dict) -> list[dict]:
    rows = []
    for src, expected in pairs:
        candidate = out / (src.name + ".md")
        ok = stats.get(src.name, {}).get("ok", False) and candidate.exists()
        exp_words = fidelity.words(fidelity.read(str(expected)))
        cand_words = fidelity.words(fidelity.read(str(candidate))) if ok else []
        rows.append({
            "file": src.name,
            "ok": ok,
            "seq": fidelity.seq_similarity(exp_words, cand_words),
            "f1": fidelity.word_f1(exp_words, cand_words),
            "ms": stats.get(src.name, {}).get("ms", 0.0),
        })
    return rows


def mean(rows, key):
    return sum(r[key] for r in rows) / len(rows) if rows else 0.0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", default=str(ROOT.parent / "shared/corpus"))
    ap.add_argument("--fidelity-dir", default=str(ROOT.parent / "shared/bench"),
                    help="where fidelity.py lives")
    ap.add_argument("--markitdown", help="python of a venv with markitdown[all]")
    ap.add_argument("--kinds", default=",".join(KINDS))
    ap.add_argument("--json", help="write every per-file row here")
    a = ap.parse_args()
    if not EXTRACT.exists():
        print(f"missing {EXTRACT}: cargo build --release -p shelf-extractors --example extract")
        return 2
    corpus = Path(a.corpus).resolve()
    fidelity = load_fidelity(Path(a.fidelity_dir))
    report = {}
    summary = []
    for kind in a.kinds.split(","):
        pairs = pairs_for(corpus, kind)
        if not pairs:
            continue
        files = [src for src, _ in pairs]
        tools = {"shelf": run_shelf}
        if kind == "pdf":
            tools["pdftotext"] = run_pdftotext
        elif a.markitdown and kind not in ("webvtt", "made"):
            tools["markitdown"] = lambda fs, o: run_markitdown(a.markitdown, fs, o)
        for tool, runner in tools.items():
            with tempfile.TemporaryDirectory() as tmp:
                out = Path(tmp)
                stats = runner(files, out)
                rows = score_all(fidelity, pairs, out, stats)
            report.setdefault(kind, {})[tool] = rows
            total_ms = sum(r["ms"] for r in rows)
            docs_per_s = len(rows) / (total_ms / 1000) if total_ms else 0.0
            failed = sum(1 for r in rows if not r["ok"])
            summary.append((kind, tool, len(rows), failed, mean(rows, "seq"), mean(rows, "f1"), docs_per_s))
    print(f"{'kind':8} {'tool':11} {'files':>5} {'failed':>6} {'seq':>6} {'f1':>6} {'docs/s':>9}")
    for kind, tool, n, failed, seq, f1, dps in summary:
        print(f"{kind:8} {tool:11} {n:5d} {failed:6d} {seq:6.3f} {f1:6.3f} {dps:9.1f}")
    for tool in ("shelf", "markitdown", "pdftotext"):
        rows = [r for kind in report for t, rs in report[kind].items() if t == tool for r in rs]
        if rows:
            print(f"all      {tool:11} {len(rows):5d} {sum(1 for r in rows if not r['ok']):6d} "
                  f"{mean(rows, 'seq'):6.3f} {mean(rows, 'f1'):6.3f}")
    # Per file, Shelf beside the other tool, worst first.
    for kind, tools in report.items():
        other = next((t for t in tools if t != "shelf"), None)
        if not other:
            continue
        by_file = {r["file"]: r for r in tools[other]}
        lines = sorted(((r["seq"] - by_file[r["file"]]["seq"], r, by_file[r["file"]]) for r in tools["shelf"]),
                       key=lambda x: x[0])
        print(f"\n{kind}: shelf vs {other} (seq), worst first")
        for delta, mine, theirs in lines[:8]:
            print(f"  {delta:+.3f}  shelf {mine['seq']:.3f} {other} {theirs['seq']:.3f}  {mine['file']}")
    if a.json:
        Path(a.json).write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
