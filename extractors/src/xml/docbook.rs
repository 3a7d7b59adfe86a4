//! DocBook 4 and 5 (`.dbk`, or `.xml` recognized by namespace or DOCTYPE): the title (in
//! `info`, `bookinfo`, `articleinfo` or the element itself), chapters, sections (`sect1` to
//! `sect5`, `section`, `simplesect`, ...) with their titles as headings, paragraphs, lists,
//! program listings as fenced code, simple tables as Markdown tables, admonitions and block
//! quotes as quotes. Index terms, remarks and image data are skipped; the authors of the
//! root's info go to the metadata.

use super::tree::{self, Element, Role, Rules};
use crate::{Control, ExtractError, Extraction, Limits, Metadata};

/// Elements whose `title` is a heading.
const SECTIONS: &[&str] = &[
    "set",
    "book",
    "article",
    "part",
    "chapter",
    "appendix",
    "preface",
    "reference",
    "refentry",
    "refsection",
    "refsect1",
    "refsect2",
    "refsect3",
    "refsynopsisdiv",
    "section",
    "sect1",
    "sect2",
    "sect3",
    "sect4",
    "sect5",
    "simplesect",
    "glossary",
    "bibliography",
    "index",
    "colophon",
    "dedication",
    "acknowledgements",
    "partintro",
    "topic",
];

/// The metadata containers of DocBook 4 (`bookinfo`...) and 5 (`info`).
fn is_info(name: &str) -> bool {
    name == "info" || name.ends_with("info") && name != "refmiscinfo"
}

struct DocBook;

impl Rules for DocBook {
    fn role(&self, element: &Element, parent: &Element) -> Role {
        let name = element.name.as_str();
        if is_info(&parent.name) {
            // Of the metadata, only the title, subtitle and abstract are text.
            return match name {
                "title" => Role::Title,
                "subtitle" | "abstract" => Role::Block,
                _ => Role::Skip,
            };
        }
        if SECTIONS.contains(&name) {
            return Role::Section;
        }
        match name {
            _ if is_info(name) => Role::Block,
            "title" if SECTIONS.contains(&parent.name.as_str()) => Role::Title,
            "titleabbrev" | "indexterm" | "remark" | "imagedata" | "imageobject"
            | "videoobject" | "audioobject" | "colspec" | "spanspec" | "anchor" | "toc" | "lot"
            | "refmeta" | "refmiscinfo" => Role::Skip,
            "title" | "subtitle" | "para" | "simpara" | "formalpara" | "abstract" | "example"
            | "informalexample" | "figure" | "informalfigure" | "mediaobject" | "textobject"
            | "caption" | "sidebar" | "attribution" | "address" | "literallayout" | "equation"
            | "informalequation" | "qandaset" | "qandadiv" | "qandaentry" | "question"
            | "answer" | "glossentry" | "glossdef" | "bibliodiv" | "bibliomixed"
            | "biblioentry" | "refnamediv" | "refpurpose" | "msgset" | "task" | "tasksummary"
            | "bridgehead" | "revhistory" | "legalnotice" | "entry" => Role::Block,
            "itemizedlist" | "variablelist" | "simplelist" | "segmentedlist" | "calloutlist"
            | "glosslist" => Role::List { ordered: false },
            "orderedlist" | "procedure" | "substeps" | "stepalternatives" => {
                Role::List { ordered: true }
            }
            "listitem" | "member" | "varlistentry" | "step" | "callout" | "seglistitem" => {
                Role::Item
            }
            "programlisting" | "screen" | "synopsis" | "programlistingco" | "screenco"
            | "funcsynopsisinfo" | "classsynopsisinfo" => Role::Code,
            "table" | "informaltable" => Role::Table,
            "blockquote" | "epigraph" | "note" | "tip" | "warning" | "caution" | "important"
            | "danger" => Role::Quote,
            // Inline markup: emphasis, literal, code, command, link, xref, footnote...
            _ => Role::Inline,
        }
    }
}

pub(super) fn render(
    root: &Element,
    limits: &Limits,
    control: &Control,
) -> Result<Extraction, ExtractError> {
    tree::render(&DocBook, limits, control, |renderer, out| {
        let info = root.elements().find(|e| is_info(&e.name));
        let title = root
            .child("title")
            .or_else(|| info.and_then(|i| i.child("title")))
            .map(|t| renderer.text(t))
            .filter(|t| !t.is_empty());
        let authors = info.map(authors).unwrap_or_default();
        // The root is a section of level 1: its title is `#`, its chapters `##`.
        if SECTIONS.contains(&root.name.as_str()) {
            renderer.blocks(root, 1, out)?;
        } else {
            renderer.block(root, DocBook.role(root, root), 1, out)?;
        }
        Ok(Metadata {
            title,
            author: tree::byline(&authors),
            language: root.attr("lang").map(str::to_string),
            ..Metadata::default()
        })
    })
}

/// The names of an info element's authors (and of its `authorgroup`).
fn authors(info: &Element) -> Vec<String> {
    let mut names = Vec::new();
    for element in info.elements() {
        match element.name.as_str() {
            "author" | "editor" => names.push(person(element)),
            "authorgroup" => names.extend(
                element
                    .elements()
                    .filter(|e| matches!(e.name.as_str(), "author" | "editor"))
                    .map(person),
            ),
            _ => {}
        }
    }
    names.retain(|n| !n.is_empty());
    names
}

/// `firstname surname` (DocBook 4 puts them in the author, 5 in `personname`), or the text of
/// a `personname` or `orgname`.
fn person(author: &Element) -> String {
    let holder = author.child("personname").unwrap_or(author);
    if let Some(name) = holder.joined_parts(&[
        "honorific",
        "firstname",
        "givenname",
        "othername",
        "surname",
    ]) {
        return name;
    }
    if let Some(personname) = author.child("personname") {
        return personname.text();
    }
    author
        .child("orgname")
        .map(Element::text)
        .unwrap_or_default()
}
