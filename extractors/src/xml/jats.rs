//! JATS and its predecessor NLM (`.nxml`, or `.xml` recognized by DOCTYPE or the root's
//! `dtd-version`/`article-type`): the article title, the contributors' names, the abstract
//! and keywords from `front`; the body's sections with their titles as headings, paragraphs,
//! lists, figures' and tables' labels and captions, tables as Markdown tables; the back
//! matter (acknowledgements, appendices, notes) and the reference list as a list of
//! citations. Graphics give their alternative text. Journal metadata, identifiers,
//! affiliations, funding and permissions are skipped; of a formula given both as MathML and
//! TeX, the TeX is kept.

use super::tree::{self, Element, Renderer, Role, Rules, list_item};
use crate::markdown;
use crate::{Control, ExtractError, Extraction, Limits, Metadata};

/// Elements whose `title` is a heading.
const SECTIONS: &[&str] = &[
    "sec",
    "app",
    "app-group",
    "ack",
    "glossary",
    "abstract",
    "trans-abstract",
    "sub-article",
    "response",
    "bio",
    "notes",
    "fn-group",
];

struct Jats;

impl Rules for Jats {
    fn role(&self, element: &Element, parent: &Element) -> Role {
        let name = element.name.as_str();
        if SECTIONS.contains(&name) {
            return Role::Section;
        }
        match name {
            "title" if SECTIONS.contains(&parent.name.as_str()) => Role::Title,
            "front" | "front-stub" | "object-id" | "permissions" | "journal-meta"
            | "article-id" | "processing-meta" => Role::Skip,
            // A graphic's only text is its alternative text, which says what the image shows.
            "graphic" | "media" | "alt-text" | "long-desc" => Role::Block,
            // Of a formula in several notations, the TeX one.
            "math" if parent.name == "alternatives" && parent.child("tex-math").is_some() => {
                Role::Skip
            }
            "body"
            | "back"
            | "floats-group"
            | "p"
            | "title"
            | "caption"
            | "fig"
            | "fig-group"
            | "table-wrap"
            | "table-wrap-group"
            | "table-wrap-foot"
            | "label"
            | "disp-formula"
            | "disp-formula-group"
            | "statement"
            | "boxed-text"
            | "speech"
            | "attrib"
            | "fn"
            | "def"
            | "glossary-entry"
            | "sig-block"
            | "supplementary-material" => Role::Block,
            "list" => Role::List {
                ordered: element.attr("list-type").is_some_and(|t| {
                    t == "order" || t.starts_with("alpha") || t.starts_with("roman")
                }),
            },
            "def-list" => Role::List { ordered: false },
            "list-item" | "def-item" => Role::Item,
            "preformat" | "code" => Role::Code,
            "table" => Role::Table,
            "disp-quote" => Role::Quote,
            "verse-group" => Role::Lines,
            "ref-list" => Role::Custom,
            // Inline markup: italic, bold, xref, ext-link, sup, inline-formula...
            _ => Role::Inline,
        }
    }

    /// A reference list: its title as a heading, then one item per reference.
    fn custom(
        &self,
        renderer: &mut Renderer<'_>,
        element: &Element,
        level: usize,
        out: &mut Vec<String>,
    ) -> Result<(), ExtractError> {
        let title = element
            .child("title")
            .map(|t| renderer.text(t))
            .filter(|t| !t.is_empty())
            .unwrap_or_else(|| "References".to_string());
        renderer.push(out, markdown::heading(level + 1, &title));
        let mut items = Vec::new();
        for reference in element.elements() {
            renderer.tick()?;
            match reference.name.as_str() {
                "ref" => {
                    let text = citation(reference);
                    if !text.is_empty() {
                        items.push(list_item("- ", &[text]));
                    }
                }
                "ref-list" => {
                    if !items.is_empty() {
                        renderer.push(out, std::mem::take(&mut items).join("\n"));
                    }
                    // A nested list is flattened into its own items, not recursed into.
                    for nested in reference.children_named("ref") {
                        let text = citation(nested);
                        if !text.is_empty() {
                            items.push(list_item("- ", &[text]));
                        }
                    }
                }
                "p" => {
                    let text = renderer.text(reference);
                    renderer.push(out, text);
                }
                _ => {}
            }
        }
        renderer.push(out, items.join("\n"));
        Ok(())
    }
}

/// One reference as a line: `label. citation`. A `mixed-citation` is written with its own
/// punctuation; an `element-citation` has none, so its parts are joined with `. ` and the
/// names of a person group with `, `.
fn citation(reference: &Element) -> String {
    let label = reference.child_text("label");
    let mut parts = Vec::new();
    for child in reference.elements() {
        match child.name.as_str() {
            "label" => {}
            "element-citation" | "nlm-citation" => parts.push(element_citation(child)),
            _ => parts.push(child.text()),
        }
    }
    parts.retain(|p| !p.is_empty());
    let text = parts.join(" ");
    match label {
        Some(label) if !text.is_empty() => {
            let label = label.trim_end_matches('.');
            format!("{label}. {text}")
        }
        _ => text,
    }
}

fn element_citation(citation: &Element) -> String {
    let mut parts = Vec::new();
    for child in citation.elements() {
        let part = match child.name.as_str() {
            "person-group" => child
                .elements()
                .map(|person| match person.name.as_str() {
                    "name" => cited_name(person),
                    "etal" => "et al.".to_string(),
                    _ => person.text(),
                })
                .filter(|n| !n.is_empty())
                .collect::<Vec<_>>()
                .join(", "),
            "name" => cited_name(child),
            "etal" => "et al.".to_string(),
            _ => child.text(),
        };
        if !part.is_empty() {
            parts.push(part.trim_end_matches('.').to_string());
        }
    }
    let mut text = parts.join(". ");
    if !text.is_empty() {
        text.push('.');
    }
    text
}

/// `surname given-names`, as reference lists write names.
fn cited_name(name: &Element) -> String {
    name.joined_parts(&["surname", "given-names", "suffix"])
        .unwrap_or_else(|| name.text())
}

/// `given-names surname`, as bylines write names, or the element's text.
fn name(name: &Element) -> String {
    name.joined_parts(&["prefix", "given-names", "surname", "suffix"])
        .unwrap_or_else(|| name.text())
}

pub(super) fn render(
    root: &Element,
    limits: &Limits,
    control: &Control,
) -> Result<Extraction, ExtractError> {
    tree::render(&Jats, limits, control, |renderer, out| {
        let meta = root.child("front").and_then(|f| f.child("article-meta"));
        let title = meta
            .and_then(|m| m.child("title-group"))
            .and_then(|g| g.child("article-title"))
            .map(|t| renderer.text(t))
            .filter(|t| !t.is_empty());
        let authors = meta.map(contributors).unwrap_or_default();
        if let Some(title) = &title {
            renderer.push(out, markdown::heading(1, title));
        }
        if let Some(subtitle) = meta
            .and_then(|m| m.child("title-group"))
            .and_then(|g| g.child("subtitle"))
        {
            let text = renderer.text(subtitle);
            renderer.push(out, text);
        }
        if !authors.is_empty() {
            renderer.push(out, authors.join(", "));
        }
        if let Some(meta) = meta {
            for abstract_ in meta.children_named("abstract") {
                renderer.tick()?;
                // Abstracts for tables of contents or teasers repeat the main one.
                if abstract_
                    .attr("abstract-type")
                    .is_some_and(|t| t == "toc" || t == "teaser")
                {
                    continue;
                }
                if abstract_.child("title").is_none() {
                    renderer.push(out, markdown::heading(2, "Abstract"));
                }
                renderer.block(abstract_, Role::Section, 1, out)?;
            }
            for group in meta.children_named("kwd-group") {
                let keywords: Vec<String> = group
                    .children_named("kwd")
                    .map(|k| renderer.text(k))
                    .filter(|k| !k.is_empty())
                    .collect();
                if !keywords.is_empty() {
                    renderer.push(out, format!("Keywords: {}", keywords.join(", ")));
                }
            }
        }
        renderer.blocks(root, 1, out)?;
        Ok(Metadata {
            title,
            author: tree::byline(&authors),
            language: root.attr("lang").map(str::to_string),
            ..Metadata::default()
        })
    })
}

/// The names of the article's contributors (authors first if the file says which are).
fn contributors(meta: &Element) -> Vec<String> {
    let mut names = Vec::new();
    for group in meta.children_named("contrib-group") {
        for contrib in group.children_named("contrib") {
            let is_author = contrib.attr("contrib-type").is_none_or(|t| t == "author");
            if !is_author {
                continue;
            }
            let person = contrib.elements().find(|e| {
                matches!(
                    e.name.as_str(),
                    "name" | "string-name" | "collab" | "name-alternatives"
                )
            });
            let text = match person {
                Some(p) if p.name == "name" => name(p),
                Some(p) if p.name == "name-alternatives" => {
                    p.child("name").map(name).unwrap_or_else(|| p.text())
                }
                Some(p) => p.text(),
                None => String::new(),
            };
            if !text.is_empty() {
                names.push(text);
            }
        }
    }
    names
}
