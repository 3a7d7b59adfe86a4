//! External tools (poppler's `pdftotext`, LibreOffice) run in a process group of their own,
//! with a deadline and the extraction's cancel flag: on either, the whole group is killed (a
//! converter's children included) and waited for, so no process is left behind.

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::Duration;

use crate::{Control, ExtractError};

/// What a finished tool printed.
#[derive(Debug)]
pub struct ToolOutput {
    pub status: ExitStatus,
    pub stdout: Vec<u8>,
    /// At most 64 KiB of standard error, for messages.
    pub stderr: Vec<u8>,
}

impl ToolOutput {
    /// The first line of standard error, trimmed, for error details.
    pub fn stderr_line(&self) -> String {
        String::from_utf8_lossy(&self.stderr)
            .lines()
            .map(str::trim)
            .find(|l| !l.is_empty())
            .unwrap_or("")
            .chars()
            .take(300)
            .collect()
    }
}

/// A tool and the Debian package that provides it (named in `converter_unavailable`).
#[derive(Debug, Clone, Copy)]
pub struct Tool {
    pub program: &'static str,
    pub package: &'static str,
}

const STDERR_CAP: u64 = 64 * 1024;
const POLL: Duration = Duration::from_millis(10);

/// Runs `tool` with `args` until it exits, `timeout` passes, or `control` trips; standard
/// output is kept up to `max_stdout` bytes (past that the tool is killed and the result is
/// `file_too_large`).
pub fn run(
    tool: Tool,
    args: &[&std::ffi::OsStr],
    envs: &[(&str, &std::ffi::OsStr)],
    timeout: Duration,
    max_stdout: u64,
    control: &Control,
) -> Result<ToolOutput, ExtractError> {
    let control = control.with_timeout(timeout);
    control.check()?;
    let mut command = Command::new(tool.program);
    command
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    for (key, value) in envs {
        command.env(key, value);
    }
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(ExtractError::converter_unavailable(format!(
                "`{}` is not installed; install the `{}` package",
                tool.program, tool.package
            )));
        }
        Err(e) => {
            return Err(ExtractError::io(format!(
                "cannot start {}: {e}",
                tool.program
            )));
        }
    };
    let group = child.id() as libc::pid_t;
    let overflow = Arc::new(AtomicBool::new(false));
    let stdout = child.stdout.take().map(|out| {
        let overflow = overflow.clone();
        thread::spawn(move || {
            let mut buf = Vec::new();
            let read = out.take(max_stdout.saturating_add(1)).read_to_end(&mut buf);
            if buf.len() as u64 > max_stdout {
                overflow.store(true, Ordering::Relaxed);
            }
            read.map(|_| buf)
        })
    });
    let stderr = child.stderr.take().map(|err| {
        thread::spawn(move || {
            let mut buf = Vec::new();
            let mut err = err;
            let _ = (&mut err).take(STDERR_CAP).read_to_end(&mut buf);
            // Drain the rest so the tool never blocks on a full pipe.
            let _ = std::io::copy(&mut err, &mut std::io::sink());
            buf
        })
    });

    let outcome = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Ok(status),
            Ok(None) => {}
            Err(e) => {
                break Err(ExtractError::io(format!(
                    "waiting for {}: {e}",
                    tool.program
                )));
            }
        }
        if let Err(stop) = control.check() {
            break Err(stop);
        }
        if overflow.load(Ordering::Relaxed) {
            break Err(ExtractError::too_large(format!(
                "{} printed more than {max_stdout} bytes",
                tool.program
            )));
        }
        thread::sleep(POLL);
    };
    if outcome.is_err() {
        kill_group(group);
        let _ = child.wait();
    }
    // The group may have children that outlived the leader (LibreOffice forks): end them too.
    kill_group(group);
    let stdout = match stdout.map(|h| h.join()) {
        Some(Ok(Ok(buf))) => buf,
        Some(Ok(Err(e))) => return Err(ExtractError::io(format!("reading {}: {e}", tool.program))),
        Some(Err(_)) => return Err(ExtractError::crashed()),
        None => Vec::new(),
    };
    let stderr = stderr.and_then(|h| h.join().ok()).unwrap_or_default();
    let status = outcome?;
    if stdout.len() as u64 > max_stdout {
        return Err(ExtractError::too_large(format!(
            "{} printed more than {max_stdout} bytes",
            tool.program
        )));
    }
    Ok(ToolOutput {
        status,
        stdout,
        stderr,
    })
}

fn kill_group(group: libc::pid_t) {
    if group > 0 {
        // SAFETY: killpg only sends a signal; a group that no longer exists is ESRCH.
        unsafe {
            libc::killpg(group, libc::SIGKILL);
        }
    }
}

/// True when `program` can be found on `PATH`.
pub fn is_installed(program: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|paths| {
        std::env::split_paths(&paths).any(|dir| {
            let candidate = dir.join(program);
            candidate.is_file()
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsStr;

    const SH: Tool = Tool {
        program: "sh",
        package: "dash",
    };

    #[test]
    fn output_is_captured() {
        let out = run(
            SH,
            &[OsStr::new("-c"), OsStr::new("echo hello; echo oops >&2")],
            &[],
            Duration::from_secs(5),
            1024,
            &Control::default(),
        )
        .unwrap();
        assert!(out.status.success());
        assert_eq!(out.stdout, b"hello\n");
        assert_eq!(out.stderr_line(), "oops");
    }

    #[test]
    fn a_slow_tool_and_its_children_are_killed_at_the_deadline() {
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("child-ran");
        // The tool would run for a day: a return at all is the deadline's kill (the bound only
        // keeps a regression from hanging the suite).
        let script = format!("(sleep 2; touch {}) & sleep 86400", marker.display());
        let (sent, answer) = std::sync::mpsc::channel();
        thread::spawn(move || {
            let result = run(
                SH,
                &[OsStr::new("-c"), OsStr::new(&script)],
                &[],
                Duration::from_millis(200),
                1024,
                &Control::default(),
            );
            let _ = sent.send(result);
        });
        let err = answer
            .recv_timeout(Duration::from_secs(300))
            .expect("the tool is killed at its deadline")
            .unwrap_err();
        assert_eq!(err.code, "extraction_timeout");
        // Past the moment the child would have touched the marker (2 s after the start).
        thread::sleep(Duration::from_millis(2500));
        assert!(!marker.exists(), "a child of the killed tool lived on");
    }

    #[test]
    fn a_missing_tool_names_its_package() {
        let err = run(
            Tool {
                program: "shelf-no-such-tool",
                package: "shelf-tools",
            },
            &[],
            &[],
            Duration::from_secs(1),
            1024,
            &Control::default(),
        )
        .unwrap_err();
        assert_eq!(err.code, "converter_unavailable");
        assert!(err.detail.contains("shelf-tools"));
    }

    #[test]
    fn output_past_its_cap_is_refused() {
        let err = run(
            SH,
            &[OsStr::new("-c"), OsStr::new("yes | head -c 100000")],
            &[],
            Duration::from_secs(5),
            1000,
            &Control::default(),
        )
        .unwrap_err();
        assert_eq!(err.code, "file_too_large");
    }
}
