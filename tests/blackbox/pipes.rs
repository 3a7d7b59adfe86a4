//! `shelf ... --json | head -1`: every command that prints for machines (found in
//! `shelf --help`, recursively), with its standard output closed under it, ends quietly with
//! exit 141 (what a shell reports for coreutils killed by SIGPIPE there) and no panic message;
//! read for one line and then closed, it ends with 0 (all its output fitted in the pipe before
//! the close) or 141, never a panic. And no `println!` left in the CLI to panic there.

use std::io::{BufRead, BufReader};
use std::process::{Output, Stdio};

use serde_json::Value;

use crate::support::Env;

/// The documented status of a command whose stdout was closed (README, CLI).
const BROKEN_PIPE: i32 = 141;

/// Every command path whose `--help` offers `--json` (`["admin", "db-check"]`, ...).
fn json_commands(env: &Env) -> Vec<Vec<String>> {
    fn walk(env: &Env, path: Vec<String>, found: &mut Vec<Vec<String>>) {
        let mut args: Vec<&str> = path.iter().map(String::as_str).collect();
        args.push("--help");
        let out = env.run(&args);
        assert!(out.status.success(), "shelf {args:?} failed");
        let help = String::from_utf8_lossy(&out.stdout).into_owned();
        if help.contains("--json") {
            found.push(path.clone());
        }
        let subcommands = help
            .lines()
            .skip_while(|line| !line.starts_with("Commands:"))
            .skip(1)
            .take_while(|line| !line.trim().is_empty())
            .filter_map(|line| line.split_whitespace().next())
            .filter(|name| *name != "help")
            .map(str::to_string)
            .collect::<Vec<_>>();
        for name in subcommands {
            let mut next = path.clone();
            next.push(name);
            walk(env, next, found);
        }
    }
    let mut found = Vec::new();
    walk(env, Vec::new(), &mut found);
    found
}

/// A data directory where every command has something to do: a processed document, a failed
/// run, a pipeline file, and backups for the restores.
struct Fixture {
    env: Env,
    processed: String,
    failed_run: String,
    fresh: std::cell::Cell<u32>,
}

impl Fixture {
    fn new() -> Fixture {
        let env = Env::new();
        let pipelines = env.path().join("pipelines");
        // An image that is not one fails at OCR: a failed run for `run-retry`.
        env.write(
            "pipelines/ocr-only.yaml",
            "version: 1\nstages:\n  extract: { uses: extract }\n  ocr: { uses: ocr, needs: [extract], when: extract.needs_ocr }\n",
        );
        let env = env.with("SHELF_PIPELINES_DIR", &pipelines.display().to_string());
        let text = env.write(
            "farriers.txt",
            "Farriers trim and shoe the hooves of horses.\n",
        );
        let report = env.json(&["import", &text.display().to_string(), "--json"]);
        let processed = report["files"][0]["document_id"]
            .as_str()
            .expect("document id")
            .to_string();
        let scan = env.write("scan.png", b"\x89PNG\r\n\x1a\n scanned page");
        let out = env.run(&[
            "import",
            &scan.display().to_string(),
            "--pipeline",
            "ocr-only",
            "--json",
        ]);
        let report: Value = serde_json::from_slice(&out.stdout).expect("import report");
        let failed_run = report["files"][0]["run_id"]
            .as_str()
            .expect("run id")
            .to_string();
        Fixture {
            env,
            processed,
            failed_run,
            fresh: std::cell::Cell::new(0),
        }
    }

    fn path(&self, name: &str) -> String {
        self.env.path().join(name).display().to_string()
    }

    /// A new document, stored only, for commands that consume one.
    fn fresh_document(&self) -> String {
        let n = self.fresh.get() + 1;
        self.fresh.set(n);
        let file = self.env.write(
            &format!("fresh-{n}.txt"),
            format!("Fresh document number {n}.\n"),
        );
        let report = self.env.json(&[
            "import",
            &file.display().to_string(),
            "--mode",
            "none",
            "--json",
        ]);
        report["files"][0]["document_id"]
            .as_str()
            .expect("document id")
            .to_string()
    }

    /// The arguments that make `command` succeed here (new state where it consumes some).
    fn args(&self, command: &[String]) -> Vec<String> {
        let path: Vec<&str> = command.iter().map(String::as_str).collect();
        let rest: Vec<String> = match path.as_slice() {
            ["migrate"] => vec![],
            ["import"] => vec![self.path("farriers.txt"), "--mode".into(), "none".into()],
            ["process"] => vec![self.fresh_document(), "--mode".into(), "queue".into()],
            ["runs"] => vec![],
            ["pages"] => vec![self.processed.clone()],
            ["search"] => vec!["horses".into()],
            ["delete"] => vec![self.fresh_document()],
            ["export"] => vec![self.processed.clone()],
            ["pipeline", "check"] => {
                vec![concat!(env!("CARGO_MANIFEST_DIR"), "/../pipelines/default.yaml").into()]
            }
            ["pipeline", "list"] => vec![],
            ["admin", "run-cancel"] => {
                let queued = self.env.json(&[
                    "process",
                    &self.fresh_document(),
                    "--mode",
                    "queue",
                    "--json",
                ]);
                vec![queued["id"].as_str().expect("run id").to_string()]
            }
            ["admin", "run-retry"] => vec![self.failed_run.clone()],
            [
                "admin",
                "queue" | "api-audit" | "db-check" | "db-stats" | "db-maintain",
            ] => vec![],
            ["admin", "db-backup"] => vec![self.path("backup.sqlite")],
            ["admin", "db-restore"] => vec![self.path("backup.sqlite"), "--yes".into()],
            ["admin", "workspace-backup"] => vec![self.path("workspace.zip")],
            ["admin", "workspace-restore"] => vec![self.path("workspace.zip"), "--yes".into()],
            // Run with the model (see `with_model`).
            ["admin", "embed-backfill"] => vec![],
            other => {
                panic!("a --json command this test does not know: {other:?}; add its arguments")
            }
        };
        let mut args = command.to_vec();
        args.extend(rest);
        args.push("--json".into());
        args
    }
}

fn assert_quiet(args: &[String], out: &Output, allowed: &[i32]) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status
            .code()
            .is_some_and(|code| allowed.contains(&code)),
        "shelf {args:?} ended with {:?}, expected one of {allowed:?}; stderr:\n{stderr}",
        out.status
    );
    for noise in ["panicked", "Broken pipe", "failed printing", "os error 32"] {
        assert!(
            !stderr.contains(noise),
            "shelf {args:?} printed {noise:?}:\n{stderr}"
        );
    }
}

#[test]
fn every_json_command_ends_quietly_on_a_closed_stdout() {
    let fixture = Fixture::new();
    let commands = json_commands(&fixture.env);
    assert!(commands.len() >= 20, "{commands:?}");
    for command in &commands {
        // The backfill needs the embedding model (without it, it is refused); skipped where
        // the model is not fetched, unless CI requires it.
        let needs_model = command.iter().any(|c| c == "embed-backfill");
        let model = if needs_model {
            match crate::embedding_model::model_or_skip() {
                Some(dir) => Some(dir),
                None => continue,
            }
        } else {
            None
        };
        let with_model = |mut cmd: std::process::Command| {
            if let Some(dir) = &model {
                cmd.env("SHELF_EMBEDDING_MODEL_DIR", dir);
            }
            cmd
        };
        // Closed before the command starts: its first write meets EPIPE, by construction.
        let args = fixture.args(command);
        let strs: Vec<&str> = args.iter().map(String::as_str).collect();
        let (reader, writer) = std::io::pipe().expect("pipe");
        drop(reader);
        let out = with_model(fixture.env.command(&strs))
            .stdout(Stdio::from(writer))
            .stderr(Stdio::piped())
            .output()
            .expect("run shelf");
        assert_quiet(&args, &out, &[BROKEN_PIPE]);

        // `| head -1`: one line read, then the pipe closed while the command may still write.
        let args = fixture.args(command);
        let strs: Vec<&str> = args.iter().map(String::as_str).collect();
        let mut child = with_model(fixture.env.command(&strs))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn shelf");
        let mut first = String::new();
        let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
        stdout.read_line(&mut first).expect("read a line");
        assert!(!first.is_empty(), "shelf {args:?} printed nothing");
        drop(stdout);
        let out = child.wait_with_output().expect("wait");
        assert_quiet(&args, &out, &[0, BROKEN_PIPE]);
    }
}

/// People's output goes through the same writer: a long text listing cut by `head -1`.
#[test]
fn text_output_ends_quietly_on_a_closed_stdout_too() {
    let fixture = Fixture::new();
    for args in [
        vec!["runs"],
        vec!["admin", "db-check"],
        vec!["pipeline", "graph", "default"],
        vec!["search", "horses"],
    ] {
        let (reader, writer) = std::io::pipe().expect("pipe");
        drop(reader);
        let out = fixture
            .env
            .command(&args)
            .stdout(Stdio::from(writer))
            .stderr(Stdio::piped())
            .output()
            .expect("run shelf");
        let owned: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        assert_quiet(&owned, &out, &[BROKEN_PIPE]);
    }
}

/// `println!` panics on a closed pipe: the CLI prints only through `output`'s checked writers
/// (a panic hook catches a stray one too, but it ends the command in the middle of its work).
#[test]
fn the_cli_prints_only_through_its_checked_writers() {
    fn visit(dir: &std::path::Path, found: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).expect("read cli/src") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                visit(&path, found);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).expect("read");
                for (n, line) in text.lines().enumerate() {
                    let code = line.split("//").next().unwrap_or_default();
                    if ["println!(", "print!(", "eprintln!(", "eprint!("]
                        .iter()
                        .any(|m| code.contains(m))
                    {
                        found.push(format!("{}:{}: {}", path.display(), n + 1, line.trim()));
                    }
                }
            }
        }
    }
    let mut found = Vec::new();
    visit(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
        &mut found,
    );
    assert!(
        found.is_empty(),
        "use outln!/out!/errln! (cli/src/output.rs):\n{}",
        found.join("\n")
    );
}
