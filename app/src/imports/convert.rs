//! Conversion: where each source's output goes in each output mode, the output's text
//! (Markdown as extracted, or plain text), and its write (refusing symlinks, atomic).

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use shelf_documents::DataDir;

use super::manifest::write_atomic;
use super::paths::create_dir_below;
use super::request::{OutputFormat, OutputMode};

/// Directory the `subdirectory` mode writes beside the sources.
pub const SUBDIRECTORY_NAME: &str = "shelf-converted";
/// Suffix of a page manifest sidecar, after the output's name.
pub const PAGES_SUFFIX: &str = ".pages.json";

/// Where the outputs of one import go.
#[derive(Debug, Clone)]
pub struct OutputLayout {
    mode: OutputMode,
    format: OutputFormat,
    /// The imported directory, or the imported file's directory.
    source_root: PathBuf,
    /// Directory that every output lies under, for the modes that have one.
    base: Option<PathBuf>,
}

impl OutputLayout {
    /// The layout of an import of `source` (a directory when `source_is_dir`).
    pub fn new(
        mode: &OutputMode,
        format: OutputFormat,
        source: &Path,
        source_is_dir: bool,
        data_dir: &Path,
    ) -> OutputLayout {
        let source_root = if source_is_dir {
            source.to_path_buf()
        } else {
            source.parent().map(Path::to_path_buf).unwrap_or_default()
        };
        let base = match mode {
            OutputMode::Workspace if source_is_dir => Some(
                DataDir::new(data_dir)
                    .converted()
                    .join(workspace_subdir(source)),
            ),
            OutputMode::Workspace => Some(DataDir::new(data_dir).converted()),
            OutputMode::NewDirectory(dir) => Some(dir.clone()),
            OutputMode::Original | OutputMode::Subdirectory => None,
        };
        OutputLayout {
            mode: mode.clone(),
            format,
            source_root,
            base,
        }
    }

    /// The directory all outputs are under (workspace and new-directory modes).
    pub fn base(&self) -> Option<&Path> {
        self.base.as_deref()
    }

    /// The output of `source`: `<name>.<format>` (`report.pdf.md`), so two sources never
    /// share an output and an output never replaces its source. Under the base dir the
    /// source's subdirectories are kept.
    pub fn output_for(&self, source: &Path) -> PathBuf {
        let name = source
            .file_name()
            .map(|n| format!("{}.{}", n.to_string_lossy(), self.format.as_str()))
            .unwrap_or_default();
        let parent = source.parent().unwrap_or(Path::new(""));
        match (&self.base, &self.mode) {
            (Some(base), _) => {
                let relative = parent
                    .strip_prefix(&self.source_root)
                    .unwrap_or(Path::new(""));
                base.join(relative).join(name)
            }
            (None, OutputMode::Subdirectory) => parent.join(SUBDIRECTORY_NAME).join(name),
            (None, _) => parent.join(name),
        }
    }

    /// Where `output`'s directory must be created from: the base dir, or the source's own
    /// directory for the modes that write beside the sources.
    fn anchor_of(&self, output: &Path) -> PathBuf {
        match &self.base {
            Some(base) => base.clone(),
            None => {
                let dir = output.parent().unwrap_or(Path::new(""));
                match self.mode {
                    OutputMode::Subdirectory => dir.parent().unwrap_or(dir).to_path_buf(),
                    _ => dir.to_path_buf(),
                }
            }
        }
    }

    /// Writes `bytes` to `output` atomically, creating its directory; refuses a symlinked
    /// output or directory on the way.
    pub fn write(&self, output: &Path, bytes: &[u8]) -> Result<(), String> {
        let dir = output.parent().unwrap_or(Path::new(""));
        create_dir_below(&self.anchor_of(output), dir)?;
        if std::fs::symlink_metadata(output).is_ok_and(|m| m.file_type().is_symlink()) {
            return Err("the output path is a symlink".into());
        }
        write_atomic(output, bytes).map_err(|e| format!("cannot write {}: {e}", output.display()))
    }
}

/// The workspace subdirectory of a directory import: its name and a short hash of its path,
/// so imports of two `docs` directories never mix and an import again lands in the same place.
fn workspace_subdir(source: &Path) -> String {
    let name = source
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "root".into());
    let digest = Sha256::digest(source.as_os_str().as_encoded_bytes());
    format!("{name}-{}", &hex::encode(digest)[..8])
}

/// Whether `path` (met while listing a directory) is something an import wrote: an output
/// `<name>.md|.txt` or a sidecar `<name>.<fmt>.pages.json` beside its source, or a
/// `shelf-converted` directory. Imports never take their own outputs as sources.
pub fn is_own_output(path: &Path) -> bool {
    let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
        return false;
    };
    if name == SUBDIRECTORY_NAME {
        return true;
    }
    let stem = name.strip_suffix(PAGES_SUFFIX).unwrap_or(name);
    [".md", ".txt"].iter().any(|ext| {
        stem.strip_suffix(ext)
            .is_some_and(|source| !source.is_empty() && path.with_file_name(source).is_file())
    })
}

/// The output text in the requested format.
pub fn render(markdown: &str, format: OutputFormat) -> String {
    match format {
        OutputFormat::Markdown => markdown.to_string(),
        OutputFormat::Text => markdown_to_text(markdown),
    }
}

/// Plain text from the Markdown extractors write: heading marks, emphasis, links, table
/// rules and pipes go; the words, their order and the paragraphs stay.
pub fn markdown_to_text(markdown: &str) -> String {
    let mut out = String::with_capacity(markdown.len());
    for line in markdown.lines() {
        let trimmed = line.trim_start();
        let is_rule =
            trimmed.starts_with('|') && trimmed.chars().all(|c| matches!(c, '|' | '-' | ':' | ' '));
        if is_rule && trimmed.contains('-') {
            continue;
        }
        let mut text = trimmed.trim_start_matches('#');
        if text.len() != trimmed.len() {
            text = text.trim_start();
        }
        let text = if let Some(row) = text.strip_prefix('|') {
            row.trim_end()
                .trim_end_matches('|')
                .split('|')
                .map(str::trim)
                .collect::<Vec<_>>()
                .join("\t")
        } else {
            text.to_string()
        };
        out.push_str(&strip_inline(&text));
        out.push('\n');
    }
    out
}

/// Removes inline Markdown: `**`/`__` emphasis, backticks, and `[text](url)` links (the
/// text stays).
fn strip_inline(line: &str) -> String {
    let line = line.replace("**", "").replace("__", "").replace('`', "");
    let mut out = String::with_capacity(line.len());
    let mut rest = line.as_str();
    while let Some(open) = rest.find('[') {
        let after = &rest[open + 1..];
        let link = after.find("](").and_then(|close| {
            after[close + 2..]
                .find(')')
                .map(|end| (close, close + 2 + end + 1))
        });
        match link {
            Some((close, end)) => {
                out.push_str(&rest[..open]);
                out.push_str(&after[..close]);
                rest = &after[end..];
            }
            None => {
                out.push_str(&rest[..=open]);
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_mode_has_its_place() {
        let data = Path::new("/data");
        let src = Path::new("/in/docs");
        let file = Path::new("/in/docs/sub/a.pdf");
        let layout = |mode| OutputLayout::new(&mode, OutputFormat::Markdown, src, true, data);
        let ws = layout(OutputMode::Workspace).output_for(file);
        assert!(
            ws.to_string_lossy().starts_with("/data/converted/docs-"),
            "{ws:?}"
        );
        assert!(ws.ends_with("sub/a.pdf.md"), "{ws:?}");
        assert_eq!(
            layout(OutputMode::NewDirectory("/out".into())).output_for(file),
            Path::new("/out/sub/a.pdf.md")
        );
        assert_eq!(
            layout(OutputMode::Original).output_for(file),
            Path::new("/in/docs/sub/a.pdf.md")
        );
        assert_eq!(
            layout(OutputMode::Subdirectory).output_for(file),
            Path::new("/in/docs/sub/shelf-converted/a.pdf.md")
        );
        let single = OutputLayout::new(
            &OutputMode::Workspace,
            OutputFormat::Text,
            Path::new("/in/a.pdf"),
            false,
            data,
        );
        assert_eq!(
            single.output_for(Path::new("/in/a.pdf")),
            Path::new("/data/converted/a.pdf.txt")
        );
    }

    #[test]
    fn own_outputs_are_recognized() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("a.pdf"), "x").expect("write");
        assert!(is_own_output(&dir.path().join("a.pdf.md")));
        assert!(is_own_output(&dir.path().join("a.pdf.md.pages.json")));
        assert!(is_own_output(&dir.path().join("shelf-converted")));
        assert!(!is_own_output(&dir.path().join("b.pdf.md")));
        assert!(!is_own_output(&dir.path().join("a.pdf")));
    }

    #[test]
    fn text_drops_markdown_marks() {
        let md = "# Title\n\nSome **bold** and a [link](http://x.y).\n\n| a | b |\n|---|---|\n| 1 | 2 |\n";
        assert_eq!(
            markdown_to_text(md),
            "Title\n\nSome bold and a link.\n\na\tb\n1\t2\n"
        );
        assert_eq!(markdown_to_text("[not a link"), "[not a link\n");
    }
}
