//! The checks of an archive before a restore writes anything: member count, names (the one
//! rule for member names, which a backup also follows), no symlink members, declared expanded
//! size, manifest size and agreement with the members; and the extraction of one member, which
//! stops at its declared size.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::Path;

use zip::ZipArchive;

use super::super::{AdminError, Hashing, Progress};
use super::{
    DATA_PREFIX, DATABASE_MEMBER, FORMAT, FORMAT_VERSION, MANIFEST_MEMBER, Manifest, ManifestFile,
    RestoreLimits,
};

const S_IFMT: u32 = 0o170000;
const S_IFLNK: u32 = 0o120000;
/// Why a member name is refused, if it is: the one rule for names a backup writes and a
/// restore accepts. Directory members end with one `/`.
pub fn refuse_member_name(name: &str) -> Option<&'static str> {
    let path = name.strip_suffix('/').unwrap_or(name);
    if path.is_empty() {
        Some("empty name")
    } else if path.starts_with('/') || path.as_bytes().get(1) == Some(&b':') {
        Some("absolute path")
    } else if path.contains('\\') {
        Some("backslash in the name")
    } else if path.chars().any(char::is_control) {
        Some("control character in the name")
    } else if path.split('/').any(|c| c == "..") {
        Some("`..` path component")
    } else if path.split('/').any(|c| c.is_empty() || c == ".") {
        Some("empty or `.` path component")
    } else if path.len() > 4096 {
        Some("name over 4096 bytes")
    } else {
        None
    }
}
pub(super) type Archive = ZipArchive<BufReader<File>>;

/// Checks everything about the archive that can be checked without writing: see the module
/// documentation. Returns the open archive and its manifest.
pub fn inspect(path: &Path, limits: &RestoreLimits) -> Result<(Archive, Manifest), AdminError> {
    let file = File::open(path).map_err(AdminError::io("cannot open", path))?;
    let mut zip = ZipArchive::new(BufReader::new(file))
        .map_err(|e| AdminError::invalid(format!("not a readable ZIP archive: {e}")))?;
    if zip.has_duplicate_names() {
        return Err(AdminError::DuplicateMember { name: None });
    }
    if zip.len() > limits.max_files {
        return Err(AdminError::TooManyMembers {
            count: zip.len(),
            max: limits.max_files,
        });
    }
    let mut sizes = BTreeMap::new();
    let mut total: u64 = 0;
    for index in 0..zip.len() {
        let entry = zip
            .by_index_raw(index)
            .map_err(|e| AdminError::invalid(format!("member {index} is unreadable: {e}")))?;
        let name = std::str::from_utf8(entry.name_raw()).map_err(|_| AdminError::UnsafeMember {
            name: String::from_utf8_lossy(entry.name_raw()).into_owned(),
            reason: "the name is not UTF-8",
        })?;
        let refuse = |reason| AdminError::UnsafeMember {
            name: name.to_string(),
            reason,
        };
        if let Some(reason) = refuse_member_name(name) {
            return Err(refuse(reason));
        }
        if entry.is_symlink() || entry.unix_mode().is_some_and(|m| m & S_IFMT == S_IFLNK) {
            return Err(AdminError::SymlinkMember { name: name.into() });
        }
        if entry.encrypted() {
            return Err(refuse("encrypted member"));
        }
        let expected =
            name == MANIFEST_MEMBER || name == DATABASE_MEMBER || name.starts_with(DATA_PREFIX);
        if !expected {
            return Err(refuse("not a member of a Shelf workspace backup"));
        }
        if entry.is_dir() {
            continue;
        }
        total = total.saturating_add(entry.size());
        sizes.insert(name.to_string(), entry.size());
    }
    if total > limits.max_expanded_bytes {
        return Err(AdminError::ExpandedTooLarge {
            total,
            max: limits.max_expanded_bytes,
        });
    }
    let manifest = read_manifest(&mut zip, &sizes, limits)?;
    Ok((zip, manifest))
}

fn read_manifest(
    zip: &mut Archive,
    sizes: &BTreeMap<String, u64>,
    limits: &RestoreLimits,
) -> Result<Manifest, AdminError> {
    let size = *sizes
        .get(MANIFEST_MEMBER)
        .ok_or_else(|| AdminError::invalid(format!("it has no {MANIFEST_MEMBER}")))?;
    if size > limits.max_manifest_bytes {
        return Err(AdminError::ManifestTooLarge {
            size,
            max: limits.max_manifest_bytes,
        });
    }
    let mut text = Vec::new();
    zip.by_name(MANIFEST_MEMBER)
        .map_err(|e| AdminError::invalid(format!("{MANIFEST_MEMBER} is unreadable: {e}")))?
        .take(limits.max_manifest_bytes.saturating_add(1))
        .read_to_end(&mut text)
        .map_err(|e| AdminError::invalid(format!("{MANIFEST_MEMBER} is damaged: {e}")))?;
    if text.len() as u64 > limits.max_manifest_bytes {
        return Err(AdminError::ManifestTooLarge {
            size: text.len() as u64,
            max: limits.max_manifest_bytes,
        });
    }
    let manifest: Manifest = serde_json::from_slice(&text)
        .map_err(|e| AdminError::invalid(format!("{MANIFEST_MEMBER} does not parse: {e}")))?;
    if manifest.format != FORMAT {
        return Err(AdminError::invalid(format!(
            "{MANIFEST_MEMBER} is not a {FORMAT} manifest"
        )));
    }
    if manifest.format_version > FORMAT_VERSION {
        return Err(AdminError::invalid(format!(
            "the archive format {} is newer than this shelf reads ({FORMAT_VERSION}); upgrade shelf",
            manifest.format_version
        )));
    }
    let disagree = |what: &str| {
        AdminError::invalid(format!(
            "{MANIFEST_MEMBER} and the archive disagree: {what}"
        ))
    };
    if manifest.database.path != DATABASE_MEMBER
        || sizes.get(DATABASE_MEMBER) != Some(&manifest.database.bytes)
    {
        return Err(disagree("the database member"));
    }
    let mut listed = BTreeSet::new();
    for file in &manifest.files {
        let name = format!("{DATA_PREFIX}{}", file.path);
        if let Some(reason) = refuse_member_name(&name) {
            return Err(AdminError::UnsafeMember { name, reason });
        }
        if sizes.get(&name) != Some(&file.bytes) {
            return Err(disagree(&format!("{name} is missing or of another size")));
        }
        if !listed.insert(name.clone()) {
            return Err(AdminError::DuplicateMember { name: Some(name) });
        }
    }
    let members = sizes.keys().filter(|n| n.starts_with(DATA_PREFIX)).count();
    if members != listed.len() {
        return Err(disagree(
            "the archive holds files the manifest does not list",
        ));
    }
    Ok(manifest)
}

/// Extracts one member to a new file, reading no more than the manifest declares, and checks
/// its size and SHA-256.
pub(super) fn extract(
    zip: &mut Archive,
    name: &str,
    expected: &ManifestFile,
    out: File,
    progress: &dyn Progress,
) -> Result<(), AdminError> {
    let mut entry = zip
        .by_name(name)
        .map_err(|e| AdminError::invalid(format!("{name} is unreadable: {e}")))?;
    let mut sink = Hashing::new(BufWriter::new(out), progress);
    std::io::copy(
        &mut (&mut entry).take(expected.bytes.saturating_add(1)),
        &mut sink,
    )
    .map_err(|e| AdminError::invalid(format!("{name} is damaged: {e}")))?;
    sink.flush()
        .map_err(|e| AdminError::invalid(format!("cannot write {name}: {e}")))?;
    let (bytes, sha256) = sink.finish();
    if bytes != expected.bytes || sha256 != expected.sha256 {
        return Err(AdminError::invalid(format!(
            "{name} does not match the manifest (size or SHA-256)"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    use zip::write::SimpleFileOptions;

    #[test]
    fn member_names_are_checked() {
        for (name, refused) in [
            ("data/uploads/doc_1/a.pdf", None),
            ("data/", None),
            ("shelf.sqlite", None),
            ("../x", Some("`..` path component")),
            ("data/uploads/../../x", Some("`..` path component")),
            ("/etc/x", Some("absolute path")),
            ("C:/x", Some("absolute path")),
            ("data\\x", Some("backslash in the name")),
            ("data//x", Some("empty or `.` path component")),
            ("data/./x", Some("empty or `.` path component")),
            ("data/\u{7}", Some("control character in the name")),
            ("", Some("empty name")),
        ] {
            assert_eq!(refuse_member_name(name), refused, "{name}");
        }
    }
    /// An archive whose member holds more than the manifest declares: the read stops one byte
    /// past the declared size, and the member is refused.
    #[test]
    fn extraction_stops_at_the_declared_size() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.zip");
        let mut writer = zip::ZipWriter::new(File::create(&path).unwrap());
        writer
            .start_file("data/a", SimpleFileOptions::default())
            .unwrap();
        writer.write_all(&[b'a'; 100_000]).unwrap();
        writer.finish().unwrap();
        let mut zip = ZipArchive::new(BufReader::new(File::open(&path).unwrap())).unwrap();
        let declared = ManifestFile {
            path: "a".into(),
            bytes: 10,
            sha256: String::new(),
        };
        let out = dir.path().join("out");
        let err = extract(
            &mut zip,
            "data/a",
            &declared,
            File::create(&out).unwrap(),
            &crate::admin::Silent,
        )
        .unwrap_err();
        assert_eq!(err.code(), "invalid_backup");
        assert_eq!(std::fs::metadata(&out).unwrap().len(), 11);
    }
}
