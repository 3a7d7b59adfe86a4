//! Parses `pdftotext -raw -bbox` output: per page, the words in content-stream order with
//! their boxes, and the document's title and author from the head.

use crate::{Control, ExtractError, Metadata};

/// One chunk of box output: what each page became, and the document's metadata.
#[derive(Debug)]
pub(super) struct Chunk<P> {
    pub pages: Vec<P>,
    pub metadata: Metadata,
}

#[derive(Debug, Clone, PartialEq)]
pub(super) struct Word {
    pub bounds: WordBox,
    pub text: String,
}

/// A word's box from `pdftotext -bbox`: x and y grow right and down.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct WordBox {
    pub x_min: f64,
    pub y_min: f64,
    pub x_max: f64,
    pub y_max: f64,
}

impl WordBox {
    /// The box's height, at least one point (about the font size).
    pub fn height(&self) -> f64 {
        (self.y_max - self.y_min).max(1.0)
    }
}

/// Reads the box output line by line and hands each page's words to `page` as soon as the
/// page ends, so that only one page's words are held at a time.
pub(super) fn parse<P>(
    html: &str,
    control: &Control,
    mut page: impl FnMut(Vec<Word>) -> P,
) -> Result<Chunk<P>, ExtractError> {
    let mut pages = Vec::new();
    let mut metadata = Metadata::default();
    let mut current: Option<Vec<Word>> = None;
    let mut in_head = true;
    for (index, line) in html.lines().enumerate() {
        if index % 4096 == 0 {
            control.check()?;
        }
        let line = line.trim_start();
        if line.starts_with("<page ") {
            in_head = false;
            if let Some(words) = current.take() {
                pages.push(page(words));
            }
            current = Some(Vec::new());
        } else if line.starts_with("</page>") {
            if let Some(words) = current.take() {
                pages.push(page(words));
            }
        } else if line.starts_with("<word ") {
            if let (Some(words), Some(word)) = (current.as_mut(), parse_word(line)) {
                words.push(word);
            }
        } else if in_head {
            if let Some(title) = line
                .strip_prefix("<title>")
                .and_then(|rest| rest.strip_suffix("</title>"))
            {
                metadata.title = Some(unescape(title));
            } else if line.starts_with("<meta name=\"Author\"") {
                metadata.author = attribute(line, "content").map(unescape);
            }
        }
    }
    if let Some(words) = current.take() {
        pages.push(page(words));
    }
    Ok(Chunk { pages, metadata })
}

fn attribute<'a>(line: &'a str, name: &str) -> Option<&'a str> {
    let start = line.find(&format!(" {name}=\""))? + name.len() + 3;
    let rest = line.get(start..)?;
    rest.get(..rest.find('"')?)
}

fn parse_word(line: &str) -> Option<Word> {
    let number = |name: &str| -> Option<f64> { attribute(line, name)?.parse().ok() };
    let text = line.get(line.find('>')? + 1..line.rfind("</word>")?)?;
    Some(Word {
        bounds: WordBox {
            x_min: number("xMin")?,
            y_min: number("yMin")?,
            x_max: number("xMax")?,
            y_max: number("yMax")?,
        },
        text: unescape(text),
    })
}

/// pdftotext escapes the five XML characters in its box output.
fn unescape(text: &str) -> String {
    if !text.contains('&') {
        return text.to_string();
    }
    text.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&apos;", "'")
        .replace("&#39;", "'")
        .replace("&amp;", "&")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_words_and_metadata_are_read() {
        let html = r#"<html><head>
<title>A &amp; B</title>
<meta name="Author" content="Ann &lt;a&gt;"/>
</head><body><doc>
<page width="612" height="792">
<word xMin="72" yMin="70" xMax="100" yMax="82">x&amp;y</word>
<word xMin="72" yMin="bad" xMax="100" yMax="102">broken</word>
</page>
<page width="612" height="792">
</page>
</doc></body></html>"#;
        let chunk = parse(html, &Control::default(), |words| words).unwrap();
        assert_eq!(chunk.pages.len(), 2);
        assert_eq!(chunk.pages[0].len(), 1);
        assert_eq!(chunk.pages[0][0].text, "x&y");
        assert!(chunk.pages[1].is_empty());
        assert_eq!(chunk.metadata.title.as_deref(), Some("A & B"));
        assert_eq!(chunk.metadata.author.as_deref(), Some("Ann <a>"));
    }
}
