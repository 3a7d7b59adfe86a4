//! The universal converter: legacy and rare formats (doc, ppt, odg, wpd, vsd, ...) are turned
//! by LibreOffice headless into a format an extractor of ours reads (docx, pptx, xlsx, pdf),
//! each conversion in a temporary directory of its own with its own LibreOffice profile.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use tempfile::TempDir;

use crate::subprocess::{self, Tool};
use crate::{Control, ExtractError, Extraction, Input, Limits};

const SOFFICE: Tool = Tool {
    program: "soffice",
    package: "libreoffice-core, libreoffice-writer, libreoffice-calc, libreoffice-impress, libreoffice-draw",
};

/// LibreOffice prints a line per conversion; more is noise worth dropping.
const SOFFICE_STDOUT_CAP: u64 = 1024 * 1024;

/// The file names inside the conversion directory: ASCII, so no URL or shell quoting matters.
const INPUT_STEM: &str = "input";

/// What a legacy format is converted to, and which of our extractors reads the result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    Docx,
    Pptx,
    Xlsx,
    Pdf,
}

impl Target {
    fn for_extension(extension: &str) -> Option<Target> {
        Some(match extension {
            "doc" | "dot" | "fodt" | "sxw" | "wpd" | "wps" | "abw" | "lwp" | "hwp" | "pub" => {
                Target::Docx
            }
            "ppt" | "pps" | "pot" | "fodp" | "sxi" => Target::Pptx,
            "xlt" | "fods" | "sxc" => Target::Xlsx,
            "odg" | "otg" | "vsd" | "vsdx" => Target::Pdf,
            _ => return None,
        })
    }

    fn extension(self) -> &'static str {
        match self {
            Target::Docx => "docx",
            Target::Pptx => "pptx",
            Target::Xlsx => "xlsx",
            Target::Pdf => "pdf",
        }
    }

    fn extract(
        self,
        input: Input<'_>,
        limits: &Limits,
        control: &Control,
    ) -> Result<Extraction, ExtractError> {
        match self {
            Target::Docx => crate::docx::extract(input, limits, control),
            Target::Pptx => crate::pptx::extract(input, limits, control),
            Target::Xlsx => crate::spreadsheet::extract(input, limits, control),
            Target::Pdf => crate::pdf::extract(input, limits, control),
        }
    }
}

pub fn extract(
    input: Input<'_>,
    limits: &Limits,
    control: &Control,
) -> Result<Extraction, ExtractError> {
    let target = Target::for_extension(input.extension).ok_or_else(|| {
        ExtractError::unsupported(format!(
            "the universal converter does not read .{} files",
            input.extension
        ))
    })?;
    let conversion = convert_in(
        &std::env::temp_dir(),
        input,
        target.extension(),
        limits,
        control,
    )?;
    let bytes = read_output(&conversion.output, limits)?;
    let converted = Input {
        path: &conversion.output,
        bytes: &bytes,
        extension: target.extension(),
    };
    // The conversion directory lives until the extractor of the converted file is done: the
    // PDF extractor reads it by path.
    target.extract(converted, limits, control)
}

/// Converts `input` with LibreOffice to `target_extension` (`docx`, `pptx`, `xlsx`, `pdf`)
/// and returns the converted file's bytes.
pub fn convert(
    input: Input<'_>,
    target_extension: &str,
    limits: &Limits,
    control: &Control,
) -> Result<Vec<u8>, ExtractError> {
    let conversion = convert_in(
        &std::env::temp_dir(),
        input,
        target_extension,
        limits,
        control,
    )?;
    read_output(&conversion.output, limits)
}

/// A finished conversion: the directory is removed when this is dropped.
struct Conversion {
    _dir: TempDir,
    output: PathBuf,
}

fn convert_in(
    parent: &Path,
    input: Input<'_>,
    target_extension: &str,
    limits: &Limits,
    control: &Control,
) -> Result<Conversion, ExtractError> {
    check_size(input.bytes.len(), limits)?;
    let extension = safe_extension(input.extension)?;
    let target = safe_extension(target_extension)?;
    control.check()?;
    let dir = tempfile::Builder::new()
        .prefix("shelf-universal-")
        .tempdir_in(parent)
        .map_err(|e| ExtractError::io(format!("cannot create a conversion directory: {e}")))?;
    let source = dir.path().join(format!("{INPUT_STEM}.{extension}"));
    std::fs::write(&source, input.bytes)
        .map_err(|e| ExtractError::io(format!("cannot write the conversion input: {e}")))?;
    let out_dir = dir.path().join("out");
    let profile = format!(
        "-env:UserInstallation={}",
        file_url(&dir.path().join("profile"))
    );
    let args: [&OsStr; 10] = [
        OsStr::new("--headless"),
        OsStr::new("--norestore"),
        OsStr::new("--nolockcheck"),
        OsStr::new("--nodefault"),
        OsStr::new("--nofirststartwizard"),
        OsStr::new(&profile),
        OsStr::new("--convert-to"),
        OsStr::new(target),
        OsStr::new("--outdir"),
        out_dir.as_os_str(),
    ];
    let mut all_args: Vec<&OsStr> = args.to_vec();
    all_args.push(source.as_os_str());
    let envs = [("HOME", dir.path().as_os_str())];
    // On timeout or cancel, subprocess::run kills the whole group (oosplash, soffice.bin);
    // returning drops `dir`, which removes the profile and any partial output.
    let out = subprocess::run(
        SOFFICE,
        &all_args,
        &envs,
        conversion_timeout(limits, control),
        SOFFICE_STDOUT_CAP,
        control,
    )?;
    let output = out_dir.join(format!("{INPUT_STEM}.{target}"));
    if !out.status.success() || !output.is_file() {
        return Err(ExtractError::converter_failed(format!(
            "LibreOffice could not convert the .{extension} file to .{target}{}",
            libreoffice_reason(&out.stderr)
        )));
    }
    Ok(Conversion { _dir: dir, output })
}

fn check_size(len: usize, limits: &Limits) -> Result<(), ExtractError> {
    let len = u64::try_from(len).unwrap_or(u64::MAX);
    if len > limits.universal_max_input_bytes {
        return Err(ExtractError::too_large(format!(
            "the file is {len} bytes, over the universal converter's limit of {} bytes (SHELF_UNIVERSAL_MAX_INPUT_BYTES)",
            limits.universal_max_input_bytes
        )));
    }
    Ok(())
}

/// Extensions become file names and a command-line argument: short ASCII alphanumerics only.
fn safe_extension(extension: &str) -> Result<&str, ExtractError> {
    if !extension.is_empty()
        && extension.len() <= 10
        && extension.bytes().all(|b| b.is_ascii_alphanumeric())
    {
        Ok(extension)
    } else {
        Err(ExtractError::unsupported(
            "the file's extension is not one the universal converter reads",
        ))
    }
}

fn conversion_timeout(limits: &Limits, control: &Control) -> Duration {
    control
        .remaining()
        .map_or(limits.universal_timeout, |left| {
            left.min(limits.universal_timeout)
        })
}

/// A `file://` URL for LibreOffice's `UserInstallation`, bytes outside the unreserved set
/// percent-encoded.
fn file_url(path: &Path) -> String {
    let mut url = String::from("file://");
    for byte in path.as_os_str().as_encoded_bytes() {
        if byte.is_ascii_alphanumeric() || b"/-._~".contains(byte) {
            url.push(char::from(*byte));
        } else {
            url.push_str(&format!("%{byte:02X}"));
        }
    }
    url
}

/// LibreOffice exits 0 even when it converted nothing; its `Error:` line says why.
fn libreoffice_reason(stderr: &[u8]) -> String {
    let stderr = String::from_utf8_lossy(stderr);
    stderr
        .lines()
        .map(str::trim)
        .find(|l| l.starts_with("Error"))
        .map(|l| {
            // The message names our temporary paths; keep only what it says.
            let reason: String = l.chars().take(200).collect();
            format!(" ({})", reason.split(" /").next().unwrap_or("").trim())
        })
        .unwrap_or_default()
}

fn read_output(path: &Path, limits: &Limits) -> Result<Vec<u8>, ExtractError> {
    let len = std::fs::metadata(path)
        .map_err(|e| ExtractError::io(format!("cannot read the converted file: {e}")))?
        .len();
    if len > limits.max_decompressed_bytes {
        return Err(ExtractError::too_large(format!(
            "LibreOffice's conversion is {len} bytes, over the limit of {} bytes",
            limits.max_decompressed_bytes
        )));
    }
    std::fs::read(path)
        .map_err(|e| ExtractError::io(format!("cannot read the converted file: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::time::Instant;

    fn lo_installed() -> bool {
        let installed = subprocess::is_installed("soffice");
        if !installed {
            eprintln!("soffice is not installed: test skipped");
        }
        installed
    }

    fn input<'a>(bytes: &'a [u8], extension: &'a str) -> Input<'a> {
        Input {
            path: Path::new("/nonexistent/upload"),
            bytes,
            extension,
        }
    }

    /// A one-page OpenDocument drawing holding `text` in a text box.
    fn odg(text: &str) -> Vec<u8> {
        let content = format!(
            r#"<?xml version="1.0" encoding="UTF-8"?>
<office:document-content xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" xmlns:draw="urn:oasis:names:tc:opendocument:xmlns:drawing:1.0" xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" xmlns:svg="urn:oasis:names:tc:opendocument:xmlns:svg-compatible:1.0" office:version="1.2">
<office:body><office:drawing><draw:page draw:name="page1">
<draw:frame svg:x="2cm" svg:y="2cm" svg:width="15cm" svg:height="3cm"><draw:text-box><text:p>{text}</text:p></draw:text-box></draw:frame>
</draw:page></office:drawing></office:body></office:document-content>"#
        );
        let manifest = r#"<?xml version="1.0" encoding="UTF-8"?>
<manifest:manifest xmlns:manifest="urn:oasis:names:tc:opendocument:xmlns:manifest:1.0" manifest:version="1.2">
<manifest:file-entry manifest:full-path="/" manifest:media-type="application/vnd.oasis.opendocument.graphics"/>
<manifest:file-entry manifest:full-path="content.xml" manifest:media-type="text/xml"/>
</manifest:manifest>"#;
        let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
        let stored = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Stored);
        zip.start_file("mimetype", stored).unwrap();
        zip.write_all(b"application/vnd.oasis.opendocument.graphics")
            .unwrap();
        zip.start_file("META-INF/manifest.xml", stored).unwrap();
        zip.write_all(manifest.as_bytes()).unwrap();
        zip.start_file("content.xml", stored).unwrap();
        zip.write_all(content.as_bytes()).unwrap();
        zip.finish().unwrap().into_inner()
    }

    fn soffice_processes_mentioning(needle: &str) -> Vec<String> {
        let mut found = Vec::new();
        for entry in std::fs::read_dir("/proc").unwrap().flatten() {
            let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
                continue;
            };
            let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            if cmdline.contains(needle) {
                found.push(cmdline);
            }
        }
        found
    }

    #[test]
    fn a_drawing_is_converted_to_pdf_and_read() {
        if !lo_installed() {
            return;
        }
        let bytes = odg("Quarterly shipping schedule for Rotterdam");
        let started = Instant::now();
        let extraction = extract(
            input(&bytes, "odg"),
            &Limits::default(),
            &Control::default(),
        )
        .unwrap();
        eprintln!("odg conversion took {:?}", started.elapsed());
        assert!(
            extraction
                .markdown
                .contains("Quarterly shipping schedule for Rotterdam"),
            "{}",
            extraction.markdown
        );
        assert_eq!(extraction.pages.len(), 1);
        assert!(extraction.pages[0].has_text_layer);
    }

    #[test]
    fn a_flat_text_document_is_converted_to_docx() {
        if !lo_installed() {
            return;
        }
        let fodt = r#"<?xml version="1.0" encoding="UTF-8"?>
<office:document xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" office:version="1.2" office:mimetype="application/vnd.oasis.opendocument.text">
<office:body><office:text><text:p>Minutes of the harbour committee</text:p></office:text></office:body></office:document>"#;
        let docx = convert(
            input(fodt.as_bytes(), "fodt"),
            "docx",
            &Limits::default(),
            &Control::default(),
        )
        .unwrap();
        assert!(docx.starts_with(b"PK\x03\x04"));
        let mut zip = zip::ZipArchive::new(std::io::Cursor::new(docx)).unwrap();
        let mut document = String::new();
        std::io::Read::read_to_string(
            &mut zip.by_name("word/document.xml").unwrap(),
            &mut document,
        )
        .unwrap();
        assert!(document.contains("Minutes of the harbour committee"));
    }

    #[test]
    fn garbage_with_a_legacy_extension_fails_clearly() {
        if !lo_installed() {
            return;
        }
        // LibreOffice opens unknown bytes as plain text in Writer, which has no PowerPoint
        // export: no output file.
        let garbage: Vec<u8> = (0..3000u32).map(|i| (i * 7919 % 251) as u8).collect();
        let err = extract(
            input(&garbage, "ppt"),
            &Limits::default(),
            &Control::default(),
        )
        .unwrap_err();
        assert_eq!(err.code, "converter_failed", "{err:?}");
        assert!(err.detail.contains(".ppt"), "{}", err.detail);
        assert!(!err.detail.contains("/tmp"), "{}", err.detail);
    }

    #[test]
    fn a_cancel_kills_libreoffice_and_removes_its_directory() {
        if !lo_installed() {
            return;
        }
        let parent = tempfile::tempdir().unwrap();
        let needle = parent.path().to_string_lossy().into_owned();
        let bytes = odg("canceled");
        let control = Control::default();
        let canceler = control.clone();
        let started = Instant::now();
        let worker = {
            let parent = parent.path().to_path_buf();
            std::thread::spawn(move || {
                convert_in(
                    &parent,
                    input(&bytes, "odg"),
                    "pdf",
                    &Limits::default(),
                    &control,
                )
                .map(|_| ())
            })
        };
        // Wait until LibreOffice runs with this conversion's profile, then cancel.
        while soffice_processes_mentioning(&needle).is_empty()
            && started.elapsed() < Duration::from_secs(10)
        {
            std::thread::sleep(Duration::from_millis(20));
        }
        std::thread::sleep(Duration::from_millis(300));
        canceler.cancel();
        let result = worker.join().unwrap();
        assert_eq!(result.unwrap_err().code, "canceled");
        assert!(
            soffice_processes_mentioning(&needle).is_empty(),
            "LibreOffice outlived the cancel"
        );
        assert_eq!(std::fs::read_dir(parent.path()).unwrap().count(), 0);
    }

    #[test]
    fn too_large_inputs_are_refused_before_libreoffice_starts() {
        let limits = Limits {
            universal_max_input_bytes: 10,
            ..Limits::default()
        };
        let parent = tempfile::tempdir().unwrap();
        let err = convert_in(
            parent.path(),
            input(b"more than ten bytes", "doc"),
            "docx",
            &limits,
            &Control::default(),
        )
        .err()
        .unwrap();
        assert_eq!(err.code, "file_too_large");
        assert!(err.detail.contains("SHELF_UNIVERSAL_MAX_INPUT_BYTES"));
        assert_eq!(std::fs::read_dir(parent.path()).unwrap().count(), 0);
    }

    #[test]
    fn unknown_extensions_and_odd_names_are_refused() {
        let control = Control::default();
        let err = extract(input(b"x", "txt"), &Limits::default(), &control).unwrap_err();
        assert_eq!(err.code, "unsupported_file_type");
        let err = convert(input(b"x", "d/oc"), "docx", &Limits::default(), &control).unwrap_err();
        assert_eq!(err.code, "unsupported_file_type");
        let err = convert(input(b"x", "doc"), "../x", &Limits::default(), &control).unwrap_err();
        assert_eq!(err.code, "unsupported_file_type");
    }

    #[test]
    fn every_universal_format_has_a_target() {
        for format in crate::ACCEPTED_FORMATS {
            if format.kind == crate::Kind::Universal {
                assert!(
                    Target::for_extension(format.extension).is_some(),
                    "{}",
                    format.extension
                );
            }
        }
    }

    #[test]
    fn profile_urls_are_escaped() {
        assert_eq!(
            file_url(Path::new("/tmp/a b/é")),
            "file:///tmp/a%20b/%C3%A9"
        );
        assert_eq!(
            libreoffice_reason(
                b"Warning: x\nError: no export filter for /tmp/x/out/input.pptx found, aborting.\n"
            ),
            " (Error: no export filter for)"
        );
    }

    /// A legacy Word file end to end: made from a corpus DOCX by LibreOffice, then read back
    /// through the converter and the DOCX extractor.
    #[test]
    fn a_doc_file_is_converted_and_read() {
        let source = Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../tests/corpus/office/docx/sources/lorem_ipsum.docx"
        ));
        if !lo_installed() || !source.exists() {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let status = std::process::Command::new("soffice")
            .args([
                "--headless",
                "--norestore",
                "--convert-to",
                "doc",
                "--outdir",
            ])
            .arg(dir.path())
            .arg(format!(
                "-env:UserInstallation={}",
                file_url(&dir.path().join("profile"))
            ))
            .arg(source)
            .env("HOME", dir.path())
            .status()
            .unwrap();
        assert!(status.success());
        let doc = std::fs::read(dir.path().join("lorem_ipsum.doc")).unwrap();
        let extraction =
            extract(input(&doc, "doc"), &Limits::default(), &Control::default()).unwrap();
        assert!(
            extraction.markdown.contains("Lorem ipsum"),
            "{}",
            extraction.markdown
        );
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 64, ..Default::default() })]

        /// Everything before LibreOffice starts (size, extension checks) never panics.
        #[test]
        fn checks_never_panic(ext in "\\PC{0,12}", len in 1usize..64) {
            let limits = Limits { universal_max_input_bytes: 0, ..Limits::default() };
            let bytes = vec![0u8; len];
            let _ = convert(input(&bytes, &ext), "docx", &limits, &Control::default());
        }
    }
}
