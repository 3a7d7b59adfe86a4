//! `shelf export --okf DIR`: an Open Knowledge Format v0.1 bundle streamed to disk. Concepts
//! come one at a time from the application layer's walk (the database is read a page at a
//! time) and each is written atomically (a temporary file renamed into place); only paths and
//! titles are kept for the `index.md` files, written last.
//!
//! DIR must be missing or empty, unless `--force` (then files are overwritten in place and
//! nothing else in DIR is removed). DIR itself and every folder below it must be real
//! directories: a symbolic link anywhere inside the bundle is refused, never followed.

use crate::output::outln;
use std::collections::HashSet;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use serde::Serialize;
use shelf_app::okf::OkfFilter;
use shelf_app::okf::walk::SKIPPED_PAGE;

use crate::CliResult;
use crate::output::{EXIT_FAILED, EXIT_USAGE, Failure, OrFail, print_json};

#[derive(clap::Args)]
pub struct OkfArgs {
    /// Write processed documents as an OKF v0.1 bundle into DIR (missing or empty).
    #[arg(long, value_name = "DIR")]
    pub okf: Option<PathBuf>,
    /// Only Dewey codes starting with this (636 matches 636 and 636.1).
    #[arg(long, requires = "okf", value_name = "PREFIX")]
    pub classification_prefix: Option<String>,
    /// Only documents with this tag (ASCII case-insensitive).
    #[arg(long, requires = "okf")]
    pub tag: Option<String>,
    /// At most this many concepts (default: all).
    #[arg(long, requires = "okf", value_parser = clap::value_parser!(u64).range(1..))]
    pub limit: Option<u64>,
    /// Write into a DIR that is not empty, overwriting files of the same names.
    #[arg(long, requires = "okf")]
    pub force: bool,
}

#[derive(Serialize)]
struct Summary {
    /// Concept files written.
    written: u64,
    /// Matching documents left out (no cleaned output, no classification, unusable code).
    skipped: u64,
    /// `index.md` files written.
    index_files: u64,
    /// True when `--limit` left matching concepts out.
    truncated: bool,
    dir: String,
}

fn dir_failure(detail: String, json: bool) -> Failure {
    Failure {
        json,
        ..Failure::new(detail, "invalid_output_dir", EXIT_USAGE)
    }
}

fn io_failure(path: &str, e: io::Error, json: bool) -> Failure {
    Failure {
        json,
        ..Failure::new(
            format!("cannot write {path}: {e}"),
            "write_failed",
            EXIT_FAILED,
        )
    }
}

pub async fn run(args: OkfArgs, json: bool) -> CliResult {
    let Some(dir) = args.okf.clone() else {
        return Err(dir_failure("--okf DIR is required".into(), json));
    };
    let shelf = super::open(json).await?;
    let filter = OkfFilter {
        classification_prefix: args.classification_prefix.filter(|p| !p.trim().is_empty()),
        tag: args.tag.filter(|t| !t.trim().is_empty()),
        limit: args.limit,
    };
    let mut out = tokio::task::block_in_place(|| BundleDir::prepare(&dir, args.force))
        .map_err(|detail| dir_failure(detail, json))?;
    let total = shelf.okf_count(&filter).await.or_fail(json)?;
    let bar = crate::progress::bar(filter.limit.map_or(total, |l| total.min(l)));
    bar.set_message("writing concepts");
    let mut walk = shelf.okf_walk(filter.clone());
    let mut written = 0u64;
    while let Some(concept) = walk.next().await.or_fail(json)? {
        let path = concept.file.path;
        tokio::task::block_in_place(|| out.write(&path, &concept.file.content))
            .map_err(|e| io_failure(&path, e, json))?;
        written += 1;
        bar.inc(1);
    }
    bar.set_message("counting skipped documents");
    let mut skipped = walk.invalid().len() as u64;
    let mut cursor = None;
    loop {
        let (page, next) = shelf
            .okf_skipped(&filter, cursor.as_ref(), SKIPPED_PAGE)
            .await
            .or_fail(json)?;
        skipped += page.len() as u64;
        if (page.len() as u64) < SKIPPED_PAGE {
            break;
        }
        cursor = next;
    }
    let truncated = walk.truncated();
    let indexes = walk.finish(&shelf_documents::now_timestamp(), skipped);
    let index_files = indexes.len() as u64;
    for index in indexes {
        tokio::task::block_in_place(|| out.write(&index.path, &index.content))
            .map_err(|e| io_failure(&index.path, e, json))?;
    }
    bar.finish_and_clear();
    let summary = Summary {
        written,
        skipped,
        index_files,
        truncated,
        dir: dir.display().to_string(),
    };
    if json {
        print_json(&summary);
    } else {
        outln!(
            "wrote {written} concept(s) and {index_files} index file(s) to {}; skipped {skipped} document(s){}",
            summary.dir,
            if truncated { " (--limit reached)" } else { "" }
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// The bundle's directory: folders are created one level at a time and checked to be real
/// directories (never symbolic links), files are written through a temporary file.
struct BundleDir {
    root: PathBuf,
    /// Relative folders already checked or created.
    known: HashSet<String>,
    counter: u64,
}

impl BundleDir {
    /// Checks or creates DIR: refused when it is a symbolic link, not a directory, or not
    /// empty without `force`.
    fn prepare(dir: &Path, force: bool) -> Result<BundleDir, String> {
        match std::fs::symlink_metadata(dir) {
            Ok(meta) if meta.file_type().is_symlink() => {
                return Err(format!("{} is a symbolic link", dir.display()));
            }
            Ok(meta) if !meta.is_dir() => {
                return Err(format!("{} is not a directory", dir.display()));
            }
            Ok(_) => {
                let mut entries = std::fs::read_dir(dir)
                    .map_err(|e| format!("cannot read {}: {e}", dir.display()))?;
                if !force && entries.next().is_some() {
                    return Err(format!(
                        "{} is not empty; pass --force to write into it",
                        dir.display()
                    ));
                }
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                std::fs::create_dir_all(dir)
                    .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
            }
            Err(e) => return Err(format!("cannot read {}: {e}", dir.display())),
        }
        Ok(BundleDir {
            root: dir.to_path_buf(),
            known: HashSet::new(),
            counter: 0,
        })
    }

    /// Writes `content` at the relative `/`-separated `path`, atomically.
    fn write(&mut self, path: &str, content: &str) -> io::Result<()> {
        let segments: Vec<&str> = path.split('/').collect();
        let invalid = |what: &str| io::Error::new(io::ErrorKind::InvalidInput, what.to_string());
        if segments
            .iter()
            .any(|s| s.is_empty() || *s == "." || *s == ".." || s.contains('\\'))
        {
            return Err(invalid("unsafe path in bundle"));
        }
        let Some((name, folders)) = segments.split_last() else {
            return Err(invalid("empty path"));
        };
        let mut dir = self.root.clone();
        let mut relative = String::new();
        for folder in folders {
            dir.push(folder);
            if !relative.is_empty() {
                relative.push('/');
            }
            relative.push_str(folder);
            if self.known.contains(&relative) {
                continue;
            }
            match std::fs::symlink_metadata(&dir) {
                Ok(meta) if meta.file_type().is_symlink() => {
                    return Err(invalid("a folder of the bundle is a symbolic link"));
                }
                Ok(meta) if meta.is_dir() => {}
                Ok(_) => return Err(invalid("a folder of the bundle is a file")),
                Err(e) if e.kind() == io::ErrorKind::NotFound => std::fs::create_dir(&dir)?,
                Err(e) => return Err(e),
            }
            self.known.insert(relative.clone());
        }
        let target = dir.join(name);
        // `create_new` never opens through an existing name (a symbolic link included), and
        // `rename` replaces a link at the target instead of following it.
        let (temp, mut file) = loop {
            self.counter += 1;
            let temp = dir.join(format!(
                ".{name}.{}.{}.tmp",
                std::process::id(),
                self.counter
            ));
            match std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&temp)
            {
                Ok(file) => break (temp, file),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(e),
            }
        };
        let result = file
            .write_all(content.as_bytes())
            .and_then(|()| file.flush())
            .and_then(|()| std::fs::rename(&temp, &target));
        if result.is_err() {
            let _ = std::fs::remove_file(&temp);
        }
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bundle_dirs_are_checked_and_files_written_atomically() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = tmp.path().join("out");
        let mut out = BundleDir::prepare(&dir, false).expect("fresh dir");
        out.write("a/b/c.md", "one").expect("write");
        out.write("a/b/c.md", "two").expect("overwrite");
        assert_eq!(
            std::fs::read_to_string(dir.join("a/b/c.md"))
                .ok()
                .as_deref(),
            Some("two")
        );
        for bad in ["../x.md", "a/../../x.md", "/x.md", "a//x.md", "a\\b.md", ""] {
            assert!(out.write(bad, "x").is_err(), "{bad}");
        }
        assert!(BundleDir::prepare(&dir, false).is_err(), "not empty");
        assert!(BundleDir::prepare(&dir, true).is_ok());
        let file = tmp.path().join("file");
        std::fs::write(&file, "x").expect("file");
        assert!(BundleDir::prepare(&file, true).is_err());
        // No temporary file is left behind.
        let names: Vec<String> = std::fs::read_dir(dir.join("a/b"))
            .expect("read")
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, vec!["c.md"]);
    }

    #[cfg(unix)]
    #[test]
    fn symbolic_links_are_never_followed() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let outside = tmp.path().join("outside");
        std::fs::create_dir(&outside).expect("outside");
        let link = tmp.path().join("link");
        std::os::unix::fs::symlink(&outside, &link).expect("symlink");
        assert!(BundleDir::prepare(&link, true).is_err());
        let dir = tmp.path().join("out");
        let mut out = BundleDir::prepare(&dir, false).expect("dir");
        std::os::unix::fs::symlink(&outside, dir.join("600-technology")).expect("symlink");
        assert!(out.write("600-technology/index.md", "x").is_err());
        std::fs::create_dir(dir.join("500-science")).expect("dir");
        std::os::unix::fs::symlink(outside.join("victim.md"), dir.join("500-science/index.md"))
            .expect("symlink");
        out.write("500-science/index.md", "safe").expect("write");
        assert!(!outside.join("victim.md").exists());
        assert!(std::fs::read_dir(&outside).expect("read").next().is_none());
    }
}
