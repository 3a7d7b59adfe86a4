//! Printing results for people or, with `--json`, for machines; errors as `{detail, code}`;
//! exit codes: 0 success, 1 the work failed, 2 bad usage or configuration, 3 not found, 4 the
//! database is damaged, 141 standard output was closed (`shelf ... | head -1`).
//!
//! Every write to stdout goes through [`outln!`], [`out!`] or [`write_stdout`]: `println!`
//! panics on a closed pipe ("failed printing to stdout: Broken pipe", exit 101). Here a closed
//! stdout ends the process quietly with [`EXIT_BROKEN_PIPE`]; [`errln!`] writes to stderr and
//! ignores a closed one (there is nowhere left to say anything).

use std::io::Write;
use std::process::ExitCode;

use serde::Serialize;
use shelf_app::AppError;

pub const EXIT_FAILED: u8 = 1;
pub const EXIT_USAGE: u8 = 2;
pub const EXIT_NOT_FOUND: u8 = 3;
/// The database is damaged (`database_corrupt`): restore it from a backup.
pub const EXIT_DATABASE_CORRUPT: u8 = 4;
/// Standard output was closed under the command: 128 + SIGPIPE, the status a shell reports for
/// coreutils and git in the same place, so `set -o pipefail` scripts see the same thing. Nothing
/// is printed about it.
pub const EXIT_BROKEN_PIPE: u8 = 141;

/// `println!` to stdout that ends the process quietly when stdout is a closed pipe.
macro_rules! outln {
    () => {
        $crate::output::write_stdout(b"\n")
    };
    ($($arg:tt)*) => {
        $crate::output::write_stdout_fmt(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// `print!` to stdout that ends the process quietly when stdout is a closed pipe.
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::output::write_stdout_fmt(format_args!($($arg)*))
    };
}

/// `eprintln!` that does not panic when stderr is closed.
macro_rules! errln {
    ($($arg:tt)*) => {
        $crate::output::write_stderr_fmt(format_args!("{}\n", format_args!($($arg)*)))
    };
}

pub(crate) use {errln, out, outln};

/// Writes `bytes` to stdout and flushes them; a closed pipe ends the process
/// ([`EXIT_BROKEN_PIPE`]), any other failure ends it with [`EXIT_FAILED`] after saying so.
pub fn write_stdout(bytes: &[u8]) {
    let mut stdout = std::io::stdout().lock();
    if let Err(e) = stdout.write_all(bytes).and_then(|()| stdout.flush()) {
        stdout_failed(&e);
    }
}

/// [`write_stdout`] for formatted text.
pub fn write_stdout_fmt(args: std::fmt::Arguments<'_>) {
    let mut stdout = std::io::stdout().lock();
    if let Err(e) = stdout.write_fmt(args).and_then(|()| stdout.flush()) {
        stdout_failed(&e);
    }
}

/// Writes formatted text to stderr, ignoring a failure.
pub fn write_stderr_fmt(args: std::fmt::Arguments<'_>) {
    let _ = std::io::stderr().lock().write_fmt(args);
}

fn stdout_failed(e: &std::io::Error) -> ! {
    if e.kind() == std::io::ErrorKind::BrokenPipe {
        // The reader has gone: whatever is left to print has no one to read it.
        std::process::exit(i32::from(EXIT_BROKEN_PIPE));
    }
    write_stderr_fmt(format_args!(
        "error: cannot write to standard output: {e}\n"
    ));
    std::process::exit(i32::from(EXIT_FAILED));
}

/// The last line of defence against a `println!` some code still has (or a crate's): its
/// broken-pipe panic ends the process as [`write_stdout`] does instead of printing a panic
/// message; every other panic goes to the default hook.
pub fn quiet_broken_pipe_panics() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let payload = info.payload();
        let message = payload
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| payload.downcast_ref::<&str>().copied())
            .unwrap_or_default();
        if message.starts_with("failed printing to std") && message.contains("Broken pipe") {
            std::process::exit(i32::from(EXIT_BROKEN_PIPE));
        }
        default(info);
    }));
}

/// A command that did not succeed: what to tell the user and how to exit.
#[derive(Debug)]
pub struct Failure {
    pub detail: String,
    pub code: String,
    pub exit: u8,
    pub json: bool,
}

impl Failure {
    pub fn new(detail: impl Into<String>, code: &str, exit: u8) -> Self {
        Failure {
            detail: detail.into(),
            code: code.to_string(),
            exit,
            json: false,
        }
    }

    pub fn from_app(error: AppError, json: bool) -> Self {
        let exit = match error.code() {
            "not_found" | "pipeline_not_found" => EXIT_NOT_FOUND,
            "database_corrupt" => EXIT_DATABASE_CORRUPT,
            "invalid_configuration"
            | "invalid_pipeline"
            | "bad_request"
            | "schema_mismatch"
            | "postgres_unsupported" => EXIT_USAGE,
            _ => EXIT_FAILED,
        };
        let cause = error.to_string();
        // A write that gave up on another process's lock: say so first, the driver's words
        // after.
        let detail = if error.code() == "service_unavailable" && shelf_db::is_busy_text(&cause) {
            format!("{} ({cause})", shelf_db::BUSY_DETAIL)
        } else {
            cause
        };
        Failure {
            detail,
            code: error.code().to_string(),
            exit,
            json,
        }
    }

    pub fn report(self) -> ExitCode {
        // Driver errors may quote a database URL: never its password.
        let detail = shelf_app::settings::without_password(&self.detail);
        if self.json {
            let body = serde_json::json!({ "detail": detail, "code": self.code });
            outln!("{body}");
        } else {
            errln!("error: {detail}");
        }
        ExitCode::from(self.exit)
    }

    /// This failure as a damaged database's, once the process has seen the damage: whatever
    /// the command was doing, the exit code says what the operator must do.
    pub fn after_damage(mut self) -> Self {
        self.exit = EXIT_DATABASE_CORRUPT;
        self.code = "database_corrupt".into();
        self
    }
}

/// Attaches the `--json` choice to errors on their way out.
pub trait OrFail<T> {
    fn or_fail(self, json: bool) -> Result<T, Failure>;
}

impl<T> OrFail<T> for Result<T, AppError> {
    fn or_fail(self, json: bool) -> Result<T, Failure> {
        self.map_err(|e| Failure::from_app(e, json))
    }
}

pub fn print_json<T: Serialize>(value: &T) {
    match serde_json::to_string_pretty(value) {
        Ok(text) => outln!("{text}"),
        Err(e) => errln!("error: cannot encode output: {e}"),
    }
}
