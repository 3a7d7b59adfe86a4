//! Pure rendering of an Open Knowledge Format bundle: slugs, the Dewey folder path of a code,
//! concept files (YAML front matter, synopsis, cleaned text, `## Related`) and the `index.md`
//! of every folder. No database and no I/O, so every rule is unit-tested here.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use shelf_documents::dewey;

use super::OKF_VERSION;

/// Longest concept slug (before a collision suffix), in bytes (slugs are ASCII).
pub const MAX_SLUG_LEN: usize = 80;
/// Longest label slug in a folder name.
pub const MAX_FOLDER_LABEL_LEN: usize = 48;
/// Most `## Related` links a concept carries (the newest concepts with the same code).
pub const MAX_RELATED: usize = 20;
/// The file name of every folder's listing.
pub const INDEX_FILE: &str = "index.md";

/// Lowercase ASCII letters and digits separated by single `-`, at most `max` bytes, never
/// empty (`untitled`). Common accented Latin letters fold to their base letter; anything else
/// separates words. Because only `[a-z0-9-]` survive, a slug is never `.` or `..`.
pub fn slugify(text: &str, max: usize) -> String {
    let mut out = String::new();
    let mut pending_dash = false;
    for c in text.chars() {
        let folded = fold(c);
        if folded.is_empty() {
            pending_dash = !out.is_empty();
            continue;
        }
        for f in folded.chars() {
            if pending_dash {
                out.push('-');
                pending_dash = false;
            }
            out.push(f);
        }
    }
    if out.len() > max {
        out.truncate(max);
    }
    let trimmed = out.trim_end_matches('-');
    if trimmed.is_empty() {
        "untitled".to_string()
    } else {
        trimmed.to_string()
    }
}

/// A character as slug letters: ASCII alphanumerics lowercased, a few Latin letters folded,
/// everything else empty (a separator).
fn fold(c: char) -> &'static str {
    const ASCII: [&str; 36] = [
        "a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m", "n", "o", "p", "q", "r",
        "s", "t", "u", "v", "w", "x", "y", "z", "0", "1", "2", "3", "4", "5", "6", "7", "8", "9",
    ];
    let lower = c.to_ascii_lowercase();
    if lower.is_ascii_lowercase() {
        return ASCII[(lower as u8 - b'a') as usize];
    }
    if lower.is_ascii_digit() {
        return ASCII[26 + (lower as u8 - b'0') as usize];
    }
    match c {
        'à' | 'á' | 'â' | 'ã' | 'ä' | 'å' | 'À' | 'Á' | 'Â' | 'Ã' | 'Ä' | 'Å' => "a",
        'æ' | 'Æ' => "ae",
        'ç' | 'Ç' => "c",
        'è' | 'é' | 'ê' | 'ë' | 'È' | 'É' | 'Ê' | 'Ë' => "e",
        'ì' | 'í' | 'î' | 'ï' | 'Ì' | 'Í' | 'Î' | 'Ï' => "i",
        'ñ' | 'Ñ' => "n",
        'ò' | 'ó' | 'ô' | 'õ' | 'ö' | 'ø' | 'Ò' | 'Ó' | 'Ô' | 'Õ' | 'Ö' | 'Ø' => "o",
        'œ' | 'Œ' => "oe",
        'ù' | 'ú' | 'û' | 'ü' | 'Ù' | 'Ú' | 'Û' | 'Ü' => "u",
        'ý' | 'ÿ' | 'Ý' => "y",
        'ß' => "ss",
        _ => "",
    }
}

/// One folder of a Dewey path: its code and label, and its name (`636-1-animal-husbandry`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Folder {
    pub code: String,
    pub label: String,
    pub name: String,
}

impl Folder {
    fn new(code: &str) -> Folder {
        let label = dewey::label(code).unwrap_or("Unlabelled").to_string();
        Folder {
            name: format!(
                "{}-{}",
                code.replace('.', "-"),
                slugify(&label, MAX_FOLDER_LABEL_LEN)
            ),
            code: code.to_string(),
            label,
        }
    }

    /// How an index lists the folder: `630 Agriculture`.
    pub fn title(&self) -> String {
        format!("{} {}", self.code, self.label)
    }
}

/// The folders of a code, outermost first: the main class, the division, the three-digit
/// class, then the full code when it has a decimal part (`636.1` → `600-technology`,
/// `630-agriculture`, `636-animal-husbandry`, `636-1-animal-husbandry`). Levels equal to their
/// parent are not repeated (`630` → `600-…`, `630-…`). Labels come from the built-in table of
/// classes, divisions and sections, a finer code taking its nearest ancestor's label, so a
/// folder's name depends on its code alone. `None` for an invalid code.
pub fn folders(code: &str) -> Option<Vec<Folder>> {
    let code = code.trim();
    if !dewey::is_valid_code(code) {
        return None;
    }
    let class = dewey::class_of(code)?;
    let division = dewey::division_of(code)?;
    let section = code.get(0..3)?.to_string();
    let mut codes: Vec<String> = vec![class, division, section, code.to_string()];
    codes.dedup();
    Some(codes.iter().map(|c| Folder::new(c)).collect())
}

/// The relative folder path of a code's concepts (`600-technology/630-agriculture/…`).
pub fn concept_dir(code: &str) -> Option<String> {
    Some(
        folders(code)?
            .iter()
            .map(|f| f.name.as_str())
            .collect::<Vec<_>>()
            .join("/"),
    )
}

/// The short id a colliding slug is suffixed with: the first 8 hex digits of the id.
fn short_id(id: &str) -> &str {
    let hex = id.strip_prefix("doc_").unwrap_or(id);
    hex.get(..8).unwrap_or(hex)
}

/// The slug a concept would have alone: from its title, else its filename's stem.
pub fn base_slug(title: Option<&str>, filename: &str) -> String {
    let source = title
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(str::to_string)
        .unwrap_or_else(|| shelf_documents::stem_of(filename));
    slugify(&source, MAX_SLUG_LEN)
}

/// Unique file stems for the concepts of one folder, from `(id, base slug)` pairs. A slug
/// that several concepts share, or that is `index` (the folder's listing), gets `-<short id>`
/// on all of them; in the unlikely case that still collides, the whole id. The result depends
/// only on the set of pairs, not their order.
pub fn assign_slugs(members: &[(String, String)]) -> HashMap<String, String> {
    let mut counts: HashMap<&str, usize> = HashMap::new();
    for (_, base) in members {
        *counts.entry(base.as_str()).or_default() += 1;
    }
    let mut sorted: Vec<&(String, String)> = members.iter().collect();
    sorted.sort();
    // Unsuffixed slugs first, so a suffixed one can never take a plain one's name.
    let mut used: BTreeSet<String> = sorted
        .iter()
        .filter(|(_, base)| counts.get(base.as_str()) == Some(&1) && base != "index")
        .map(|(_, base)| base.clone())
        .collect();
    let mut out = HashMap::new();
    for (id, base) in sorted {
        if counts.get(base.as_str()) == Some(&1) && base != "index" {
            out.insert(id.clone(), base.clone());
            continue;
        }
        let hex = id.strip_prefix("doc_").unwrap_or(id);
        let mut slug = format!("{base}-{}", short_id(id));
        if used.contains(&slug) {
            slug = format!("{base}-{}", slugify(hex, 64));
        }
        let mut n = 2;
        while used.contains(&slug) {
            slug = format!("{base}-{}-{n}", slugify(hex, 64));
            n += 1;
        }
        used.insert(slug.clone());
        out.insert(id.clone(), slug);
    }
    out
}

/// A YAML double-quoted scalar: valid for any input, whatever `:`, `#`, quotes, newlines or
/// control characters it holds.
pub fn yaml_string(value: &str) -> String {
    let mut out = String::with_capacity(value.len() + 2);
    out.push('"');
    for c in value.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{85}' | '\u{2028}' | '\u{2029}' | '\u{feff}' => {
                out.push_str(&format!("\\u{:04x}", c as u32));
            }
            c if c.is_control() => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A flow sequence of quoted strings: `["a", "b"]`.
fn yaml_list(values: &[String]) -> String {
    let items: Vec<String> = values.iter().map(|v| yaml_string(v)).collect();
    format!("[{}]", items.join(", "))
}

/// Text shown inside `[...]` of a Markdown link, on one line.
fn link_text(text: &str) -> String {
    let one_line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut out = String::with_capacity(one_line.len());
    for c in one_line.chars() {
        if matches!(c, '[' | ']' | '\\' | '*' | '_' | '`' | '<' | '>') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// What a concept file is made of.
#[derive(Debug, Clone, PartialEq)]
pub struct ConceptInput {
    pub document_id: String,
    pub title: String,
    pub summary: Option<String>,
    pub tags: Vec<String>,
    /// RFC 3339.
    pub timestamp: String,
    pub dewey_code: String,
    pub dewey_label: String,
    pub source_filename: String,
    pub classification_confidence: Option<f64>,
    pub text: String,
}

/// A `## Related` entry: another concept in the same folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RelatedLink {
    pub title: String,
    /// File stem in the same folder.
    pub slug: String,
}

/// The concept file: front matter, `> synopsis`, the cleaned text, `## Related`.
pub fn render_concept(c: &ConceptInput, related: &[RelatedLink]) -> String {
    let mut out = String::with_capacity(c.text.len() + 1024);
    let summary = c.summary.as_deref().unwrap_or("").trim();
    out.push_str("---\n");
    out.push_str("type: concept\n");
    out.push_str(&format!("title: {}\n", yaml_string(&c.title)));
    out.push_str(&format!("description: {}\n", yaml_string(summary)));
    out.push_str(&format!(
        "resource: {}\n",
        yaml_string(&format!("urn:shelf:doc:{}", c.document_id))
    ));
    out.push_str(&format!("tags: {}\n", yaml_list(&c.tags)));
    out.push_str(&format!("timestamp: {}\n", yaml_string(&c.timestamp)));
    out.push_str(&format!("dewey_code: {}\n", yaml_string(&c.dewey_code)));
    out.push_str(&format!("dewey_label: {}\n", yaml_string(&c.dewey_label)));
    out.push_str(&format!(
        "source_filename: {}\n",
        yaml_string(&c.source_filename)
    ));
    match c.classification_confidence.filter(|v| v.is_finite()) {
        Some(v) => out.push_str(&format!("classification_confidence: {v}\n")),
        None => out.push_str("classification_confidence: null\n"),
    }
    out.push_str("---\n\n");
    if !summary.is_empty() {
        for line in summary.lines() {
            let line = line.trim_end();
            if line.is_empty() {
                out.push_str(">\n");
            } else {
                out.push_str(&format!("> {line}\n"));
            }
        }
        out.push('\n');
    }
    let text = c.text.trim();
    if !text.is_empty() {
        out.push_str(text);
        out.push_str("\n\n");
    }
    out.push_str("## Related\n\n");
    if related.is_empty() {
        out.push_str("No other concept shares this code.\n");
    }
    for r in related.iter().take(MAX_RELATED) {
        out.push_str(&format!("- [{}]({}.md)\n", link_text(&r.title), r.slug));
    }
    out
}

/// A concept as the index files need it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct IndexedConcept {
    title: String,
    file: String,
}

/// The `index.md` files of a bundle, accumulated concept by concept: only paths and titles
/// are kept, never texts.
#[derive(Debug, Default)]
pub struct IndexBuilder {
    /// Folder path (`""` for the root) → its sub-folders (name → title) and concepts.
    folders: BTreeMap<String, FolderEntries>,
    concepts: u64,
}

#[derive(Debug, Default)]
struct FolderEntries {
    title: String,
    subfolders: BTreeMap<String, String>,
    concepts: Vec<IndexedConcept>,
}

impl IndexBuilder {
    pub fn new() -> Self {
        Self::default()
    }

    /// Records a concept written at `<concept_dir(code)>/<slug>.md`.
    pub fn add(&mut self, code: &str, slug: &str, title: &str) {
        let Some(folders) = folders(code) else {
            return;
        };
        self.concepts += 1;
        self.folders.entry(String::new()).or_default();
        let mut path = String::new();
        for folder in &folders {
            self.folders
                .entry(path.clone())
                .or_default()
                .subfolders
                .insert(folder.name.clone(), folder.title());
            if !path.is_empty() {
                path.push('/');
            }
            path.push_str(&folder.name);
            self.folders.entry(path.clone()).or_default().title = folder.title();
        }
        self.folders
            .entry(path)
            .or_default()
            .concepts
            .push(IndexedConcept {
                title: title.to_string(),
                file: format!("{slug}.md"),
            });
    }

    /// How many concepts were added.
    pub fn concepts(&self) -> u64 {
        self.concepts
    }

    /// Every `index.md`, the root's first. The root carries `okf_version`, the generation time
    /// and the counts; each folder lists its sub-folders, then its concepts by title.
    pub fn finish(mut self, generated_at: &str, skipped: u64) -> Vec<(String, String)> {
        self.folders.entry(String::new()).or_default();
        let mut out = Vec::with_capacity(self.folders.len());
        for (path, mut entries) in self.folders {
            entries
                .concepts
                .sort_by(|a, b| a.title.cmp(&b.title).then_with(|| a.file.cmp(&b.file)));
            let mut text = String::from("---\n");
            let heading = if path.is_empty() {
                text.push_str("type: index\n");
                text.push_str(&format!("okf_version: {}\n", yaml_string(OKF_VERSION)));
                text.push_str(&format!("generated: {}\n", yaml_string(generated_at)));
                text.push_str(&format!("concepts: {}\n", self.concepts));
                text.push_str(&format!("skipped: {skipped}\n"));
                "Shelf knowledge bundle".to_string()
            } else {
                text.push_str("type: index\n");
                text.push_str(&format!("title: {}\n", yaml_string(&entries.title)));
                entries.title.clone()
            };
            text.push_str("---\n\n");
            text.push_str(&format!("# {}\n\n", link_text(&heading)));
            for (name, title) in &entries.subfolders {
                text.push_str(&format!("- [{}]({name}/{INDEX_FILE})\n", link_text(title)));
            }
            if !entries.subfolders.is_empty() && !entries.concepts.is_empty() {
                text.push('\n');
            }
            for c in &entries.concepts {
                text.push_str(&format!("- [{}]({})\n", link_text(&c.title), c.file));
            }
            let file = if path.is_empty() {
                INDEX_FILE.to_string()
            } else {
                format!("{path}/{INDEX_FILE}")
            };
            out.push((file, text));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs() {
        let cases = [
            ("Horses & Equines", "horses-equines"),
            ("  Hello, World!  ", "hello-world"),
            ("Ünïcode café", "unicode-cafe"),
            ("日本語", "untitled"),
            ("", "untitled"),
            ("..", "untitled"),
            ("../../etc/passwd", "etc-passwd"),
            ("a---b", "a-b"),
            ("Straße", "strasse"),
            ("C:\\Windows\\System32", "c-windows-system32"),
        ];
        for (input, expected) in cases {
            assert_eq!(slugify(input, MAX_SLUG_LEN), expected, "{input:?}");
        }
        let long = slugify(&"word ".repeat(100), MAX_SLUG_LEN);
        assert!(long.len() <= MAX_SLUG_LEN, "{long}");
        assert!(!long.ends_with('-'));
        assert_eq!(base_slug(None, "Notes 2024.txt"), "notes-2024");
        assert_eq!(base_slug(Some("  "), "a.md"), "a");
        assert_eq!(base_slug(Some("Title"), "a.md"), "title");
    }

    #[test]
    fn dewey_paths() {
        assert_eq!(
            concept_dir("636.1").as_deref(),
            Some("600-technology/630-agriculture/636-animal-husbandry/636-1-animal-husbandry")
        );
        assert_eq!(
            concept_dir("636").as_deref(),
            Some("600-technology/630-agriculture/636-animal-husbandry")
        );
        assert_eq!(
            concept_dir("630").as_deref(),
            Some("600-technology/630-agriculture")
        );
        assert_eq!(concept_dir("600").as_deref(), Some("600-technology"));
        assert_eq!(
            concept_dir("004.678").as_deref(),
            Some(
                "000-computer-science-information-general-works/\
                 004-data-processing-computer-science/\
                 004-678-data-processing-computer-science"
            )
        );
        assert_eq!(concept_dir("nonsense"), None);
        assert_eq!(concept_dir("../6"), None);
        for code in ["000", "123.456", "999.9"] {
            let dir = concept_dir(code).unwrap_or_default();
            assert!(
                dir.split('/')
                    .all(|s| !s.is_empty() && s != "." && s != ".."),
                "{dir}"
            );
        }
    }

    #[test]
    fn slug_collisions_are_resolved_the_same_way_in_any_order() {
        let members = vec![
            ("doc_aaaaaaaa11111111".to_string(), "horses".to_string()),
            ("doc_bbbbbbbb22222222".to_string(), "horses".to_string()),
            ("doc_cccccccc33333333".to_string(), "ponies".to_string()),
            ("doc_dddddddd44444444".to_string(), "index".to_string()),
            // A title that looks like another's suffixed slug.
            (
                "doc_eeeeeeee55555555".to_string(),
                "horses-aaaaaaaa".to_string(),
            ),
        ];
        let slugs = assign_slugs(&members);
        assert_eq!(slugs["doc_cccccccc33333333"], "ponies");
        assert_eq!(slugs["doc_dddddddd44444444"], "index-dddddddd");
        assert_eq!(slugs["doc_eeeeeeee55555555"], "horses-aaaaaaaa");
        assert_eq!(slugs["doc_aaaaaaaa11111111"], "horses-aaaaaaaa11111111");
        assert_eq!(slugs["doc_bbbbbbbb22222222"], "horses-bbbbbbbb");
        let unique: BTreeSet<&String> = slugs.values().collect();
        assert_eq!(unique.len(), members.len());
        let mut reversed = members.clone();
        reversed.reverse();
        assert_eq!(assign_slugs(&reversed), slugs);
    }

    fn parse(yaml: &str) -> yaml_serde::Value {
        yaml_serde::from_str(yaml).unwrap_or_else(|e| panic!("invalid YAML ({e}):\n{yaml}"))
    }

    /// The front matter of a Markdown file with one.
    fn front_matter(text: &str) -> &str {
        let rest = text.strip_prefix("---\n").unwrap_or_default();
        rest.split_once("\n---\n")
            .map(|(fm, _)| fm)
            .unwrap_or_default()
    }

    fn sample(title: &str) -> ConceptInput {
        ConceptInput {
            document_id: "doc_0123456789abcdef".into(),
            title: title.into(),
            summary: Some("Line one: \"quoted\" # not a comment\nLine two".into()),
            tags: vec!["horses".into(), "a: b".into(), "#x".into()],
            timestamp: "2026-01-02T03:04:05.678Z".into(),
            dewey_code: "636.1".into(),
            dewey_label: "Agriculture".into(),
            source_filename: "horses \"draft\".txt".into(),
            classification_confidence: Some(0.75),
            text: "# Horses\n\nHorses are equines.".into(),
        }
    }

    #[test]
    fn front_matter_is_valid_yaml_for_hostile_values() {
        let hostile = [
            "Plain",
            "a: b # c \" d \n e",
            "- item",
            "'single' and \\ backslash\t tab\r",
            "null",
            "yes",
            "123",
            "@at `tick` {brace} [bracket] |pipe >gt %pc &amp *star !bang",
            "\u{7}bell \u{1b}esc \u{85}nel \u{2028}ls \u{feff}bom ünï 日本",
            "---",
            "...",
        ];
        for title in hostile {
            let c = sample(title);
            let text = render_concept(&c, &[]);
            let fm = parse(front_matter(&text));
            assert_eq!(fm["type"].as_str(), Some("concept"));
            assert_eq!(fm["title"].as_str(), Some(title), "{title:?}");
            assert_eq!(fm["description"].as_str(), c.summary.as_deref());
            assert_eq!(
                fm["resource"].as_str(),
                Some("urn:shelf:doc:doc_0123456789abcdef")
            );
            assert_eq!(fm["tags"][1].as_str(), Some("a: b"));
            assert_eq!(fm["tags"][2].as_str(), Some("#x"));
            assert_eq!(fm["timestamp"].as_str(), Some("2026-01-02T03:04:05.678Z"));
            assert_eq!(fm["dewey_code"].as_str(), Some("636.1"));
            assert_eq!(fm["dewey_label"].as_str(), Some("Agriculture"));
            assert_eq!(fm["source_filename"].as_str(), Some("horses \"draft\".txt"));
            assert_eq!(fm["classification_confidence"].as_f64(), Some(0.75));
        }
    }

    #[test]
    fn concept_body() {
        let mut c = sample("Horses");
        c.classification_confidence = None;
        let related = vec![
            RelatedLink {
                title: "Ponies [small]".into(),
                slug: "ponies".into(),
            },
            RelatedLink {
                title: "Mules".into(),
                slug: "mules".into(),
            },
        ];
        let text = render_concept(&c, &related);
        assert!(text.contains("classification_confidence: null\n"), "{text}");
        assert!(
            text.contains("\n> Line one: \"quoted\" # not a comment\n> Line two\n\n# Horses\n"),
            "{text}"
        );
        assert!(
            text.ends_with(
                "## Related\n\n- [Ponies \\[small\\]](ponies.md)\n- [Mules](mules.md)\n"
            )
        );
        let many: Vec<RelatedLink> = (0..50)
            .map(|i| RelatedLink {
                title: format!("T{i}"),
                slug: format!("t{i}"),
            })
            .collect();
        let text = render_concept(&c, &many);
        assert_eq!(text.matches("](t").count(), MAX_RELATED);
        let text = render_concept(&c, &[]);
        assert!(text.ends_with("## Related\n\nNo other concept shares this code.\n"));
    }

    #[test]
    fn index_files_list_every_folder_and_concept() {
        let mut index = IndexBuilder::new();
        index.add("636.1", "horses", "Horses");
        index.add("636.1", "mules", "Mules");
        index.add("630", "farming", "Farming: a \"guide\"");
        index.add("510", "algebra", "Algebra");
        index.add("bad", "x", "ignored");
        assert_eq!(index.concepts(), 4);
        let files: BTreeMap<String, String> = index
            .finish("2026-01-01T00:00:00Z", 2)
            .into_iter()
            .collect();
        let root = &files["index.md"];
        let fm = parse(front_matter(root));
        assert_eq!(fm["okf_version"].as_str(), Some("0.1"));
        assert_eq!(fm["concepts"].as_u64(), Some(4));
        assert_eq!(fm["skipped"].as_u64(), Some(2));
        assert!(root.contains("- [500 Science](500-science/index.md)\n"));
        assert!(root.contains("- [600 Technology](600-technology/index.md)\n"));
        let agri = &files["600-technology/630-agriculture/index.md"];
        assert!(agri.contains("- [636 Animal husbandry](636-animal-husbandry/index.md)\n"));
        assert!(agri.contains("- [Farming: a \"guide\"](farming.md)\n"));
        parse(front_matter(agri));
        let leaf = &files["600-technology/630-agriculture/636-animal-husbandry/636-1-animal-husbandry/index.md"];
        assert!(leaf.contains("- [Horses](horses.md)\n- [Mules](mules.md)\n"));
        // Every folder on every path has an index, and every index link resolves.
        for (path, text) in &files {
            let dir = path.trim_end_matches(INDEX_FILE);
            for target in text.split("](").skip(1).filter_map(|s| s.split(')').next()) {
                let full = format!("{dir}{target}");
                let known = files.contains_key(&full)
                    || ["horses.md", "mules.md", "farming.md", "algebra.md"]
                        .iter()
                        .any(|f| full.ends_with(f));
                assert!(known, "{path} links to missing {full}");
            }
        }
        assert_eq!(files.len(), 7, "{:?}", files.keys());
        let empty = IndexBuilder::new().finish("t", 0);
        assert_eq!(empty.len(), 1);
        assert_eq!(empty[0].0, "index.md");
    }
}
