#!/usr/bin/env python3
"""Search benchmark and relevance evaluation (Python stdlib only, except `reference`).

Subcommands (see docs/PERFORMANCE.md, section Search, and bench/search.sh which runs them all):

  load     --base-url URL
           uploads the 1,400 Cranfield records as cranfield-<id>.txt (title, blank line,
           abstract) through POST /documents, submits a run for each (POST /runs) and waits
           until every run is terminal. Needs `shelf api` and `shelf worker` (mock provider).
  ndcg     --base-url URL [--raw-db FILE] [--modes keyword semantic hybrid] [--recall]
           runs the 225 Cranfield queries through POST /search/results (limit 10) and prints
           nDCG@10 against qrels/test.tsv (trec_eval's ndcg_cut_10: linear gains, log2
           discounts, ideal from the judged relevant documents; every judged query counts,
           a query with no results scores 0). With --raw-db, the same figure for plain FTS5
           on that file (OR of every query word, ORDER BY rank), as the comparison point.
           --modes: the search `mode`s to evaluate (default keyword: key `shelf_ndcg@10`;
           others `<mode>_ndcg@10`). --recall adds Recall@100 per mode (a second request
           with limit 100: the judged relevant documents found in the top 100, over their
           number, averaged over the judged queries), and for plain FTS5 with --raw-db.
  latency  --base-url URL --db FILE [-c 1 8] [--repeat 2] [--clients processes|threads]
           [--modes keyword semantic hybrid]
           the Cranfield queries through POST /search/results {query, limit: 10} at each
           concurrency, and the same query answered by Python's sqlite3 on the same database
           file (read-only, one connection per client): the top 10 by rank with snippets,
           then count(*), for two expressions: `raw-all` (OR of every word, what a plain FTS5
           client sends) and `raw-same` (the expression Shelf runs: OR of the words without
           stop words). Prints p50/p99/queries-per-second side by side, and one JSON line.
           --modes: the search `mode`s measured (default keyword, side `shelf`; others
           `shelf-<mode>`); semantic and hybrid need SHELF_EMBEDDING_MODEL_DIR on the API.

  reference --model DIR
           all-MiniLM-L6-v2 on Cranfield the way BEIR and MTEB evaluate a sentence encoder,
           without Shelf: one vector per document (title, space, text, truncated at the
           model's 256 word pieces), one per query, cosine, the top 100; prints nDCG@10 and
           Recall@100 as above. The forward pass is embed/tests/fixtures/make_reference.py's
           numpy implementation (float32 here, GELU by its tanh form for speed), so it needs
           numpy, safetensors and tokenizers (pip). A yardstick for Shelf's semantic mode,
           which ranks a document by its best passage instead. About 10 minutes on one core.

Only loopback targets are used; proxies from the environment are ignored.
"""
from __future__ import annotations

import argparse
import http.client
import json
import math
import multiprocessing
import os
import re
import sqlite3
import statistics
import sys
import threading
import time
import urllib.parse
from pathlib import Path

CRANFIELD = Path(__file__).resolve().parent.parent.parent / "shared" / "corpus" / "ir" / "cranfield"
if not CRANFIELD.exists():
    CRANFIELD = Path("/work/shared/corpus/ir/cranfield")

# The same list as documents/src/search/stop_words.rs STOP_WORDS.
STOP_WORDS = set(
    """a about above after again against all am an and any are as at be because been before
    being below between both but by can could did do does doing down during each few for from
    further had has have having he her here hers herself him himself his how i if in into is
    it its itself just me more most my myself no nor not now of off on once only or other our
    ours ourselves out over own same she should so some such than that the their theirs them
    themselves then there these they this those through to too under until up very was we
    were what when where which while who whom why will with would you your yours yourself
    yourselves""".split()
)


def log(msg: str) -> None:
    print(f"[search-bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------
# data
# ---------------------------------------------------------------------------------------
def cranfield_docs() -> list[dict]:
    with open(CRANFIELD / "corpus.jsonl", encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def cranfield_queries() -> list[tuple[str, str]]:
    with open(CRANFIELD / "queries.jsonl", encoding="utf-8") as f:
        return [(q["_id"], q["text"]) for q in map(json.loads, f)]


def cranfield_qrels() -> dict[str, dict[str, int]]:
    qrels: dict[str, dict[str, int]] = {}
    with open(CRANFIELD / "qrels" / "test.tsv", encoding="utf-8") as f:
        next(f)
        for line in f:
            q, d, s = line.rstrip("\n").split("\t")
            if int(s) > 0:
                qrels.setdefault(q, {})[d] = int(s)
    return qrels


def ndcg_at_10(ranked: list[str], relevant: dict[str, int]) -> float:
    dcg = sum(relevant.get(d, 0) / math.log2(i + 2) for i, d in enumerate(ranked[:10]))
    ideal = sorted(relevant.values(), reverse=True)[:10]
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / idcg if idcg else 0.0


def words_of(text: str) -> list[str]:
    return [p for p in re.split(r"[\s!-/:-@\[-`{-~]+", text) if any(c.isalnum() for c in p)]


def fts_terms(text: str, drop_stop_words: bool) -> list[str]:
    """Shelf's normalization for unquoted text: one term per whitespace word, a word with
    punctuation inside becomes a phrase of its parts."""
    terms = []
    for word in text.split():
        parts = words_of(word)
        if not parts:
            continue
        if drop_stop_words and len(parts) == 1 and parts[0].lower() in STOP_WORDS:
            continue
        terms.append('"' + " ".join(parts) + '"')
    return terms


def or_expression(text: str, drop_stop_words: bool) -> str:
    terms = fts_terms(text, drop_stop_words) or fts_terms(text, False)
    return " OR ".join(terms)


# ---------------------------------------------------------------------------------------
# HTTP (one keep-alive connection per thread)
# ---------------------------------------------------------------------------------------
class Api:
    def __init__(self, base_url: str):
        u = urllib.parse.urlsplit(base_url)
        if u.hostname not in ("127.0.0.1", "localhost", "::1"):
            raise SystemExit(f"loopback targets only: {base_url}")
        self.host, self.port = u.hostname, u.port or 80
        self.local = threading.local()

    def conn(self) -> http.client.HTTPConnection:
        c = getattr(self.local, "conn", None)
        if getattr(self.local, "pid", None) != os.getpid():
            c = None  # a forked client never shares its parent's socket
            self.local.pid = os.getpid()
        if c is None:
            c = http.client.HTTPConnection(self.host, self.port, timeout=120)
            self.local.conn = c
        return c

    def request(self, method: str, path: str, body: bytes | None = None,
                headers: dict | None = None) -> tuple[int, bytes]:
        for attempt in range(2):
            c = self.conn()
            try:
                c.request(method, path, body=body, headers=headers or {})
                r = c.getresponse()
                return r.status, r.read()
            except (http.client.HTTPException, OSError):
                c.close()
                self.local.conn = None
                if attempt:
                    raise
        raise RuntimeError("unreachable")

    def post_json(self, path: str, payload: dict) -> tuple[int, dict]:
        status, data = self.request("POST", path, json.dumps(payload).encode(),
                                    {"content-type": "application/json"})
        return status, json.loads(data) if data else {}

    def upload(self, name: str, data: bytes) -> tuple[int, dict]:
        boundary = "shelfbench7d1c"
        body = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; "
                f"filename=\"{name}\"\r\nContent-Type: text/plain\r\n\r\n").encode() + data + \
            f"\r\n--{boundary}--\r\n".encode()
        status, out = self.request("POST", "/documents", body,
                                   {"content-type": f"multipart/form-data; boundary={boundary}"})
        return status, json.loads(out) if out else {}


def run_threads(items: list, worker, concurrency: int) -> list:
    results: list = [None] * len(items)
    lock = threading.Lock()
    next_index = [0]

    def loop() -> None:
        while True:
            with lock:
                i = next_index[0]
                next_index[0] += 1
            if i >= len(items):
                return
            results[i] = worker(items[i])

    threads = [threading.Thread(target=loop) for _ in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


# ---------------------------------------------------------------------------------------
# subcommands
# ---------------------------------------------------------------------------------------
def cmd_load(a) -> None:
    api = Api(a.base_url)
    docs = cranfield_docs()[: a.n]

    def up(doc):
        body = f"{doc['title']}\n\n{doc['text']}\n".encode()
        status, out = api.upload(f"cranfield-{doc['_id']}.txt", body)
        if status not in (200, 201):
            raise SystemExit(f"upload {doc['_id']}: {status} {out}")
        return out["id"]

    t0 = time.monotonic()
    ids = run_threads(docs, up, 4)
    log(f"uploaded {len(ids)} documents in {time.monotonic() - t0:.1f}s")

    def submit(doc_id):
        status, out = api.post_json("/runs", {"document_id": doc_id})
        if status not in (200, 201, 202):
            raise SystemExit(f"run for {doc_id}: {status} {out}")
        return out["id"]

    runs = run_threads(ids, submit, 4)
    pending = list(runs)
    states: dict[str, int] = {}
    while pending:
        status, data = api.request("GET", f"/runs/{pending[0]}")
        state = json.loads(data).get("status") if status == 200 else None
        if state in ("succeeded", "failed", "canceled"):
            pending.pop(0)
            states[state] = states.get(state, 0) + 1
        else:
            time.sleep(0.2)
    secs = time.monotonic() - t0
    log(f"{len(runs)} runs terminal after {secs:.1f}s ({len(runs) / secs:.1f} documents/s, "
        f"{states})")
    print(json.dumps({"documents": len(runs), "seconds": round(secs, 1),
                      "documents_per_s": round(len(runs) / secs, 2), "runs": states}))


def search_body(text: str, limit: int, mode: str) -> dict:
    # keyword is sent without `mode`, as before the modes existed (the default).
    body = {"query": text, "limit": limit}
    if mode != "keyword":
        body["mode"] = mode
    return body


def shelf_ranking(api: Api, text: str, limit: int = 10, mode: str = "keyword") -> list[str]:
    status, page = api.post_json("/search/results", search_body(text, limit, mode))
    if status != 200:
        if mode != "keyword":
            raise SystemExit(f"{mode} search answered {status}: {page}")
        return []
    out = []
    for hit in page.get("results", []):
        m = re.fullmatch(r"cranfield-(\d+)\.txt", hit.get("filename", ""))
        if m:
            out.append(m.group(1))
    return out


def raw_ranking(db: sqlite3.Connection, text: str, drop_stop_words: bool,
                limit: int = 10) -> list[str]:
    rows = db.execute(
        "SELECT d.filename FROM (SELECT rowid AS rid FROM search_cleaned "
        "WHERE search_cleaned MATCH ? ORDER BY rank LIMIT ?) p "
        "JOIN documents d ON d.pk = p.rid",
        (or_expression(text, drop_stop_words), limit),
    ).fetchall()
    out = []
    for (name,) in rows:
        m = re.fullmatch(r"cranfield-(\d+)\.txt", name)
        if m:
            out.append(m.group(1))
    return out


def recall_at(ranked: list[str], relevant: dict[str, int], k: int = 100) -> float:
    return len(set(ranked[:k]) & set(relevant)) / len(relevant) if relevant else 0.0


def cmd_ndcg(a) -> None:
    qrels = cranfield_qrels()
    queries = [(q, t) for q, t in cranfield_queries() if q in qrels]
    api = Api(a.base_url)
    summary: dict = {"queries": len(queries)}
    for mode in a.modes:
        key = "shelf" if mode == "keyword" else mode
        scores = [ndcg_at_10(shelf_ranking(api, t, 10, mode), qrels[q]) for q, t in queries]
        summary[f"{key}_ndcg@10"] = round(statistics.mean(scores), 4)
        if a.recall:
            r = [recall_at(shelf_ranking(api, t, 100, mode), qrels[q]) for q, t in queries]
            summary[f"{key}_recall@100"] = round(statistics.mean(r), 4)
    if a.raw_db:
        db = sqlite3.connect(f"file:{a.raw_db}?mode=ro", uri=True)
        for name, drop in (("raw_or_all_words", False), ("raw_or_without_stop_words", True)):
            s = [ndcg_at_10(raw_ranking(db, t, drop), qrels[q]) for q, t in queries]
            summary[f"{name}_ndcg@10"] = round(statistics.mean(s), 4)
            if a.recall:
                r = [recall_at(raw_ranking(db, t, drop, 100), qrels[q]) for q, t in queries]
                summary[f"{name}_recall@100"] = round(statistics.mean(r), 4)
    print(json.dumps(summary))


def pct(values: list[float], p: float) -> float:
    s = sorted(values)
    k = max(0, min(len(s) - 1, math.ceil(p / 100 * len(s)) - 1))
    return s[k]


def run_processes(items: list, worker, concurrency: int) -> list:
    """Like run_threads, but each client is a forked process with its own connections, so
    the clients' Python work (JSON, HTTP parsing) runs in parallel instead of taking turns
    on one interpreter lock: with threads, the load generator itself caps concurrency 8."""
    ctx = multiprocessing.get_context("fork")
    next_index = ctx.Value("i", 0)
    out = ctx.Queue()

    def loop() -> None:
        done = []
        while True:
            with next_index.get_lock():
                i = next_index.value
                next_index.value += 1
            if i >= len(items):
                break
            done.append((i, worker(items[i])))
        out.put(done)

    procs = [ctx.Process(target=loop) for _ in range(concurrency)]
    for p in procs:
        p.start()
    results: list = [None] * len(items)
    for _ in procs:
        for i, r in out.get():
            results[i] = r
    for p in procs:
        p.join()
    return results


CLIENTS = {"threads": run_threads, "processes": run_processes}
MODES = ["keyword", "semantic", "hybrid"]


def measure(items: list, worker, concurrency: int, clients: str = "processes") -> dict:
    def timed(item):
        t = time.perf_counter()
        worker(item)
        return time.perf_counter() - t

    t0 = time.perf_counter()
    lat = CLIENTS[clients](items, timed, concurrency)
    wall = time.perf_counter() - t0
    return {
        "n": len(lat),
        "p50_ms": round(pct(lat, 50) * 1000, 2),
        "p99_ms": round(pct(lat, 99) * 1000, 2),
        "qps": round(len(lat) / wall, 1),
    }


RAW_PAGE = (
    "SELECT rowid, bm25(search_cleaned), "
    "snippet(search_cleaned, 0, char(57344), char(57345), '…', 24) "
    "FROM search_cleaned WHERE search_cleaned MATCH ? ORDER BY rank LIMIT 10"
)
RAW_COUNT = "SELECT count(*) FROM search_cleaned WHERE search_cleaned MATCH ?"


def cmd_latency(a) -> None:
    api = Api(a.base_url)
    texts = [t for _, t in cranfield_queries()][: a.m] * a.repeat
    local = threading.local()

    def raw_conn() -> sqlite3.Connection:
        c = getattr(local, "db", None)
        if getattr(local, "pid", None) != os.getpid():
            c = None  # nor its SQLite connection
            local.pid = os.getpid()
        if c is None:
            c = sqlite3.connect(f"file:{a.db}?mode=ro", uri=True, check_same_thread=False)
            c.execute("PRAGMA cache_size=-32768")
            local.db = c
        return c

    def shelf(mode):
        def run(text):
            status, _ = api.post_json("/search/results", search_body(text, 10, mode))
            if status != 200:
                raise SystemExit(f"{mode} search answered {status}")
        return run

    def raw(drop):
        def run(text):
            c = raw_conn()
            expr = or_expression(text, drop)
            c.execute(RAW_PAGE, (expr,)).fetchall()
            c.execute(RAW_COUNT, (expr,)).fetchone()
        return run

    # Without --db (a PostgreSQL-backed API) only Shelf's side is measured: the raw FTS5
    # comparison reads a SQLite file.
    sides = [("shelf" if m == "keyword" else f"shelf-{m}", shelf(m)) for m in a.modes]
    docs = a.documents
    if a.db:
        docs = sqlite3.connect(f"file:{a.db}?mode=ro", uri=True).execute(
            "SELECT count(*) FROM search_cleaned").fetchone()[0]
        sides += [("raw-same", raw(True)), ("raw-all", raw(False))]
    # Warm every side (page cache, statement caches, the vector matrix).
    for _, worker in sides:
        measure(texts[:50], worker, 1)
    rows = []
    for c in a.concurrency:
        for name, worker in sides:
            r = measure(texts, worker, c, a.clients)
            r.update({"side": name, "concurrency": c, "clients": a.clients})
            rows.append(r)
            log(f"{name:9s} c={c}: p50 {r['p50_ms']} ms, p99 {r['p99_ms']} ms, {r['qps']} q/s")
    print(f"\n{docs} indexed documents, {len(texts)} queries per row, clients: {a.clients}\n")
    print("| side | concurrency | p50 ms | p99 ms | queries/s |")
    print("|---|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['side']} | {r['concurrency']} | {r['p50_ms']} | {r['p99_ms']} | {r['qps']} |")
    print(json.dumps({"documents": docs, "rows": rows}))


def cmd_reference(a) -> None:
    import importlib.util

    import numpy as np
    from safetensors.numpy import load_file
    from tokenizers import Tokenizer

    path = Path(__file__).resolve().parent.parent / "embed" / "tests" / "fixtures" / "make_reference.py"
    spec = importlib.util.spec_from_file_location("make_reference", path)
    ref = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ref)
    # The exact GELU there calls math.erf per element; the tanh form differs by < 1e-3.
    ref.gelu = lambda x: 0.5 * x * (1.0 + np.tanh(0.7978845608 * (x + 0.044715 * x ** 3)))
    model = Path(a.model)
    cfg = json.load(open(model / "config.json"))
    max_len = json.load(open(model / "sentence_bert_config.json"))["max_seq_length"]
    w = {k: v.astype(np.float32) for k, v in load_file(str(model / "model.safetensors")).items()}
    tok = Tokenizer.from_file(str(model / "tokenizer.json"))
    tok.no_padding()
    tok.enable_truncation(max_length=max_len)

    def embed(text: str):
        v = ref.forward(w, cfg, np.array(tok.encode(text).ids)).mean(0)
        return v / max(float(np.linalg.norm(v)), 1e-12)

    t0 = time.monotonic()
    docs = cranfield_docs()
    ids = [d["_id"] for d in docs]
    matrix = np.stack([embed(f"{d['title']} {d['text']}".strip()) for d in docs])
    log(f"embedded {len(docs)} documents in {time.monotonic() - t0:.0f}s")
    qrels = cranfield_qrels()
    queries = [(q, t) for q, t in cranfield_queries() if q in qrels]
    ndcg, recall = [], []
    for q, t in queries:
        order = np.argsort(-(matrix @ embed(t)), kind="stable")[:100]
        ranked = [ids[i] for i in order]
        ndcg.append(ndcg_at_10(ranked, qrels[q]))
        recall.append(recall_at(ranked, qrels[q]))
    print(json.dumps({"queries": len(queries), "reference_ndcg@10": round(statistics.mean(ndcg), 4),
                      "reference_recall@100": round(statistics.mean(recall), 4)}))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("load")
    p.add_argument("--base-url", required=True)
    p.add_argument("-n", type=int, default=1400)
    p = sub.add_parser("ndcg")
    p.add_argument("--base-url", required=True)
    p.add_argument("--raw-db")
    p.add_argument("--modes", nargs="+", choices=MODES, default=["keyword"])
    p.add_argument("--recall", action="store_true", help="also Recall@100 (limit 100)")
    p = sub.add_parser("latency")
    p.add_argument("--base-url", required=True)
    p.add_argument("--db", help="the API's SQLite file (omit on PostgreSQL: Shelf's side only)")
    p.add_argument("--documents", help="indexed documents, for the report when there is no --db")
    p.add_argument("-c", "--concurrency", type=int, nargs="+", default=[1, 8])
    p.add_argument("-m", type=int, default=225)
    p.add_argument("--repeat", type=int, default=2)
    p.add_argument("--clients", choices=sorted(CLIENTS), default="processes",
                   help="client threads in this process, or one forked process per client "
                        "(default: processes)")
    p.add_argument("--modes", nargs="+", choices=MODES, default=["keyword"])
    p = sub.add_parser("reference")
    p.add_argument("--model", required=True, help="the all-MiniLM-L6-v2 directory")
    a = ap.parse_args()
    {"load": cmd_load, "ndcg": cmd_ndcg, "latency": cmd_latency, "reference": cmd_reference}[a.cmd](a)
    return 0


if __name__ == "__main__":
    sys.exit(main())
