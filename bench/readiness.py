#!/usr/bin/env python3
"""Readiness figures for issue 22 (docs/PERFORMANCE.md, "Readiness and disk space").

latency: /ready latency on an existing (big) data directory: N sequential GETs, p50/p95/max.
churn:   an API and a worker on a fresh data directory; a feeder queues Cranfield documents in
         batches (`shelf import DIR --mode queue`) while /ready is polled every 50 ms; counts
         non-200 answers.

usage: ready_bench.py latency BIN DATA_DIR N [EXTRA_ENV=VALUE ...]
       ready_bench.py churn BIN DOCS_DIR POLLS [EXTRA_ENV=VALUE ...]
"""
import json, os, shutil, subprocess, sys, tempfile, threading, time, urllib.request, urllib.error


def env_for(data_dir, extra=()):
    env = {k: v for k, v in os.environ.items() if not k.startswith("SHELF_")}
    env.update(SHELF_DATA_DIR=data_dir, SHELF_LLM_PROVIDER="mock", SHELF_LOG_LEVEL="warn")
    for item in extra:
        k, v = item.split("=", 1)
        env[k] = v
    return env


def start_api(binary, env):
    p = subprocess.Popen([binary, "api", "--port", "0"], env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, text=True)
    line = p.stdout.readline().strip()
    base = line.split("listening on ", 1)[1]
    return p, base


def get(url):
    t = time.perf_counter()
    try:
        with urllib.request.urlopen(url, timeout=60) as r:
            r.read()
            code = r.status
    except urllib.error.HTTPError as e:
        body = e.read().decode(errors="replace")
        code = (e.code, body)
    return code, time.perf_counter() - t


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def latency(binary, data_dir, n, extra=()):
    env = env_for(data_dir, extra)
    api, base = start_api(binary, env)
    try:
        times, bad = [], 0
        for _ in range(int(n)):
            code, dt = get(base + "/ready")
            times.append(dt)
            bad += code != 200
        print(json.dumps({"calls": len(times), "non_200": bad,
                          "p50_ms": round(pct(times, 0.5) * 1000, 2),
                          "p95_ms": round(pct(times, 0.95) * 1000, 2),
                          "max_ms": round(max(times) * 1000, 2),
                          "first_ms": round(times[0] * 1000, 2)}))
    finally:
        api.terminate(); api.wait()


def churn(binary, docs_dir, polls, extra):
    tmp = tempfile.mkdtemp(prefix="ready-churn-")
    data = os.path.join(tmp, "data")
    env = env_for(data, extra)
    subprocess.run([binary, "migrate"], env=env, check=True, capture_output=True)
    api, base = start_api(binary, env)
    worker = subprocess.Popen([binary, "worker"], env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    files = sorted(os.listdir(docs_dir))
    stop = threading.Event()
    queued = [0]

    def feeder():
        i = 0
        while not stop.is_set() and i < len(files):
            batch = os.path.join(tmp, f"in-{i}")
            os.makedirs(batch)
            for name in files[i:i + 40]:
                shutil.copy(os.path.join(docs_dir, name), batch)
            r = subprocess.run([binary, "import", batch, "--mode", "queue", "--json"], env=env,
                               capture_output=True, text=True)
            try:
                queued[0] += sum(1 for f in json.loads(r.stdout)["files"] if f.get("run_status") == "queued")
            except Exception:
                pass
            i += 40

    t = threading.Thread(target=feeder); t.start()
    time.sleep(2)
    bad, reasons, times = 0, {}, []
    try:
        for _ in range(int(polls)):
            code, dt = get(base + "/ready")
            times.append(dt)
            if code != 200:
                bad += 1
                reason = code[1][:120] if isinstance(code, tuple) else str(code)
                reasons[reason] = reasons.get(reason, 0) + 1
            time.sleep(0.05)
        with urllib.request.urlopen(base + "/queue") as r:
            q = json.loads(r.read())
        print(json.dumps({"polls": len(times), "non_200": bad, "reasons": reasons,
                          "p50_ms": round(pct(times, 0.5) * 1000, 2),
                          "p95_ms": round(pct(times, 0.95) * 1000, 2),
                          "runs_queued_total": queued[0],
                          "runs_left": q["queued"] + q["running"]}))
    finally:
        stop.set(); t.join()
        worker.terminate(); worker.wait()
        api.terminate(); api.wait()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "latency":
        latency(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5:])
    else:
        churn(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5:])
