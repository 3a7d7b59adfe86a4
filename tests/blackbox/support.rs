//! Starting the built `shelf` binary (cargo builds it for this test target) against a fresh
//! data directory.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;
use tempfile::TempDir;

/// The `shelf` binary cargo built for this test run.
pub fn shelf_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_shelf"))
}

/// Real documents vendored from ../shared/corpus (see tests/corpus/README.md).
pub fn corpus(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/corpus")
        .join(relative)
}

/// A fresh data directory and the environment every command of a test shares.
pub struct Env {
    pub dir: TempDir,
    pub vars: Vec<(String, String)>,
}

impl Env {
    pub fn new() -> Env {
        let dir = tempfile::tempdir().expect("tempdir");
        let data = dir.path().join("data");
        Env {
            vars: vec![
                ("SHELF_DATA_DIR".into(), data.display().to_string()),
                ("SHELF_LLM_PROVIDER".into(), "mock".into()),
            ],
            dir,
        }
    }

    pub fn with(mut self, key: &str, value: &str) -> Env {
        self.vars.retain(|(k, _)| k != key);
        self.vars.push((key.into(), value.into()));
        self
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// A file the test writes into its own directory.
    pub fn write(&self, name: &str, contents: impl AsRef<[u8]>) -> PathBuf {
        let path = self.dir.path().join(name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).expect("mkdir");
        }
        std::fs::write(&path, contents).expect("write");
        path
    }

    pub fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(shelf_bin());
        for (key, _) in std::env::vars() {
            if key.starts_with("SHELF_") {
                cmd.env_remove(key);
            }
        }
        cmd.args(args)
            .envs(self.vars.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null());
        cmd
    }

    pub fn run(&self, args: &[&str]) -> Output {
        self.command(args).output().expect("run shelf")
    }

    /// Runs a command that must succeed and prints JSON; returns that JSON.
    pub fn json(&self, args: &[&str]) -> Value {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "shelf {args:?} failed ({:?}):\nstdout: {}\nstderr: {}",
            out.status.code(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "shelf {args:?} printed no JSON ({e}): {}",
                String::from_utf8_lossy(&out.stdout)
            )
        })
    }

    /// `shelf import FILE --mode queue`: the document and its queued run, as (document id,
    /// run id).
    pub fn queue(&self, file: &Path) -> (String, String) {
        let report = self.json(&[
            "import",
            &file.display().to_string(),
            "--mode",
            "queue",
            "--json",
        ]);
        let record = &report["files"][0];
        assert_eq!(record["run_status"], "queued", "{report}");
        (
            record["document_id"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
            record["run_id"].as_str().unwrap_or_default().to_string(),
        )
    }

    /// Starts a long-running command (worker, api) that is killed when dropped.
    pub fn spawn(&self, args: &[&str]) -> Running {
        let child = self
            .command(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn shelf");
        Running { child }
    }
}

pub struct Running {
    pub child: Child,
}

impl Running {
    /// SIGKILL: no chance to clean up, like a crash or an OOM kill.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// SIGTERM, then wait for a clean exit.
    pub fn terminate(&mut self, within: Duration) -> Option<std::process::ExitStatus> {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let deadline = Instant::now() + within;
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        None
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Waits for a spawned server's first stdout line, `prefix` then its base URL, and returns the
/// URL and its stderr so far (drained in the background: a full pipe would block its logging).
pub fn announced(process: &mut Running, prefix: &str) -> (String, Arc<Mutex<String>>) {
    let stdout = process.child.stdout.take().expect("stdout");
    let stderr = process.child.stderr.take().expect("stderr");
    let log = Arc::new(Mutex::new(String::new()));
    let sink = log.clone();
    std::thread::spawn(move || {
        let mut reader = BufReader::new(stderr);
        let mut line = String::new();
        while reader.read_line(&mut line).map(|n| n > 0).unwrap_or(false) {
            if let Ok(mut log) = sink.lock() {
                log.push_str(&line);
            }
            line.clear();
        }
    });
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut reader = BufReader::new(stdout);
        let mut first = String::new();
        let _ = reader.read_line(&mut first);
        let _ = tx.send(first);
        let mut rest = Vec::new();
        let _ = reader.read_to_end(&mut rest);
    });
    let line = rx.recv_timeout(Duration::from_secs(30)).unwrap_or_default();
    let base = line
        .trim()
        .strip_prefix(prefix)
        .unwrap_or_else(|| {
            std::thread::sleep(Duration::from_millis(200));
            panic!(
                "no {prefix:?} line: {line:?}\nstderr: {}",
                log.lock().map(|l| l.clone()).unwrap_or_default()
            )
        })
        .to_string();
    (base, log)
}

/// Runs a system tool with `input` on its stdin; its output. Panics naming `needs` (where to
/// get the tool) when it cannot be started.
pub fn pipe_through(program: &str, args: &[&str], input: &[u8], needs: &str) -> Output {
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{program} is needed ({needs}): {e}"));
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input)
        .expect("write");
    child.wait_with_output().expect(program)
}

/// Polls `check` until it returns Some, or panics after `timeout`.
pub fn wait_for<T>(timeout: Duration, what: &str, mut check: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = check() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Reads a process's output to the end in the background (a full pipe would block the
/// process); the text so far is in the returned buffer.
pub fn drain(output: impl Read + Send + 'static) -> Arc<Mutex<String>> {
    let log = Arc::new(Mutex::new(String::new()));
    let sink = log.clone();
    std::thread::spawn(move || {
        let mut reader = BufReader::new(output);
        let mut line = String::new();
        while reader.read_line(&mut line).map(|n| n > 0).unwrap_or(false) {
            if let Ok(mut log) = sink.lock() {
                log.push_str(&line);
            }
            line.clear();
        }
    });
    log
}

/// Every file under `dir`, relative, sorted.
pub fn tree(dir: &Path) -> Vec<String> {
    fn walk(base: &Path, dir: &Path, out: &mut Vec<String>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(base, &path, out);
            } else {
                out.push(path.strip_prefix(base).unwrap().display().to_string());
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

/// Another process (as a backup tool would) holding the SQLite database's write lock, from
/// [`hold`](WriteLock::hold) until [`release`](WriteLock::release): not a timed lock, so what
/// meets it does so however slow the machine is.
pub struct WriteLock {
    holder: Child,
}

impl WriteLock {
    /// Takes the lock (`BEGIN IMMEDIATE`) and returns once it is held.
    pub fn hold(database: &Path) -> WriteLock {
        WriteLock::start(database, "sys.stdin.read()")
    }

    /// Takes the lock for `seconds`, then lets it go by itself; returns once it is held.
    pub fn hold_for(database: &Path, seconds: u64) -> WriteLock {
        WriteLock::start(database, &format!("time.sleep({seconds})"))
    }

    fn start(database: &Path, wait: &str) -> WriteLock {
        // SQLite would create a missing file and lock that instead.
        assert!(database.is_file(), "no database at {}", database.display());
        let mut holder = Command::new("python3")
            .args([
                "-c",
                &format!(
                    "import sqlite3, sys, time\n\
                     c = sqlite3.connect(sys.argv[1], isolation_level=None)\n\
                     c.execute('BEGIN IMMEDIATE')\n\
                     print('locked', flush=True)\n\
                     {wait}\n\
                     c.execute('ROLLBACK')\n"
                ),
            ])
            .arg(database)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3");
        let mut line = String::new();
        BufReader::new(holder.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("read");
        assert_eq!(line.trim(), "locked");
        WriteLock { holder }
    }

    /// Lets the lock go (or waits for a timed one to end).
    pub fn release(mut self) {
        drop(
            self.holder
                .stdin
                .take()
                .map(|mut stdin| stdin.write_all(b"")),
        );
        assert!(self.holder.wait().expect("holder").success());
    }
}

impl Drop for WriteLock {
    fn drop(&mut self) {
        let _ = self.holder.kill();
        let _ = self.holder.wait();
    }
}
