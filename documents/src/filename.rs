//! The one filename normalization used everywhere a user-supplied name is stored or shown:
//! uploads, batch items (also failed ones), imports.

/// Upper bound of a normalized filename, in bytes.
pub const MAX_FILENAME_BYTES: usize = 200;
/// Longest suffix (without the dot) still treated as an extension.
pub const MAX_EXTENSION_BYTES: usize = 16;
/// Stem used when nothing usable is left of a name.
pub const FALLBACK_STEM: &str = "document";

/// Normalizes a user-supplied filename into a safe single path component.
///
/// Keeps the last path component (split on `/` and `\`), drops control and invisible
/// formatting characters, replaces path-hostile characters with `_`, collapses whitespace
/// runs to one space, trims leading and trailing dots and spaces, prefixes Windows device
/// names with `_`, caps the result at [`MAX_FILENAME_BYTES`] on a character boundary while
/// keeping the extension, and never returns an empty name (`document`, or `document.<ext>`
/// for a name that was only an extension such as `.txt`). The function is idempotent.
pub fn normalize_filename(raw: &str) -> String {
    let last = raw
        .rsplit(['/', '\\'])
        .find(|part| !part.is_empty())
        .unwrap_or("");

    let mut cleaned = String::with_capacity(last.len());
    let mut pending_space = false;
    for c in last.chars() {
        let mapped = if c.is_whitespace() {
            Some(' ')
        } else if c.is_control() || is_invisible(c) {
            None
        } else if is_hostile(c) {
            Some('_')
        } else {
            Some(c)
        };
        match mapped {
            Some(' ') => pending_space = true,
            Some(ch) => {
                if pending_space && !cleaned.is_empty() {
                    cleaned.push(' ');
                }
                pending_space = false;
                cleaned.push(ch);
            }
            None => {}
        }
    }

    let trimmed_end = cleaned.trim_end_matches(['.', ' ']);
    let trimmed = trimmed_end.trim_start_matches(['.', ' ']);
    let mut name = if trimmed.len() < trimmed_end.len()
        && trimmed_end.starts_with('.')
        && !trimmed.contains('.')
        && is_extension(trimmed)
    {
        // A name that is only an extension (".txt"): keep the extension, invent the stem.
        format!("{FALLBACK_STEM}.{trimmed}")
    } else {
        trimmed.to_string()
    };

    if name.is_empty() {
        return FALLBACK_STEM.to_string();
    }
    if is_reserved_device_name(&name) {
        name.insert(0, '_');
    }
    if name.len() > MAX_FILENAME_BYTES {
        name = cap_length(&name);
    }
    name
}

/// The lowercase extension of a filename (after normalization), if it has one.
pub fn extension_of(name: &str) -> Option<String> {
    let normalized = normalize_filename(name);
    split_extension(&normalized).map(|(_, ext)| ext.to_lowercase())
}

/// The stem of a normalized filename (the name without its extension).
pub fn stem_of(name: &str) -> String {
    let normalized = normalize_filename(name);
    match split_extension(&normalized) {
        Some((stem, _)) => stem.to_string(),
        None => normalized,
    }
}

/// Splits `stem.ext` when the suffix qualifies as an extension and the stem is not empty.
fn split_extension(name: &str) -> Option<(&str, &str)> {
    let (stem, ext) = name.rsplit_once('.')?;
    if stem.is_empty() || !is_extension(ext) {
        return None;
    }
    Some((stem, ext))
}

fn is_extension(ext: &str) -> bool {
    !ext.is_empty()
        && ext.len() <= MAX_EXTENSION_BYTES
        && !ext.chars().any(|c| c.is_whitespace() || c == '.')
}

fn cap_length(name: &str) -> String {
    let (stem, ext) = match split_extension(name) {
        Some((stem, ext)) => (stem, Some(ext)),
        None => (name, None),
    };
    let budget = match ext {
        Some(ext) => MAX_FILENAME_BYTES - 1 - ext.len(),
        None => MAX_FILENAME_BYTES,
    };
    let mut cut = budget.min(stem.len());
    while cut > 0 && !stem.is_char_boundary(cut) {
        cut -= 1;
    }
    let stem = stem.get(..cut).unwrap_or("").trim_end_matches(['.', ' ']);
    let stem = if stem.is_empty() { FALLBACK_STEM } else { stem };
    match ext {
        Some(ext) => format!("{stem}.{ext}"),
        None => stem.to_string(),
    }
}

/// Characters that break paths or shells on some platform, or imitate a separator.
fn is_hostile(c: char) -> bool {
    matches!(
        c,
        '<' | '>'
            | ':'
            | '"'
            | '|'
            | '?'
            | '*'
            | '/'
            | '\\'
            | '\u{2044}' // fraction slash
            | '\u{2215}' // division slash
            | '\u{29F5}' // reverse solidus operator
            | '\u{29F8}' // big solidus
            | '\u{29F9}' // big reverse solidus
            | '\u{FF0F}' // fullwidth solidus
            | '\u{FF3C}' // fullwidth reverse solidus
            | '\u{FE68}' // small reverse solidus
    )
}

/// Invisible formatting characters (zero-width, bidirectional overrides, BOM): they can hide
/// or reverse a name's real extension, so they are dropped.
fn is_invisible(c: char) -> bool {
    matches!(
        c,
        '\u{00AD}'
            | '\u{061C}'
            | '\u{180E}'
            | '\u{200B}'..='\u{200F}'
            | '\u{202A}'..='\u{202E}'
            | '\u{2060}'..='\u{2064}'
            | '\u{2066}'..='\u{206F}'
            | '\u{FEFF}'
            | '\u{FFF9}'..='\u{FFFB}'
    )
}

fn is_reserved_device_name(name: &str) -> bool {
    let base = name.split('.').next().unwrap_or("").trim_end();
    let upper = base.to_ascii_uppercase();
    match upper.as_str() {
        "CON" | "PRN" | "AUX" | "NUL" | "CONIN$" | "CONOUT$" => true,
        _ => {
            let bytes = upper.as_bytes();
            bytes.len() == 4
                && (upper.starts_with("COM") || upper.starts_with("LPT"))
                && matches!(bytes.get(3), Some(b'1'..=b'9'))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn keeps_the_last_component() {
        assert_eq!(normalize_filename("a/b/c.txt"), "c.txt");
        assert_eq!(normalize_filename(r"C:\Users\me\notes.md"), "notes.md");
        assert_eq!(normalize_filename("../../etc/passwd"), "passwd");
        assert_eq!(normalize_filename("dir/"), "dir");
    }

    #[test]
    fn replaces_hostile_and_drops_control_characters() {
        assert_eq!(
            normalize_filename("a<b>c:d\"e|f?g*h.txt"),
            "a_b_c_d_e_f_g_h.txt"
        );
        assert_eq!(normalize_filename("nul\0byte\u{7}.txt"), "nulbyte.txt");
        assert_eq!(normalize_filename("evil\u{202E}txt.exe"), "eviltxt.exe");
        assert_eq!(normalize_filename("a\u{2215}b.txt"), "a_b.txt");
    }

    #[test]
    fn collapses_whitespace_and_trims_dots() {
        assert_eq!(
            normalize_filename("  my \t\n  file  .txt  "),
            "my file .txt"
        );
        assert_eq!(normalize_filename("...hidden..."), "document.hidden");
        assert_eq!(normalize_filename("..a.b.."), "a.b");
        assert_eq!(normalize_filename("report.txt."), "report.txt");
    }

    #[test]
    fn never_empty_or_dot_names() {
        for raw in ["", ".", "..", "...", "/", "\\", "  ", "\0", "a/..", "../"] {
            let out = normalize_filename(raw);
            assert_eq!(out, "document", "{raw:?}");
        }
        assert_eq!(normalize_filename(".txt"), "document.txt");
        assert_eq!(normalize_filename(" . .md"), "document.md");
    }

    #[test]
    fn device_names_are_prefixed() {
        assert_eq!(normalize_filename("CON"), "_CON");
        assert_eq!(normalize_filename("com1.txt"), "_com1.txt");
        assert_eq!(normalize_filename("console.txt"), "console.txt");
    }

    #[test]
    fn caps_length_keeping_the_extension() {
        let long = format!("{}.markdown", "é".repeat(300));
        let out = normalize_filename(&long);
        assert!(out.len() <= MAX_FILENAME_BYTES);
        assert!(out.ends_with(".markdown"));
        let no_ext = "x".repeat(500);
        assert_eq!(normalize_filename(&no_ext).len(), MAX_FILENAME_BYTES);
    }

    #[test]
    fn extensions_are_lowercase() {
        assert_eq!(extension_of("Report.TXT").as_deref(), Some("txt"));
        assert_eq!(extension_of("archive.tar.gz").as_deref(), Some("gz"));
        assert_eq!(extension_of("README"), None);
        assert_eq!(extension_of(".md").as_deref(), Some("md"));
        assert_eq!(extension_of("notes. final draft"), None);
        assert_eq!(stem_of("dir/Report.TXT"), "Report");
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        #[test]
        fn normalization_is_safe_and_idempotent(raw in any::<String>()) {
            check(&raw);
        }

        #[test]
        fn normalization_of_hostile_alphabet(raw in "[a-z./\\\\ \t\0<>:\"|?*\u{202E}é\u{FEFF}]{0,300}") {
            check(&raw);
        }

        #[test]
        fn extension_of_never_panics(raw in any::<String>()) {
            let _ = extension_of(&raw);
        }
    }

    fn check(raw: &str) {
        let out = normalize_filename(raw);
        assert!(!out.is_empty());
        assert!(out != "." && out != "..");
        assert!(out.len() <= MAX_FILENAME_BYTES, "{} bytes", out.len());
        assert!(!out.contains('/') && !out.contains('\\') && !out.contains('\0'));
        assert!(!out.chars().any(|c| c.is_control()));
        assert!(!out.chars().any(|c| "<>:\"|?*".contains(c)));
        assert!(!out.starts_with(['.', ' ']) && !out.ends_with(['.', ' ']));
        assert_eq!(normalize_filename(&out), out, "not idempotent for {raw:?}");
    }
}
