//! Email messages (`.eml`, RFC 5322 with MIME) to Markdown, through Stalwart's `mail-parser`:
//! the subject as a heading, a header block (From, To, Cc, Date, Subject), the body (the
//! text/plain parts, or the HTML parts through [`crate::html`] when there is no plain text),
//! then the attachments listed by name, media type and size. Text attachments and attached
//! messages (`message/rfc822`) are extracted inline as subsections; other attachments (PDF,
//! images, office files) are listed only.
//!
//! `mail-parser` decodes encoded words, charsets, quoted-printable and base64. It builds
//! messages attached with a transfer encoding recursively (copying each level), so a message
//! nested thousands of levels deep inside base64 would exhaust a thread's stack: the nesting a
//! file can declare is bounded before parsing ([`nesting_bound`]), and the parse runs on a
//! thread of its own with a stack sized for that bound.

use mail_parser::{
    Address, HeaderName, Message, MessageParser, MessagePart, MimeHeaders, PartType,
};

use crate::markdown::{collapse_whitespace, heading, push_block};
use crate::{Control, ExtractError, Extraction, Input, Limits, Metadata};

/// Attached messages extracted inline, nested; deeper ones are listed only.
const MAX_INLINE_DEPTH: usize = 4;
/// Message and digest declarations (visible or inside encoded parts) a file may hold. Each
/// level of nesting costs `mail-parser` up to ~5 KB of stack (unoptimized builds).
const MAX_MESSAGE_DECLARATIONS: usize = 4096;
/// The parse thread's stack: room for [`MAX_MESSAGE_DECLARATIONS`] levels with a margin.
/// Only the pages a parse touches are ever resident.
const PARSE_STACK_BYTES: usize = 64 * 1024 * 1024;
/// Transfer-encoded levels `mail-parser` decodes and parses (its `MAX_NESTED_ENCODED`).
const MAX_ENCODED_LEVELS: usize = 3;
/// Media types of attachments whose text is extracted inline.
const INLINE_TEXT_TYPES: &[&str] = &["text/plain", "text/markdown", "text/x-markdown", "text/csv"];
const INLINE_HTML_TYPES: &[&str] = &["text/html", "application/xhtml+xml"];

pub fn extract(
    input: Input<'_>,
    limits: &Limits,
    control: &Control,
) -> Result<Extraction, ExtractError> {
    let bound = nesting_bound(input.bytes, 0);
    if bound > MAX_MESSAGE_DECLARATIONS {
        return Err(ExtractError::too_complex(format!(
            "the message declares more than {MAX_MESSAGE_DECLARATIONS} attached or nested \
             messages"
        )));
    }
    let bytes = input.bytes;
    std::thread::scope(|scope| {
        let worker = std::thread::Builder::new()
            .name("shelf-email".into())
            .stack_size(PARSE_STACK_BYTES)
            .spawn_scoped(scope, || extract_on_this_thread(bytes, limits, control))
            .map_err(|e| ExtractError::io(format!("could not start the email parser: {e}")))?;
        worker
            .join()
            .unwrap_or_else(|_| Err(ExtractError::crashed()))
    })
}

fn extract_on_this_thread(
    bytes: &[u8],
    limits: &Limits,
    control: &Control,
) -> Result<Extraction, ExtractError> {
    control.check()?;
    let message = parse(bytes)?;
    control.check()?;
    let result = render_top(&message, limits, control);
    teardown(message);
    result
}

/// Parses a message, refusing input that has no header `mail-parser` knows (it reads any
/// bytes as some message; a file of garbage names no From, Subject, Date, ...).
pub fn parse(bytes: &[u8]) -> Result<Message<'_>, ExtractError> {
    let message = MessageParser::default()
        .parse(bytes)
        .ok_or_else(|| ExtractError::malformed("no message headers found"))?;
    let known = message
        .root_part()
        .headers()
        .iter()
        .any(|h| !matches!(h.name, HeaderName::Other(_)));
    if !known {
        teardown(message);
        return Err(ExtractError::malformed(
            "not an email message: no standard header (From, To, Subject, Date, ...) found",
        ));
    }
    Ok(message)
}

fn render_top(
    message: &Message<'_>,
    limits: &Limits,
    control: &Control,
) -> Result<Extraction, ExtractError> {
    let mut writer = Writer {
        output: Output::new(limits.max_output_chars),
        limits,
        control,
    };
    writer.message(message, 1, 0)?;
    let subject = message.subject().map(clean_line).filter(|s| !s.is_empty());
    let author = message.from().and_then(first_person);
    Ok(writer.output.finish(Metadata {
        title: subject,
        author,
        ..Metadata::default()
    }))
}

struct Writer<'a> {
    output: Output,
    limits: &'a Limits,
    control: &'a Control,
}

/// A message's Markdown as it is written, by this reader and by Outlook's (`msg`): blocks
/// cut at the output limit, the warnings, and whether any body text was written.
pub(crate) struct Output {
    out: String,
    max: usize,
    /// The output reached `max`: nothing more is written.
    pub full: bool,
    /// Some body or attachment text was written (headers alone do not count).
    pub has_text: bool,
    pub warnings: Vec<String>,
}

impl Output {
    pub fn new(max: usize) -> Self {
        Output {
            out: String::new(),
            max,
            full: false,
            has_text: false,
            warnings: Vec::new(),
        }
    }

    pub fn push(&mut self, block: &str) {
        if self.full || block.trim().is_empty() {
            return;
        }
        let room = self.max.saturating_sub(self.out.len() + 2);
        if block.len() > room {
            let mut cut = room;
            while !block.is_char_boundary(cut) {
                cut -= 1;
            }
            push_block(&mut self.out, block.get(..cut).unwrap_or_default());
            self.full = true;
            return;
        }
        push_block(&mut self.out, block);
    }

    /// The extraction of the message whose title (subject) and author are `metadata`.
    pub fn finish(mut self, metadata: Metadata) -> Extraction {
        if !self.has_text && metadata.title.is_none() {
            // Headers and attachment names alone are not a document's text: the extract stage
            // answers `no_text_found`.
            self.out.clear();
        }
        if self.full {
            self.warnings.push(format!(
                "the message was cut short at {} characters of Markdown",
                self.max
            ));
        }
        Extraction {
            markdown: self.out,
            metadata,
            warnings: self.warnings,
            ..Extraction::default()
        }
    }
}

/// A message's header block: a `- **Label:** value` line for each header that has a value.
pub(crate) fn header_block(headers: &[(&str, Option<&str>)]) -> String {
    headers
        .iter()
        .filter_map(|(label, value)| value.map(|value| format!("- **{label}:** {value}")))
        .collect::<Vec<_>>()
        .join("\n")
}

impl Writer<'_> {
    /// Writes one message: heading, header block, body, attachments. `level` is the heading
    /// level of its subject, `depth` how many messages enclose it.
    fn message(
        &mut self,
        message: &Message<'_>,
        level: usize,
        depth: usize,
    ) -> Result<(), ExtractError> {
        self.control.check()?;
        let subject = message.subject().map(clean_line).unwrap_or_default();
        if !subject.is_empty() {
            self.output.push(&heading(level, &subject));
        }
        let address = |a: Option<&Address<'_>>| a.map(format_address).filter(|t| !t.is_empty());
        let date = match message.date() {
            Some(date) => Some(date.to_rfc822()),
            None => message.header_raw(HeaderName::Date).map(clean_line),
        };
        self.output.push(&header_block(&[
            ("From", address(message.from()).as_deref()),
            ("To", address(message.to()).as_deref()),
            ("Cc", address(message.cc()).as_deref()),
            ("Date", date.as_deref()),
            ("Subject", Some(subject.as_str()).filter(|s| !s.is_empty())),
        ]));

        let body = self.body(message)?;
        if !body.trim().is_empty() {
            self.output.has_text = true;
            self.output.push(&body);
        }
        self.attachments(message, level, depth)
    }

    /// The text/plain body parts; the HTML ones (converted) when there is no plain text.
    fn body(&mut self, message: &Message<'_>) -> Result<String, ExtractError> {
        let mut out = String::new();
        for &id in &message.text_body {
            self.control.check()?;
            let Some(part) = message.parts.get(id as usize) else {
                continue;
            };
            match &part.body {
                PartType::Text(text) => push_block(&mut out, &plain_text(text)),
                PartType::Html(html) => push_block(&mut out, &self.html(html)?),
                _ => {}
            }
        }
        Ok(out)
    }

    fn html(&mut self, html: &str) -> Result<String, ExtractError> {
        let extraction = crate::html::to_markdown(html, self.limits, self.control)?;
        self.output.warnings.extend(extraction.warnings);
        Ok(extraction.markdown)
    }

    fn attachments(
        &mut self,
        message: &Message<'_>,
        level: usize,
        depth: usize,
    ) -> Result<(), ExtractError> {
        let listed: Vec<&MessagePart<'_>> = message
            .attachments
            .iter()
            .filter(|id| !message.text_body.contains(id))
            .filter_map(|&id| message.parts.get(id as usize))
            .collect();
        if listed.is_empty() {
            return Ok(());
        }
        self.output.push(&heading(level + 1, "Attachments"));
        let lines: Vec<String> = listed
            .iter()
            .enumerate()
            .map(|(i, part)| {
                attachment_line(
                    &attachment_name(part, i),
                    &media_type(part),
                    part_size(part),
                )
            })
            .collect();
        self.output.push(&lines.join("\n"));
        for (i, part) in listed.iter().enumerate() {
            self.control.check()?;
            if self.output.full {
                break;
            }
            let name = attachment_name(part, i);
            let media = media_type(part);
            match &part.body {
                PartType::Message(inner) => {
                    if depth + 1 >= MAX_INLINE_DEPTH {
                        self.output.warnings.push(format!(
                            "attached message {name} nests deeper than {MAX_INLINE_DEPTH} \
                             levels: listed, not extracted"
                        ));
                        continue;
                    }
                    self.output
                        .push(&heading(level + 1, &format!("Attached message: {name}")));
                    self.message(inner, (level + 2).min(6), depth + 1)?;
                }
                PartType::Text(text) | PartType::Html(text)
                    if INLINE_TEXT_TYPES.contains(&media.as_str()) =>
                {
                    self.inline_attachment(level, &name, &plain_text(text));
                }
                PartType::Text(text) | PartType::Html(text)
                    if INLINE_HTML_TYPES.contains(&media.as_str()) =>
                {
                    let markdown = self.html(text)?;
                    self.inline_attachment(level, &name, &markdown);
                }
                PartType::Binary(bytes) | PartType::InlineBinary(bytes)
                    if INLINE_TEXT_TYPES.contains(&media.as_str()) =>
                {
                    if let Ok(decoded) = crate::plain::decode(bytes) {
                        self.inline_attachment(level, &name, &decoded.text);
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }

    fn inline_attachment(&mut self, level: usize, name: &str, text: &str) {
        if text.trim().is_empty() {
            return;
        }
        self.output.has_text = true;
        self.output
            .push(&heading(level + 1, &format!("Attachment: {name}")));
        self.output.push(text);
    }
}

/// Plain text as Markdown: kept as it is, line endings normalized by the final tidy pass.
fn plain_text(text: &str) -> String {
    text.trim_start_matches('\u{feff}').replace("\r\n", "\n")
}

/// A header value on one line (folded headers unfolded, control characters dropped).
fn clean_line(text: &str) -> String {
    collapse_whitespace(&text.replace(|c: char| c.is_control(), " "))
}

fn format_address(address: &Address<'_>) -> String {
    let people: Vec<String> = match address {
        Address::List(list) => list.iter().map(format_addr).collect(),
        Address::Group(groups) => groups
            .iter()
            .map(|g| {
                let members: Vec<String> = g.addresses.iter().map(format_addr).collect();
                match g.name.as_deref().map(clean_line) {
                    Some(name) if !name.is_empty() => {
                        format!("{name}: {}", members.join(", "))
                    }
                    _ => members.join(", "),
                }
            })
            .collect(),
    };
    people
        .into_iter()
        .filter(|p| !p.is_empty())
        .collect::<Vec<_>>()
        .join(", ")
}

fn format_addr(addr: &mail_parser::Addr<'_>) -> String {
    let name = addr.name.as_deref().map(clean_line).unwrap_or_default();
    let email = addr.address.as_deref().map(clean_line).unwrap_or_default();
    match (name.is_empty(), email.is_empty()) {
        (false, false) if name != email => format!("{name} <{email}>"),
        (false, _) => name,
        (true, false) => email,
        (true, true) => String::new(),
    }
}

/// The author: the first sender's name, else their address.
fn first_person(address: &Address<'_>) -> Option<String> {
    let first = address.first()?;
    first
        .name
        .as_deref()
        .map(clean_line)
        .filter(|n| !n.is_empty())
        .or_else(|| first.address.as_deref().map(clean_line))
        .filter(|n| !n.is_empty())
}

fn attachment_name(part: &MessagePart<'_>, index: usize) -> String {
    if let Some(name) = part
        .attachment_name()
        .map(clean_line)
        .filter(|n| !n.is_empty())
    {
        return name;
    }
    if let PartType::Message(inner) = &part.body
        && let Some(subject) = inner.subject().map(clean_line).filter(|s| !s.is_empty())
    {
        return subject;
    }
    format!("attachment {}", index + 1)
}

/// The part's media type, lowercase (`type/subtype`), from its Content-Type or its kind.
fn media_type(part: &MessagePart<'_>) -> String {
    if let Some(ct) = part.content_type() {
        let main = ct.ctype().trim().to_ascii_lowercase();
        return match ct.subtype() {
            Some(sub) => format!("{main}/{}", sub.trim().to_ascii_lowercase()),
            None => main,
        };
    }
    match part.body {
        PartType::Message(_) => "message/rfc822",
        PartType::Html(_) => "text/html",
        PartType::Text(_) => "text/plain",
        _ => "application/octet-stream",
    }
    .to_string()
}

fn part_size(part: &MessagePart<'_>) -> usize {
    match &part.body {
        // A nested message keeps the whole enclosing message as its raw bytes: its own size
        // is its span in the file.
        PartType::Message(_) => {
            (part.raw_end_offset().saturating_sub(part.raw_body_offset())) as usize
        }
        _ => part.len(),
    }
}

/// `1.5 MB`, `12 KB`, `300 bytes`.
pub(crate) fn human_size(bytes: usize) -> String {
    const KB: f64 = 1024.0;
    let b = bytes as f64;
    if b >= KB * KB * KB {
        format!("{:.1} GB", b / (KB * KB * KB))
    } else if b >= KB * KB {
        format!("{:.1} MB", b / (KB * KB))
    } else if b >= KB {
        format!("{:.1} KB", b / KB)
    } else if bytes == 1 {
        "1 byte".to_string()
    } else {
        format!("{bytes} bytes")
    }
}

/// Drops a parsed message without recursion: nested messages are taken out level by level,
/// so a deeply nested file cannot exhaust the stack when it is freed.
fn teardown(message: Message<'_>) {
    let mut pending = vec![message];
    while let Some(mut message) = pending.pop() {
        for part in &mut message.parts {
            if matches!(part.body, PartType::Message(_))
                && let PartType::Message(inner) = std::mem::take(&mut part.body)
            {
                pending.push(inner);
            }
        }
    }
}

/// An upper bound on how deeply `mail-parser` nests messages recursively in this file. It
/// nests the messages of the file's own MIME structure iteratively (freed by [`teardown`]),
/// but parses a transfer-encoded `message/*` part by recursion: what matters are the
/// Content-Type declarations of `message/*` and `multipart/digest` (whose parts are messages)
/// inside base64 bodies and quoted-printable text, down to the encoded levels it decodes. It
/// overcounts (siblings count as levels; quoted-printable text is read from its first body to
/// the end of the file); it never undercounts.
fn nesting_bound(bytes: &[u8], level: usize) -> usize {
    if level >= MAX_ENCODED_LEVELS {
        return 0;
    }
    let mut total = 0usize;
    let mut decoded_regions = Vec::new();
    for body in base64_bodies(bytes) {
        decoded_regions.push(decode_base64(body));
    }
    if let Some(start) = first_quoted_printable_body(bytes) {
        decoded_regions.push(decode_quoted_printable(
            bytes.get(start..).unwrap_or_default(),
        ));
    }
    for decoded in decoded_regions {
        total = total
            .saturating_add(declarations(&decoded))
            .saturating_add(nesting_bound(&decoded, level + 1));
        if total > MAX_MESSAGE_DECLARATIONS {
            break;
        }
    }
    total
}

fn lines(bytes: &[u8]) -> impl Iterator<Item = (usize, &[u8])> {
    let mut at = 0;
    std::iter::from_fn(move || {
        if at >= bytes.len() {
            return None;
        }
        let start = at;
        let rest = bytes.get(start..)?;
        let end = rest
            .iter()
            .position(|&b| b == b'\n')
            .map_or(bytes.len(), |p| start + p + 1);
        at = end;
        Some((start, bytes.get(start..end).unwrap_or_default()))
    })
}

/// The value of a header line named `name` (case-insensitive), if the line is one.
fn header_value<'a>(line: &'a [u8], name: &[u8]) -> Option<&'a [u8]> {
    let head = line.get(..name.len())?;
    if !head.eq_ignore_ascii_case(name) {
        return None;
    }
    let rest = line.get(name.len()..)?;
    let colon = rest.iter().position(|&b| b == b':')?;
    if rest.get(..colon)?.iter().any(|b| !b.is_ascii_whitespace()) {
        return None;
    }
    rest.get(colon + 1..)
}

/// Content-Type headers declaring a message or a digest (continuation lines included).
fn declarations(bytes: &[u8]) -> usize {
    let mut count = 0;
    let mut iter = lines(bytes).peekable();
    while let Some((_, line)) = iter.next() {
        let Some(value) = header_value(line, b"content-type") else {
            continue;
        };
        let mut value = value.to_ascii_lowercase();
        while let Some((_, next)) = iter.peek() {
            if matches!(next.first(), Some(b' ' | b'\t')) {
                value.extend(next.to_ascii_lowercase());
                iter.next();
            } else {
                break;
            }
        }
        let value: Vec<u8> = value
            .into_iter()
            .filter(|b| !b.is_ascii_whitespace())
            .collect();
        let value = strip_comments(&value);
        if value.starts_with(b"message") || value.windows(6).any(|w| w == b"digest") {
            count += 1;
        }
    }
    count
}

fn strip_comments(value: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(value.len());
    let mut depth = 0usize;
    for &b in value {
        match b {
            b'(' => depth += 1,
            b')' => depth = depth.saturating_sub(1),
            _ if depth == 0 => out.push(b),
            _ => {}
        }
    }
    out
}

/// Bodies of parts whose headers say base64: from the blank line after the
/// Content-Transfer-Encoding header to the first byte that cannot be base64.
fn base64_bodies(bytes: &[u8]) -> Vec<&[u8]> {
    let mut bodies = Vec::new();
    let mut skip_until = 0;
    let mut in_headers = false;
    for (start, line) in lines(bytes) {
        if start < skip_until {
            continue;
        }
        if let Some(value) = header_value(line, b"content-transfer-encoding") {
            in_headers = encoding_is(value, b"base64");
            continue;
        }
        if in_headers && line.iter().all(u8::is_ascii_whitespace) {
            in_headers = false;
            let body_start = start + line.len();
            let rest = bytes.get(body_start..).unwrap_or_default();
            let len = rest
                .iter()
                .position(|&b| !(b.is_ascii_alphanumeric() || b"+/= \t\r\n".contains(&b)))
                .unwrap_or(rest.len());
            bodies.push(rest.get(..len).unwrap_or_default());
            skip_until = body_start + len;
        }
    }
    bodies
}

/// Where the body of the first part whose headers say quoted-printable starts.
fn first_quoted_printable_body(bytes: &[u8]) -> Option<usize> {
    let mut in_headers = false;
    for (start, line) in lines(bytes) {
        if let Some(value) = header_value(line, b"content-transfer-encoding") {
            in_headers = encoding_is(value, b"quoted-printable");
            continue;
        }
        if in_headers && line.iter().all(u8::is_ascii_whitespace) {
            return Some(start + line.len());
        }
    }
    None
}

fn encoding_is(value: &[u8], name: &[u8]) -> bool {
    strip_comments(&value.to_ascii_lowercase())
        .windows(name.len())
        .any(|w| w == name)
}

/// Base64 as `mail-parser` reads it: whitespace skipped, `=` ends a group and decoding goes on.
fn decode_base64(text: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len() / 4 * 3);
    let mut chunk = 0u32;
    let mut count = 0u8;
    let flush = |out: &mut Vec<u8>, chunk: u32, count: u8| match count {
        2 => out.push((chunk >> 4) as u8),
        3 => out.extend_from_slice(&[(chunk >> 10) as u8, (chunk >> 2) as u8]),
        _ => {}
    };
    for &b in text {
        let value = match b {
            b'A'..=b'Z' => b - b'A',
            b'a'..=b'z' => b - b'a' + 26,
            b'0'..=b'9' => b - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            b'=' => {
                flush(&mut out, chunk, count);
                count = 0;
                continue;
            }
            _ => continue,
        };
        chunk = (chunk << 6) | u32::from(value);
        count = (count + 1) & 3;
        if count == 0 {
            out.extend_from_slice(chunk.to_be_bytes().get(1..).unwrap_or_default());
        }
    }
    flush(&mut out, chunk, count);
    out
}

/// Quoted-printable, leniently: `=XX` becomes the byte, `=` at a line end joins the lines.
fn decode_quoted_printable(text: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len());
    let mut i = 0;
    while let Some(&b) = text.get(i) {
        if b == b'=' {
            match (text.get(i + 1), text.get(i + 2)) {
                (Some(b'\n'), _) => {
                    i += 2;
                    continue;
                }
                (Some(b'\r'), Some(b'\n')) => {
                    i += 3;
                    continue;
                }
                (Some(&h), Some(&l)) if h.is_ascii_hexdigit() && l.is_ascii_hexdigit() => {
                    let hex = |c: u8| (c as char).to_digit(16).unwrap_or(0) as u8;
                    out.push(hex(h) << 4 | hex(l));
                    i += 3;
                    continue;
                }
                _ => {}
            }
        }
        out.push(b);
        i += 1;
    }
    out
}

/// One line of an "Attachments" list (`msg` lists its attachments the same way).
pub(crate) fn attachment_line(name: &str, media: &str, size: usize) -> String {
    format!("- {} ({media}, {})", clean_line(name), human_size(size))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{assert_in_order, mutate, never_panics, run};
    use proptest::prelude::*;

    fn eml(text: &str) -> Result<Extraction, ExtractError> {
        run(extract, text.as_bytes(), "eml")
    }

    fn b64(bytes: &[u8]) -> String {
        const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        let mut out = String::new();
        for chunk in bytes.chunks(3) {
            let n = chunk
                .iter()
                .enumerate()
                .fold(0u32, |n, (i, &b)| n | u32::from(b) << (16 - 8 * i));
            for i in 0..4 {
                if i <= chunk.len() {
                    out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
                } else {
                    out.push('=');
                }
            }
            if out.len() % 77 == 76 {
                out.push_str("\r\n");
            }
        }
        out
    }

    const ALTERNATIVE: &str = "From: =?ISO-8859-1?Q?Ren=E9_Dupont?= <rene@example.org>\r\n\
To: Alice Example <alice@example.com>, bob@example.com\r\n\
Cc: \"Carol, C.\" <carol@example.net>\r\n\
Date: Tue, 2 Jan 2024 10:30:00 +0100\r\n\
Subject: =?UTF-8?B?UsOpc3Vtw6kgZHUgcHJvamV0?= and more\r\n\
MIME-Version: 1.0\r\n\
Content-Type: multipart/alternative; boundary=\"alt\"\r\n\
\r\n\
--alt\r\n\
Content-Type: text/plain; charset=utf-8\r\n\
Content-Transfer-Encoding: quoted-printable\r\n\
\r\n\
Le caf=C3=A9 est pr=C3=AAt. This line is soft =\r\n\
wrapped.\r\n\
\r\n\
Second paragraph.\r\n\
--alt\r\n\
Content-Type: text/html; charset=utf-8\r\n\
\r\n\
<p>HTML VERSION SHOULD NOT APPEAR</p>\r\n\
--alt--\r\n";

    #[test]
    fn headers_and_quoted_printable_plain_body() {
        let extraction = eml(ALTERNATIVE).unwrap();
        let md = &extraction.markdown;
        assert_in_order(
            md,
            &[
                "# Résumé du projet and more",
                "- **From:** René Dupont <rene@example.org>",
                "- **To:** Alice Example <alice@example.com>, bob@example.com",
                "- **Cc:** Carol, C. <carol@example.net>",
                "- **Date:** Tue, 2 Jan 2024 10:30:00 +0100",
                "- **Subject:** Résumé du projet and more",
                "Le café est prêt. This line is soft wrapped.",
                "Second paragraph.",
            ],
        );
        assert!(!md.contains("HTML VERSION"), "{md}");
        assert!(!md.contains("Attachments"), "{md}");
        assert_eq!(
            extraction.metadata.title.as_deref(),
            Some("Résumé du projet and more")
        );
        assert_eq!(extraction.metadata.author.as_deref(), Some("René Dupont"));
    }

    #[test]
    fn legacy_charset_body_is_decoded() {
        let mut bytes = b"From: a@example.com\r\nSubject: Latin-1\r\n\
Content-Type: text/plain; charset=ISO-8859-1\r\n\
Content-Transfer-Encoding: 8bit\r\n\r\n"
            .to_vec();
        bytes.extend_from_slice(b"Caf\xe9 cr\xe8me br\xfbl\xe9e\r\n");
        let extraction = run(extract, &bytes, "eml").unwrap();
        assert!(
            extraction.markdown.contains("Café crème brûlée"),
            "{}",
            extraction.markdown
        );
    }

    #[test]
    fn html_only_body_goes_through_the_html_extractor() {
        let html = "<html><head><style>p{color:red}</style></head><body>\
<h2>Quarterly numbers</h2><p>Revenue is <b>up</b>.</p><ul><li>first</li><li>second</li></ul>\
<script>var hidden = 1;</script></body></html>";
        let text = format!(
            "From: news@example.com\r\nSubject: Report\r\n\
Content-Type: text/html; charset=utf-8\r\nContent-Transfer-Encoding: base64\r\n\r\n{}\r\n",
            b64(html.as_bytes())
        );
        let md = eml(&text).unwrap().markdown;
        assert_in_order(
            &md,
            &[
                "# Report",
                "Quarterly numbers",
                "Revenue is",
                "- first",
                "- second",
            ],
        );
        assert!(!md.contains("<p>") && !md.contains("color:red") && !md.contains("hidden"));
    }

    fn with_attachments() -> String {
        let pdf = b"%PDF-1.4 fake pdf bytes for the listing only";
        let notes = "Shopping list:\nmilk\neggs\n";
        format!(
            "From: Alice <alice@example.com>\r\nTo: Bob <bob@example.com>\r\n\
Subject: Files\r\nMIME-Version: 1.0\r\n\
Content-Type: multipart/mixed; boundary=\"mix\"\r\n\r\n\
--mix\r\nContent-Type: text/plain; charset=us-ascii\r\n\r\nSee the attached files.\r\n\
--mix\r\nContent-Type: application/pdf; name=\"report.pdf\"\r\n\
Content-Disposition: attachment; filename=\"report.pdf\"\r\n\
Content-Transfer-Encoding: base64\r\n\r\n{}\r\n\
--mix\r\nContent-Type: text/plain; charset=utf-8; name=\"notes.txt\"\r\n\
Content-Disposition: attachment; filename=\"notes.txt\"\r\n\
Content-Transfer-Encoding: base64\r\n\r\n{}\r\n\
--mix\r\nContent-Type: message/rfc822\r\n\r\n\
From: Carol <carol@example.net>\r\nSubject: Original question\r\n\
Content-Type: text/plain\r\n\r\nWhat time is the meeting?\r\n\
--mix--\r\n",
            b64(pdf),
            b64(notes.as_bytes())
        )
    }

    #[test]
    fn attachments_are_listed_text_and_messages_extracted() {
        let md = eml(&with_attachments()).unwrap().markdown;
        assert_in_order(
            &md,
            &[
                "# Files",
                "See the attached files.",
                "## Attachments",
                "- report.pdf (application/pdf, 44 bytes)",
                "- notes.txt (text/plain, 25 bytes)",
                "- Original question (message/rfc822,",
                "## Attachment: notes.txt",
                "Shopping list:\nmilk\neggs",
                "## Attached message: Original question",
                "### Original question",
                "- **From:** Carol <carol@example.net>",
                "What time is the meeting?",
            ],
        );
        assert!(!md.contains("fake pdf bytes"), "{md}");
    }

    #[test]
    fn no_subject_and_no_body_gives_no_text() {
        let extraction = eml("From: a@example.com\r\nTo: b@example.com\r\n\r\n").unwrap();
        assert_eq!(extraction.markdown, "");
    }

    #[test]
    fn subject_only_is_text() {
        let extraction = eml("From: a@example.com\r\nSubject: Lunch?\r\n\r\n").unwrap();
        assert!(extraction.markdown.starts_with("# Lunch?"));
    }

    #[test]
    fn garbage_is_malformed() {
        for bytes in [
            &b"just a line of prose without any header\nand another\n"[..],
            b"\x00\x01\x02\xff\xfe binary",
            b"",
            b"%PDF-1.7\n1 0 obj\n<< /Type /Catalog >>\nendobj\n",
        ] {
            let err = run(extract, bytes, "eml").unwrap_err();
            assert_eq!(err.code, "malformed_document", "{bytes:?}: {}", err.detail);
        }
    }

    #[test]
    fn output_is_bounded_by_the_limit() {
        let text = format!(
            "Subject: Long\r\nContent-Type: text/plain\r\n\r\n{}",
            "word ".repeat(10_000)
        );
        let limits = Limits {
            max_output_chars: 1000,
            ..Limits::default()
        };
        let input = Input {
            path: std::path::Path::new("long.eml"),
            bytes: text.as_bytes(),
            extension: "eml",
        };
        let extraction = extract(input, &limits, &Control::default()).unwrap();
        assert!(extraction.markdown.len() <= 1000);
        assert!(extraction.warnings.iter().any(|w| w.contains("cut short")));
    }

    fn nested(levels: usize) -> String {
        let mut s = String::from("From: a@example.com\r\nSubject: outer\r\n");
        for _ in 0..levels {
            s.push_str("Content-Type: message/rfc822\r\n\r\n");
        }
        s.push_str("Subject: innermost\r\n\r\nbody\r\n");
        s
    }

    #[test]
    fn deep_plain_nesting_neither_overflows_nor_recurses_unbounded() {
        // 30,000 levels: dropping mail-parser's tree recursively overflows a 2 MB stack.
        let extraction = eml(&nested(30_000)).unwrap();
        assert!(extraction.markdown.starts_with("# outer"));
        assert!(
            extraction
                .warnings
                .iter()
                .any(|w| w.contains("nests deeper"))
        );
    }

    #[test]
    fn nesting_hidden_in_base64_is_bounded() {
        let hidden = |levels: usize| {
            format!(
                "Subject: x\r\nContent-Type: message/rfc822\r\n\
Content-Transfer-Encoding: base64\r\n\r\n{}\r\n",
                b64(nested(levels).as_bytes())
            )
        };
        // 1,000 levels need ~5 MB of stack unoptimized: the parse thread has room.
        let extraction = eml(&hidden(1000)).unwrap();
        assert!(
            extraction.markdown.starts_with("# x"),
            "{}",
            extraction.markdown
        );
        let err = eml(&hidden(MAX_MESSAGE_DECLARATIONS + 10)).unwrap_err();
        assert_eq!(err.code, "document_too_complex");
        // Quoted-printable hides declarations too.
        let qp = format!(
            "Subject: x\r\nContent-Type: message/rfc822\r\n\
Content-Transfer-Encoding: quoted-printable\r\n\r\n{}",
            nested(MAX_MESSAGE_DECLARATIONS + 10).replace("Content-Type", "=43ontent-Type")
        );
        assert_eq!(eml(&qp).unwrap_err().code, "document_too_complex");
    }

    #[test]
    fn bound_counts_declarations_in_every_reading() {
        assert_eq!(declarations(nested(5).as_bytes()), 5);
        // Not encoded: mail-parser nests those without recursion.
        assert_eq!(nesting_bound(nested(5).as_bytes(), 0), 0);
        let folded = "Content-Type:\r\n (comment) Message/RFC822\r\n\r\n";
        assert_eq!(declarations(folded.as_bytes()), 1);
        let digest = "Content-Type: multipart/digest; boundary=x\r\n\r\n";
        assert_eq!(declarations(digest.as_bytes()), 1);
        let encoded = format!(
            "Content-Transfer-Encoding: base64\r\n\r\n{}\r\n--b\r\n\
Content-Transfer-Encoding: quoted-printable\r\n\r\n=43ontent-Type: message/rfc822\r\n",
            b64(nested(3).as_bytes())
        );
        assert_eq!(nesting_bound(encoded.as_bytes(), 0), 4);
        assert_eq!(
            decode_base64(b64(b"hello world!?").as_bytes()),
            b"hello world!?"
        );
        assert_eq!(
            decode_quoted_printable(b"caf=C3=A9 so=\r\nft"),
            "café soft".as_bytes()
        );
    }

    const ALLOWED: &[&str] = &["malformed_document", "document_too_complex"];

    proptest! {
        #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..2048)) {
            never_panics(extract, &bytes, "eml", ALLOWED)?;
        }

        #[test]
        fn damaged_messages_never_panic(
            which in 0usize..3,
            flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..24),
            cut in 0usize..4096,
        ) {
            let mut bytes = match which {
                0 => ALTERNATIVE.as_bytes().to_vec(),
                1 => with_attachments().into_bytes(),
                _ => nested(40).into_bytes(),
            };
            mutate(&mut bytes, &flips, cut);
            never_panics(extract, &bytes, "eml", ALLOWED)?;
        }
    }
}
