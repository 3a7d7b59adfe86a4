//! Which paths an import may read and write. Server-side imports stay under
//! `SHELF_API_IMPORT_ROOT`: no `..`, no symlink as the path or any of its parents below the
//! root. The CLI is local and takes any path its user gives, but still refuses a symlink as
//! the source, the manifest or the output directory itself.

use std::path::{Component, Path, PathBuf};

use super::error::ImportError;

/// Which field a path came from: it names the error code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathField {
    Source,
    Manifest,
    OutputDir,
}

impl PathField {
    fn error(self, detail: impl Into<String>) -> ImportError {
        let detail = detail.into();
        match self {
            PathField::Source => ImportError::InvalidImportPath(detail),
            PathField::Manifest => ImportError::InvalidManifestPath(detail),
            PathField::OutputDir => ImportError::InvalidOutputDir(detail),
        }
    }
}

/// Where an import's paths may lie.
#[derive(Debug, Clone)]
pub enum Boundary {
    /// Under a root (the API): `configured` as set, `canonical` as resolved once.
    Root {
        configured: PathBuf,
        canonical: PathBuf,
    },
    /// Anywhere (the CLI, run by the user on their own files).
    Local,
}

impl Boundary {
    /// The API's boundary: `SHELF_API_IMPORT_ROOT`, which must be set and be a directory.
    pub fn root(root: Option<&Path>) -> Result<Boundary, ImportError> {
        let configured = root.ok_or(ImportError::NoImportRoot)?.to_path_buf();
        let canonical = std::fs::canonicalize(&configured)
            .ok()
            .filter(|p| p.is_dir())
            .ok_or_else(|| {
                ImportError::InvalidImportPath(
                    "SHELF_API_IMPORT_ROOT is not an existing directory".into(),
                )
            })?;
        Ok(Boundary::Root {
            configured,
            canonical,
        })
    }

    /// Resolves a path the caller gave for `field` to an absolute path, refusing what the
    /// rules refuse. The path itself may be missing unless it is the source; its parent must
    /// exist for the manifest.
    pub fn resolve(&self, raw: &str, field: PathField) -> Result<PathBuf, ImportError> {
        if raw.trim().is_empty() {
            return Err(field.error("the path is empty"));
        }
        if raw.contains('\0') {
            return Err(field.error("the path contains a NUL byte"));
        }
        let given = Path::new(raw);
        let path = match self {
            Boundary::Root {
                configured,
                canonical,
            } => {
                if given.components().any(|c| c == Component::ParentDir) {
                    return Err(field.error("`..` is not allowed in import paths"));
                }
                let below = if given.is_absolute() {
                    given
                        .strip_prefix(canonical)
                        .or_else(|_| given.strip_prefix(configured))
                        .map_err(|_| field.error("the path is outside the import root"))?
                } else {
                    given
                };
                let parts: Vec<&std::ffi::OsStr> = below
                    .components()
                    .filter_map(|c| match c {
                        Component::Normal(part) => Some(part),
                        _ => None,
                    })
                    .collect();
                check_components(canonical, &parts).map_err(|d| field.error(d))?;
                parts.iter().fold(canonical.clone(), |p, c| p.join(c))
            }
            Boundary::Local => {
                let absolute =
                    std::path::absolute(given).map_err(|e| field.error(e.to_string()))?;
                match std::fs::symlink_metadata(&absolute) {
                    Ok(meta) if meta.file_type().is_symlink() => {
                        return Err(field.error("the path is a symlink"));
                    }
                    _ => {}
                }
                // The user's own parents (`..`, symlinked home directories) are theirs to use.
                match (absolute.parent(), absolute.file_name()) {
                    (Some(parent), Some(name)) => match std::fs::canonicalize(parent) {
                        Ok(parent) => parent.join(name),
                        Err(_) => absolute,
                    },
                    _ => absolute,
                }
            }
        };
        match (field, std::fs::symlink_metadata(&path)) {
            (PathField::Source, Err(_)) => Err(field.error("the path does not exist")),
            (PathField::Manifest, _) if !path.parent().is_some_and(Path::is_dir) => {
                Err(field.error("the manifest's directory does not exist"))
            }
            (PathField::Manifest, Ok(meta)) if !meta.is_file() => {
                Err(field.error("the manifest path is not a regular file"))
            }
            (PathField::OutputDir, Ok(meta)) if !meta.is_dir() => {
                Err(field.error("the output path exists and is not a directory"))
            }
            _ => Ok(path),
        }
    }
}

/// Refuses when an existing component of `base/parts...` is a symlink, or an existing
/// intermediate one is not a directory; a missing component ends the walk (nothing below it
/// exists). `base` itself is trusted.
pub(crate) fn check_components(base: &Path, parts: &[&std::ffi::OsStr]) -> Result<(), String> {
    let mut path = base.to_path_buf();
    for (index, part) in parts.iter().enumerate() {
        path.push(part);
        match std::fs::symlink_metadata(&path) {
            Ok(meta) if meta.file_type().is_symlink() => {
                return Err(if index + 1 == parts.len() {
                    "the path is a symlink".to_string()
                } else {
                    "the path crosses a symlinked directory".to_string()
                });
            }
            Ok(meta) if index + 1 < parts.len() && !meta.is_dir() => {
                return Err("a parent of the path is not a directory".to_string());
            }
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(format!("cannot inspect the path: {e}")),
        }
    }
    Ok(())
}

/// Creates `dir` below `base` (components that exist must be real directories), checking
/// before and after, so no symlink planted meanwhile is followed.
pub(crate) fn create_dir_below(base: &Path, dir: &Path) -> Result<(), String> {
    let below = dir
        .strip_prefix(base)
        .map_err(|_| "the output is outside its directory".to_string())?;
    let parts: Vec<&std::ffi::OsStr> = below.iter().collect();
    check_components(base, &parts)?;
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    check_components(base, &parts)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn setup() -> (tempfile::TempDir, Boundary, PathBuf) {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().join("root");
        std::fs::create_dir_all(root.join("docs/sub")).expect("mkdir");
        std::fs::write(root.join("docs/a.txt"), "a").expect("write");
        let boundary = Boundary::root(Some(&root)).expect("root");
        (dir, boundary, root)
    }

    #[test]
    fn paths_under_the_root_resolve() {
        let (_dir, b, root) = setup();
        let canonical = std::fs::canonicalize(&root).expect("canon");
        assert_eq!(
            b.resolve("docs/a.txt", PathField::Source)
                .expect("relative"),
            canonical.join("docs/a.txt")
        );
        let absolute = root.join("docs").display().to_string();
        assert_eq!(
            b.resolve(&absolute, PathField::Source).expect("absolute"),
            canonical.join("docs")
        );
        assert!(b.resolve("docs/m.json", PathField::Manifest).is_ok());
        assert!(b.resolve("out/new", PathField::OutputDir).is_ok());
    }

    #[test]
    fn the_rules_refuse_with_the_field_code() {
        let (dir, b, root) = setup();
        let outside = dir.path().join("outside");
        std::fs::create_dir_all(&outside).expect("mkdir");
        std::fs::write(outside.join("x.txt"), "x").expect("write");
        symlink(&outside, root.join("linked")).expect("symlink");
        symlink(outside.join("x.txt"), root.join("docs/link.txt")).expect("symlink");
        let code = |raw: &str, field| b.resolve(raw, field).map(|_| ()).unwrap_err().code();
        assert_eq!(
            code("../outside/x.txt", PathField::Source),
            "invalid_import_path"
        );
        assert_eq!(
            code("docs/../docs/a.txt", PathField::Source),
            "invalid_import_path"
        );
        assert_eq!(
            code(
                &outside.join("x.txt").display().to_string(),
                PathField::Source
            ),
            "invalid_import_path"
        );
        assert_eq!(
            code("docs/link.txt", PathField::Source),
            "invalid_import_path"
        );
        assert_eq!(
            code("linked/x.txt", PathField::Source),
            "invalid_import_path"
        );
        assert_eq!(
            code("docs/missing.txt", PathField::Source),
            "invalid_import_path"
        );
        assert_eq!(
            code("linked/m.json", PathField::Manifest),
            "invalid_manifest_path"
        );
        assert_eq!(
            code("nodir/m.json", PathField::Manifest),
            "invalid_manifest_path"
        );
        assert_eq!(code("linked", PathField::OutputDir), "invalid_output_dir");
        assert_eq!(
            code("linked/new", PathField::OutputDir),
            "invalid_output_dir"
        );
        assert_eq!(
            code("docs/a.txt", PathField::OutputDir),
            "invalid_output_dir"
        );
        assert_eq!(
            Boundary::root(None).map(|_| ()).unwrap_err().code(),
            "invalid_import_path"
        );
    }

    #[test]
    fn the_cli_takes_any_path_but_no_symlink() {
        let (_dir, _b, root) = setup();
        let given = root.join("docs/sub/../a.txt").display().to_string();
        assert!(Boundary::Local.resolve(&given, PathField::Source).is_ok());
        symlink(root.join("docs/a.txt"), root.join("l.txt")).expect("symlink");
        let link = root.join("l.txt").display().to_string();
        assert!(Boundary::Local.resolve(&link, PathField::Source).is_err());
    }
}
