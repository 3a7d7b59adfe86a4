//! A throwaway PostgreSQL cluster for tests: one per test process, started on first use in a
//! temporary directory, fast and unsafe settings (no fsync), gone when the process ends.
//!
//! Included by path in each test binary that needs it
//! (`#[path = "../../tests/support/pg_cluster.rs"] mod pg_cluster;`), so it depends on std and
//! `tempfile` only, and on no crate of ours.
//!
//! The postmaster must not outlive the test process, yet a `static` never drops and a killed
//! process runs no destructor. So the cluster is run by a small `sh` wrapper whose standard input
//! is a pipe whose only writer is this process: the wrapper blocks reading it, and when the
//! kernel closes it (exit, panic, SIGKILL alike) it stops PostgreSQL and removes the directory.
//!
//! Environment: `SHELF_PG_BIN` names the directory holding `initdb`, `pg_ctl` and `postgres`
//! (default: the highest `/usr/lib/postgresql/*/bin`); `SHELF_REQUIRE_POSTGRES=1` (CI) turns a
//! missing PostgreSQL from a skip into a failure.

#![allow(dead_code)]

use std::fs;
use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

/// How long `pg_ctl start` may wait for the server to accept connections. Generous: CI machines
/// have two cores shared with the build.
const START_TIMEOUT_SECONDS: u32 = 120;

/// A bind race with another process on the port chosen costs a restart on a new port, this often.
const START_ATTEMPTS: usize = 4;

/// Settings for speed: a test cluster is thrown away, so durability buys nothing. Many test
/// pools at once need the connections.
const SERVER_SETTINGS: &[&str] = &[
    "fsync=off",
    "synchronous_commit=off",
    "full_page_writes=off",
    "max_connections=300",
    "shared_buffers=32MB",
];

/// Runs as the cluster's owner. Starts the server (`pg_ctl -w` waits until it accepts
/// connections), says `ready`, then waits for end of input: the test process is gone, so the
/// server is stopped at once and the directory removed. SIGPIPE is ignored so that a test process
/// that dies before reading `ready` still gets its cluster stopped.
const WRAPPER: &str = r#"
trap '' PIPE
bin=$1 dir=$2 port=$3 opts=$4
if ! "$bin/pg_ctl" start -w -t "$5" -D "$dir/data" -l "$dir/postgres.log" \
    -o "-p $port -h 127.0.0.1 -k $dir $opts" >>"$dir/pg_ctl.log" 2>&1; then
    echo failed
    exit 1
fi
echo ready
cat >/dev/null
"$bin/pg_ctl" stop -w -D "$dir/data" -m immediate >/dev/null 2>&1
rm -rf "$dir"
"#;

pub struct PgCluster {
    port: u16,
    dir: PathBuf,
    bin: PathBuf,
    /// The wrapper, whose input (piped, never written) is held for the life of the process: its
    /// closing is what stops the server.
    _wrapper: Child,
}

impl PgCluster {
    /// The cluster of this test process, started on first call. `None` (with a message on
    /// stderr) when the PostgreSQL binaries are absent and `SHELF_REQUIRE_POSTGRES` is not `1`;
    /// panics with the reason when they are required, or when the server does not start.
    pub fn shared() -> Option<&'static PgCluster> {
        static CLUSTER: OnceLock<Option<PgCluster>> = OnceLock::new();
        CLUSTER
            .get_or_init(|| {
                let required = std::env::var("SHELF_REQUIRE_POSTGRES").as_deref() == Ok("1");
                match find_binaries() {
                    Ok(bin) => Some(PgCluster::start(&bin)),
                    Err(reason) if required => {
                        panic!("PostgreSQL is required (SHELF_REQUIRE_POSTGRES=1): {reason}")
                    }
                    Err(reason) => {
                        eprintln!("PostgreSQL tests skipped: {reason}");
                        None
                    }
                }
            })
            .as_ref()
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// The cluster's temporary directory (data, socket, logs); removed when the process ends.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn url(&self, database: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{database}", self.port)
    }

    /// Creates a new empty database and returns its URL. The name is `prefix`, a counter and the
    /// process id, so tests of one binary and concurrent binaries never share one.
    pub fn create_database(&self, prefix: &str) -> String {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        let prefix: String = prefix
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() {
                    c.to_ascii_lowercase()
                } else {
                    '_'
                }
            })
            .take(40)
            .collect();
        let name = format!(
            "{prefix}_{}_{}",
            NEXT.fetch_add(1, Ordering::Relaxed),
            std::process::id()
        );
        self.psql(&format!("CREATE DATABASE \"{name}\""));
        self.url(&name)
    }

    /// Runs one statement as the superuser on the `postgres` database, over TCP as the URLs do;
    /// panics with psql's output when it fails.
    pub fn psql(&self, sql: &str) -> String {
        let output = Command::new(self.client("psql"))
            .args([
                "-X",
                "-q",
                "-A",
                "-t",
                "-v",
                "ON_ERROR_STOP=1",
                "-h",
                "127.0.0.1",
            ])
            .args([
                "-p",
                &self.port.to_string(),
                "-U",
                "postgres",
                "-d",
                "postgres",
            ])
            .args(["-c", sql])
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("cannot run psql: {e}"));
        if !output.status.success() {
            panic!(
                "psql failed ({}) on {sql:?}: {}{}",
                output.status,
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            );
        }
        String::from_utf8_lossy(&output.stdout).trim().to_string()
    }

    /// `psql` from the server's directory when it is there (same version), else from PATH.
    fn client(&self, name: &str) -> PathBuf {
        let beside = self.bin.join(name);
        if beside.is_file() {
            beside
        } else {
            PathBuf::from(name)
        }
    }

    fn start(bin: &Path) -> PgCluster {
        let owner = Owner::for_server();
        // The server's owner must reach the directory: when we drop root it is not us, and
        // TMPDIR may be private, so /tmp then. Short as well: the socket path has a length limit.
        let parent = if owner.is_some() {
            PathBuf::from("/tmp")
        } else {
            std::env::temp_dir()
        };
        let dir = tempfile::Builder::new()
            .prefix("shelf-pg-")
            .tempdir_in(&parent)
            .unwrap_or_else(|e| panic!("cannot create a directory in {}: {e}", parent.display()))
            .keep();
        if let Some(owner) = &owner {
            std::os::unix::fs::chown(&dir, Some(owner.uid), Some(owner.gid)).unwrap_or_else(|e| {
                panic!("cannot chown {} to the server's owner: {e}", dir.display())
            });
        }
        // The socket directory must not be open to others.
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o700))
            .unwrap_or_else(|e| panic!("cannot restrict {}: {e}", dir.display()));

        init_data(bin, &dir, owner.as_ref());

        let mut last_failure = String::new();
        for _ in 0..START_ATTEMPTS {
            let port = free_port();
            let mut wrapper = as_owner(Command::new("/bin/sh"), &dir, owner.as_ref());
            wrapper
                .arg("-c")
                .arg(WRAPPER)
                .arg("pg-cluster")
                .arg(bin)
                .arg(&dir)
                .arg(port.to_string())
                .arg(
                    SERVER_SETTINGS
                        .iter()
                        .map(|s| format!("-c {s}"))
                        .collect::<Vec<_>>()
                        .join(" "),
                )
                .arg(START_TIMEOUT_SECONDS.to_string())
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                // Its own process group: a Ctrl-C meant for the tests must not kill the wrapper
                // before it has stopped the server.
                .process_group(0);
            let mut child = wrapper
                .spawn()
                .unwrap_or_else(|e| panic!("cannot start the PostgreSQL wrapper: {e}"));
            let mut line = String::new();
            if let Some(stdout) = child.stdout.take() {
                let _ = BufReader::new(stdout).read_line(&mut line);
            }
            if line.trim() == "ready" {
                let cluster = PgCluster {
                    port,
                    dir,
                    bin: bin.to_path_buf(),
                    _wrapper: child,
                };
                // pg_ctl saw the socket answer; this proves the TCP route the URLs take.
                let one = cluster.psql("SELECT 1");
                assert_eq!(one, "1", "PostgreSQL answered SELECT 1 with {one:?}");
                return cluster;
            }
            drop(child.stdin.take());
            let _ = child.wait();
            let log = log_tail(&dir);
            let bind_race = log.contains("could not bind") || log.contains("already in use");
            last_failure = log;
            if !bind_race {
                break;
            }
            // Only the new lines matter on the next attempt.
            let _ = fs::remove_file(dir.join("postgres.log"));
        }
        let _ = fs::remove_dir_all(&dir);
        panic!(
            "PostgreSQL did not start, or did not accept connections within \
             {START_TIMEOUT_SECONDS} s (binaries: {}); its logs end with:\n{last_failure}",
            bin.display()
        );
    }
}

/// The uid and gid the server runs as when this process is root (PostgreSQL refuses root).
struct Owner {
    uid: u32,
    gid: u32,
}

impl Owner {
    fn for_server() -> Option<Owner> {
        if id(&["-u"]) != Some(0) {
            return None;
        }
        let from = |user: &str| {
            Some(Owner {
                uid: id(&["-u", user])?,
                gid: id(&["-g", user])?,
            })
        };
        Some(from("postgres").or_else(|| from("nobody")).unwrap_or_else(|| {
            panic!("running as root, and neither a `postgres` nor a `nobody` user to run PostgreSQL as")
        }))
    }
}

fn id(args: &[&str]) -> Option<u32> {
    let output = Command::new("id")
        .args(args)
        .stderr(Stdio::null())
        .output()
        .ok()?;
    if !output.status.success() {
        return None;
    }
    String::from_utf8_lossy(&output.stdout).trim().parse().ok()
}

/// A command that runs in `dir` as the server's owner (when there is one).
fn as_owner(program: Command, dir: &Path, owner: Option<&Owner>) -> Command {
    let mut command = program;
    // The owner may not be allowed into the test's working directory.
    command.current_dir(dir);
    if let Some(owner) = owner {
        command.uid(owner.uid).gid(owner.gid);
    }
    command
}

/// `SHELF_PG_BIN`, else the highest-versioned `/usr/lib/postgresql/*/bin` holding the server.
fn find_binaries() -> Result<PathBuf, String> {
    let complete = |dir: &Path| {
        ["initdb", "pg_ctl", "postgres"]
            .iter()
            .all(|b| dir.join(b).is_file())
    };
    if let Some(dir) = std::env::var_os("SHELF_PG_BIN") {
        let dir = PathBuf::from(dir);
        return if complete(&dir) {
            Ok(dir)
        } else {
            Err(format!(
                "SHELF_PG_BIN={} lacks initdb, pg_ctl or postgres",
                dir.display()
            ))
        };
    }
    let root = Path::new("/usr/lib/postgresql");
    let mut found: Vec<(Vec<u64>, PathBuf)> = fs::read_dir(root)
        .map_err(|e| {
            format!(
                "no PostgreSQL server installed ({}: {e}; or set SHELF_PG_BIN)",
                root.display()
            )
        })?
        .filter_map(|entry| {
            let entry = entry.ok()?;
            let version: Vec<u64> = entry
                .file_name()
                .to_str()?
                .split('.')
                .map(|part| part.parse().ok())
                .collect::<Option<_>>()?;
            let bin = entry.path().join("bin");
            complete(&bin).then_some((version, bin))
        })
        .collect();
    found.sort();
    found.pop().map(|(_, bin)| bin).ok_or_else(|| {
        format!(
            "no initdb, pg_ctl and postgres under {}/*/bin (or set SHELF_PG_BIN)",
            root.display()
        )
    })
}

/// `initdb` with a UTF-8 C locale, or no locale where that one is not installed.
fn init_data(bin: &Path, dir: &Path, owner: Option<&Owner>) {
    let data = dir.join("data");
    let mut failures = String::new();
    for locale in ["--locale=C.UTF-8", "--no-locale"] {
        let output = as_owner(Command::new(bin.join("initdb")), dir, owner)
            .arg("-D")
            .arg(&data)
            .args(["--auth=trust", "-U", "postgres", "--encoding=UTF8", locale])
            // The cluster is thrown away: no need to wait for its files to reach the disk.
            .arg("--no-sync")
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", bin.join("initdb").display()));
        if output.status.success() {
            return;
        }
        failures.push_str(&format!(
            "initdb {locale} ({}):\n{}{}\n",
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ));
        let _ = fs::remove_dir_all(&data);
    }
    let _ = fs::remove_dir_all(dir);
    panic!("initdb failed:\n{failures}");
}

/// A port that was free a moment ago; a race with another process is retried by the caller.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|addr| addr.port())
        .unwrap_or_else(|e| panic!("cannot find a free port on 127.0.0.1: {e}"))
}

/// The last lines of the server's and pg_ctl's logs, for a failure message.
fn log_tail(dir: &Path) -> String {
    let mut tail = String::new();
    for name in ["postgres.log", "pg_ctl.log"] {
        let text = fs::read_to_string(dir.join(name)).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        let start = lines.len().saturating_sub(30);
        tail.push_str(&format!("--- {name}\n{}\n", lines[start..].join("\n")));
    }
    tail
}
