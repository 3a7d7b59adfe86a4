//! Outlook messages (`.msg`) to Markdown, laid out as [`crate::email`] lays out `.eml`: the
//! subject as a heading, a header block (From, To, Cc, Date, Subject), the body, then the
//! attachments listed by name, media type and size, text attachments and attached Outlook
//! messages extracted inline.
//!
//! A `.msg` is a CFB compound file (read with the `cfb` crate) of MAPI properties
//! ([MS-OXMSG]): variable-size ones in `__substg1.0_IIIITTTT` streams (property id, type),
//! fixed-size ones (code page, dates) in the `__properties_version1.0` stream, attachments
//! in `__attach_version1.0_#NNNNNNNN` storages. The crates that read `.msg` for Rust were
//! small and little maintained when this was written, so the few properties needed are read
//! here. Every stream read is bounded by `limits.max_decompressed_bytes` (per stream and in
//! total). The body is the plain-text body, else the HTML body through [`crate::html`], else
//! the compressed RTF body (`PR_RTF_COMPRESSED`, decompressed by [`crate::lzfu`] within what
//! is left of the same budget): RTF that encapsulates HTML (`\fromhtml1`, [MS-OXRTFEX]) has
//! its HTML taken out and read through [`crate::html`], other RTF goes through
//! [`crate::rtf`]. A damaged RTF body is skipped with a warning.

use std::io::{Cursor, Read};
use std::path::Path;

use encoding_rs::Encoding;

use crate::email::{Output, attachment_line, header_block};
use crate::markdown::{collapse_whitespace, heading};
use crate::{Control, ExtractError, Extraction, Input, Limits, Metadata};

const PT_STRING8: u16 = 0x001E;
const PT_UNICODE: u16 = 0x001F;
const PT_BINARY: u16 = 0x0102;
const PT_OBJECT: u16 = 0x000D;
const PT_LONG: u16 = 0x0003;
const PT_SYSTIME: u16 = 0x0040;

const PR_SUBJECT: u16 = 0x0037;
const PR_CLIENT_SUBMIT_TIME: u16 = 0x0039;
const PR_SENDER_NAME: u16 = 0x0C1A;
const PR_SENDER_EMAIL_ADDRESS: u16 = 0x0C1F;
const PR_SENDER_SMTP_ADDRESS: u16 = 0x5D01;
const PR_DISPLAY_CC: u16 = 0x0E03;
const PR_DISPLAY_TO: u16 = 0x0E04;
const PR_MESSAGE_DELIVERY_TIME: u16 = 0x0E06;
const PR_BODY: u16 = 0x1000;
const PR_HTML: u16 = 0x1013;
const PR_RTF_COMPRESSED: u16 = 0x1009;
const PR_MESSAGE_CODEPAGE: u16 = 0x3FFD;
const PR_INTERNET_CPID: u16 = 0x3FDE;
const PR_DISPLAY_NAME: u16 = 0x3001;
const PR_ATTACH_DATA: u16 = 0x3701;
const PR_ATTACH_FILENAME: u16 = 0x3704;
const PR_ATTACH_LONG_FILENAME: u16 = 0x3707;
const PR_ATTACH_MIME_TAG: u16 = 0x370E;

const PROPERTIES: &str = "__properties_version1.0";
const ATTACH_PREFIX: &str = "__attach_version1.0_#";
/// Attached messages extracted inline, nested; deeper ones are listed only.
const MAX_INLINE_DEPTH: usize = 4;
/// Attachments listed per message; the rest are counted in a warning.
const MAX_ATTACHMENTS: usize = 1000;
/// Attachment file name extensions read as text when the media type is missing.
const TEXT_EXTENSIONS: &[&str] = &["txt", "text", "md", "markdown", "csv", "log"];
const TEXT_TYPES: &[&str] = &["text/plain", "text/markdown", "text/x-markdown", "text/csv"];

pub fn extract(
    input: Input<'_>,
    limits: &Limits,
    control: &Control,
) -> Result<Extraction, ExtractError> {
    let file = cfb::CompoundFile::open(Cursor::new(input.bytes)).map_err(|e| {
        ExtractError::malformed(format!(
            "not a readable Outlook message (compound file): {e}"
        ))
    })?;
    let mut reader = Reader {
        file,
        limits,
        control,
        read_bytes: 0,
    };
    let root = reader.names("")?;
    if !root.iter().any(|n| n.starts_with("__substg1.0_")) {
        return Err(ExtractError::malformed(
            "a compound file that is not an Outlook message (no MAPI property streams)",
        ));
    }
    let mut writer = Output::new(limits.max_output_chars);
    let top = reader.message("", true)?;
    reader.render(&mut writer, &top, 1, 0)?;
    Ok(writer.finish(Metadata {
        title: top.subject.clone(),
        author: top.sender_name.clone().or(top.sender_email.clone()),
        ..Metadata::default()
    }))
}

/// The properties of one message (the file's, or an attached one).
#[derive(Debug, Default)]
struct Msg {
    /// The storage path the message's streams are under (`""` for the file's own, else
    /// `/__attach_version1.0_#00000000/__substg1.0_3701000D`).
    path: String,
    subject: Option<String>,
    sender_name: Option<String>,
    sender_email: Option<String>,
    to: Option<String>,
    cc: Option<String>,
    /// Seconds since the Unix epoch.
    date: Option<i64>,
    body: Option<String>,
    html: Option<Vec<u8>>,
    /// The decompressed RTF body, read only when there is neither a plain nor an HTML body.
    rtf: Option<Vec<u8>>,
    /// Warnings about the message's own streams (a damaged RTF body).
    warnings: Vec<String>,
    attachments: Vec<String>,
}

struct Reader<'a> {
    file: cfb::CompoundFile<Cursor<&'a [u8]>>,
    limits: &'a Limits,
    control: &'a Control,
    /// Bytes read from streams so far, bounded by `limits.max_decompressed_bytes`.
    read_bytes: u64,
}

impl Reader<'_> {
    /// The names of the entries of the storage at `path` (`""`: the root).
    fn names(&self, path: &str) -> Result<Vec<String>, ExtractError> {
        let storage = if path.is_empty() { "/" } else { path };
        let entries = self
            .file
            .read_storage(storage)
            .map_err(|e| ExtractError::malformed(format!("unreadable storage {storage}: {e}")))?;
        Ok(entries.map(|e| e.name().to_string()).collect())
    }

    /// A stream's bytes, or `None` if there is no such stream. Bounded: a stream larger than
    /// what is left of the read budget is refused.
    fn stream(&mut self, path: &str) -> Result<Option<Vec<u8>>, ExtractError> {
        self.control.check()?;
        if !self.file.is_stream(path) {
            return Ok(None);
        }
        let len = self.file.entry(path).map(|e| e.len()).unwrap_or(0);
        let budget = self.limits.max_decompressed_bytes;
        if self.read_bytes.saturating_add(len) > budget {
            return Err(ExtractError::too_complex(format!(
                "the message's streams hold more than {budget} bytes"
            )));
        }
        let mut stream = match self.file.open_stream(path) {
            Ok(stream) => stream,
            Err(e) => {
                return Err(ExtractError::malformed(format!(
                    "unreadable stream {path}: {e}"
                )));
            }
        };
        let mut data = Vec::new();
        stream
            .by_ref()
            .take(len)
            .read_to_end(&mut data)
            .map_err(|e| ExtractError::malformed(format!("unreadable stream {path}: {e}")))?;
        self.read_bytes = self.read_bytes.saturating_add(data.len() as u64);
        Ok(Some(data))
    }

    /// A string property: the Unicode stream, else the 8-bit one in `codepage`.
    fn string(
        &mut self,
        path: &str,
        id: u16,
        codepage: &'static Encoding,
    ) -> Result<Option<String>, ExtractError> {
        if let Some(bytes) = self.stream(&substg(path, id, PT_UNICODE))? {
            let (text, _) = encoding_rs::UTF_16LE.decode_without_bom_handling(&bytes);
            return Ok(Some(trim_nul(&text)));
        }
        if let Some(bytes) = self.stream(&substg(path, id, PT_STRING8))? {
            let (text, _) = codepage.decode_without_bom_handling(&bytes);
            return Ok(Some(trim_nul(&text)));
        }
        Ok(None)
    }

    /// The fixed-size properties of the `__properties_version1.0` stream, by property tag.
    fn fixed_properties(
        &mut self,
        path: &str,
        header_len: usize,
    ) -> Result<Vec<(u32, [u8; 8])>, ExtractError> {
        let Some(bytes) = self.stream(&format!("{path}/{PROPERTIES}"))? else {
            return Ok(Vec::new());
        };
        let entries = bytes
            .get(header_len..)
            .unwrap_or_default()
            .chunks_exact(16)
            .filter_map(|entry| {
                let tag = u32::from_le_bytes(entry.get(..4)?.try_into().ok()?);
                let value: [u8; 8] = entry.get(8..16)?.try_into().ok()?;
                Some((tag, value))
            })
            .collect();
        Ok(entries)
    }

    fn message(&mut self, path: &str, top_level: bool) -> Result<Msg, ExtractError> {
        // The stream's header: 32 bytes for the file's message, 24 for an attached one.
        let fixed = self.fixed_properties(path, if top_level { 32 } else { 24 })?;
        let long = |id: u16| {
            fixed
                .iter()
                .find(|(tag, _)| *tag == (u32::from(id) << 16 | u32::from(PT_LONG)))
                .and_then(|(_, v)| v.get(..4)?.try_into().ok().map(u32::from_le_bytes))
        };
        let codepage = long(PR_INTERNET_CPID)
            .or_else(|| long(PR_MESSAGE_CODEPAGE))
            .and_then(encoding_for_codepage)
            .unwrap_or(encoding_rs::WINDOWS_1252);
        let time = |id: u16| {
            fixed
                .iter()
                .find(|(tag, _)| *tag == (u32::from(id) << 16 | u32::from(PT_SYSTIME)))
                .and_then(|(_, v)| filetime_to_unix(u64::from_le_bytes(*v)))
        };
        let date = time(PR_CLIENT_SUBMIT_TIME).or_else(|| time(PR_MESSAGE_DELIVERY_TIME));

        let clean = |s: Option<String>| s.map(|s| clean_line(&s)).filter(|s| !s.is_empty());
        let subject = clean(self.string(path, PR_SUBJECT, codepage)?);
        let sender_name = clean(self.string(path, PR_SENDER_NAME, codepage)?);
        let smtp = clean(self.string(path, PR_SENDER_SMTP_ADDRESS, codepage)?);
        let email = clean(self.string(path, PR_SENDER_EMAIL_ADDRESS, codepage)?);
        // PR_SENDER_EMAIL_ADDRESS is an Exchange DN (`/O=...`) for internal senders.
        let sender_email = smtp.or(email.filter(|e| e.contains('@')));
        let to = clean(self.string(path, PR_DISPLAY_TO, codepage)?);
        let cc = clean(self.string(path, PR_DISPLAY_CC, codepage)?);
        let body = self
            .string(path, PR_BODY, codepage)?
            .filter(|b| !b.trim().is_empty());
        let html = if body.is_none() {
            match self.stream(&substg(path, PR_HTML, PT_BINARY))? {
                Some(bytes) => Some(bytes),
                None => self
                    .string(path, PR_HTML, codepage)?
                    .map(String::into_bytes),
            }
        } else {
            None
        };
        let mut warnings = Vec::new();
        let rtf = if body.is_none() && html.is_none() {
            self.compressed_rtf(path, &mut warnings)?
        } else {
            None
        };
        let mut attachments: Vec<String> = self
            .names(path)?
            .into_iter()
            .filter(|n| n.starts_with(ATTACH_PREFIX))
            .collect();
        attachments.sort();
        Ok(Msg {
            path: path.to_string(),
            subject,
            sender_name,
            sender_email,
            to,
            cc,
            date,
            body,
            html,
            rtf,
            warnings,
            attachments,
        })
    }

    /// The decompressed `PR_RTF_COMPRESSED` body. Its size counts against the read budget
    /// (too large is `document_too_complex`, as for any stream); a damaged one is skipped
    /// with a warning, so that the headers and attachments still come out.
    fn compressed_rtf(
        &mut self,
        path: &str,
        warnings: &mut Vec<String>,
    ) -> Result<Option<Vec<u8>>, ExtractError> {
        let Some(bytes) = self.stream(&substg(path, PR_RTF_COMPRESSED, PT_BINARY))? else {
            return Ok(None);
        };
        let left = self
            .limits
            .max_decompressed_bytes
            .saturating_sub(self.read_bytes);
        match crate::lzfu::decompress(&bytes, left, self.control) {
            Ok(rtf) => {
                self.read_bytes = self.read_bytes.saturating_add(rtf.len() as u64);
                Ok(Some(rtf))
            }
            Err(e) if e.code == "malformed_document" => {
                warnings.push(format!(
                    "the message's compressed RTF body was skipped: {}",
                    e.detail
                ));
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    fn render(
        &mut self,
        writer: &mut Output,
        msg: &Msg,
        level: usize,
        depth: usize,
    ) -> Result<(), ExtractError> {
        self.control.check()?;
        writer.warnings.extend(msg.warnings.iter().cloned());
        if let Some(subject) = &msg.subject {
            writer.push(&heading(level, subject));
        }
        let from = match (&msg.sender_name, &msg.sender_email) {
            (Some(name), Some(email)) if name != email => Some(format!("{name} <{email}>")),
            (Some(name), _) => Some(name.clone()),
            (None, email) => email.clone(),
        };
        let date = msg.date.map(format_date);
        writer.push(&header_block(&[
            ("From", from.as_deref()),
            ("To", msg.to.as_deref()),
            ("Cc", msg.cc.as_deref()),
            ("Date", date.as_deref()),
            ("Subject", msg.subject.as_deref()),
        ]));

        if let Some(body) = &msg.body {
            writer.has_text = true;
            writer.push(&body.replace("\r\n", "\n"));
        } else if let Some(html) = &msg.html {
            let (text, _) = crate::html::decode_html(html)?;
            let extraction = crate::html::to_markdown(&text, self.limits, self.control)?;
            writer.warnings.extend(extraction.warnings);
            if !extraction.markdown.trim().is_empty() {
                writer.has_text = true;
                writer.push(&extraction.markdown);
            }
        } else if let Some(rtf) = &msg.rtf {
            self.rtf_body(writer, rtf)?;
        }
        self.attachments(writer, msg, level, depth)
    }

    /// An RTF body: its encapsulated HTML through [`crate::html`] when it has some, else the
    /// RTF through [`crate::rtf`].
    fn rtf_body(&self, writer: &mut Output, rtf: &[u8]) -> Result<(), ExtractError> {
        let extraction = match html_from_rtf(rtf, self.limits, self.control)? {
            Some(html) => crate::html::to_markdown(&html, self.limits, self.control)?,
            None => {
                let input = Input {
                    path: Path::new("body.rtf"),
                    bytes: rtf,
                    extension: "rtf",
                };
                match crate::rtf::extract(input, self.limits, self.control) {
                    Ok(extraction) => extraction,
                    Err(e) if e.code == "malformed_document" => {
                        writer
                            .warnings
                            .push(format!("the message's RTF body was skipped: {}", e.detail));
                        return Ok(());
                    }
                    Err(e) => return Err(e),
                }
            }
        };
        writer.warnings.extend(extraction.warnings);
        if !extraction.markdown.trim().is_empty() {
            writer.has_text = true;
            writer.push(&extraction.markdown);
        }
        Ok(())
    }

    fn attachments(
        &mut self,
        writer: &mut Output,
        msg: &Msg,
        level: usize,
        depth: usize,
    ) -> Result<(), ExtractError> {
        if msg.attachments.is_empty() {
            return Ok(());
        }
        if msg.attachments.len() > MAX_ATTACHMENTS {
            writer.warnings.push(format!(
                "the message has {} attachments; the first {MAX_ATTACHMENTS} are listed",
                msg.attachments.len()
            ));
        }
        let codepage = encoding_rs::WINDOWS_1252;
        let mut listed = Vec::new();
        for name in msg.attachments.iter().take(MAX_ATTACHMENTS) {
            self.control.check()?;
            let path = format!("{}/{name}", msg.path);
            let clean = |s: Option<String>| s.map(|s| clean_line(&s)).filter(|s| !s.is_empty());
            let file_name = clean(self.string(&path, PR_ATTACH_LONG_FILENAME, codepage)?)
                .or(clean(self.string(&path, PR_ATTACH_FILENAME, codepage)?))
                .or(clean(self.string(&path, PR_DISPLAY_NAME, codepage)?));
            let mime = clean(self.string(&path, PR_ATTACH_MIME_TAG, codepage)?)
                .map(|m| m.to_ascii_lowercase());
            let data_path = substg(&path, PR_ATTACH_DATA, PT_BINARY);
            let embedded = substg(&path, PR_ATTACH_DATA, PT_OBJECT);
            let is_message = self.file.is_storage(&embedded);
            let size = if is_message {
                self.storage_size(&embedded)
            } else {
                self.file.entry(&data_path).map(|e| e.len()).unwrap_or(0)
            };
            let media = mime.unwrap_or_else(|| {
                if is_message {
                    "application/vnd.ms-outlook".to_string()
                } else {
                    guess_media_type(file_name.as_deref().unwrap_or_default()).to_string()
                }
            });
            listed.push((
                path, file_name, media, size, is_message, data_path, embedded,
            ));
        }
        writer.push(&heading(level + 1, "Attachments"));
        let mut lines = Vec::new();
        for (i, (_, file_name, media, size, ..)) in listed.iter().enumerate() {
            let name = file_name
                .clone()
                .unwrap_or_else(|| format!("attachment {}", i + 1));
            lines.push(attachment_line(
                &name,
                media,
                usize::try_from(*size).unwrap_or(usize::MAX),
            ));
        }
        writer.push(&lines.join("\n"));
        for (i, (_, file_name, media, _, is_message, data_path, embedded)) in
            listed.iter().enumerate()
        {
            if writer.full {
                break;
            }
            let name = file_name
                .clone()
                .unwrap_or_else(|| format!("attachment {}", i + 1));
            if *is_message {
                if depth + 1 >= MAX_INLINE_DEPTH {
                    writer.warnings.push(format!(
                        "attached message {name} nests deeper than {MAX_INLINE_DEPTH} levels: \
                         listed, not extracted"
                    ));
                    continue;
                }
                let inner = self.message(embedded, false)?;
                let title = inner.subject.clone().unwrap_or(name);
                writer.push(&heading(level + 1, &format!("Attached message: {title}")));
                self.render(writer, &inner, (level + 2).min(6), depth + 1)?;
            } else if is_text(media, file_name.as_deref())
                && let Some(bytes) = self.stream(data_path)?
                && let Ok(decoded) = crate::plain::decode(&bytes)
                && !decoded.text.trim().is_empty()
            {
                writer.has_text = true;
                writer.push(&heading(level + 1, &format!("Attachment: {name}")));
                writer.push(&decoded.text);
            }
        }
        Ok(())
    }

    /// The bytes of the streams under a storage (an attached message's size), bounded.
    fn storage_size(&self, path: &str) -> u64 {
        self.file
            .walk_storage(path)
            .map(|entries| {
                entries
                    .take(100_000)
                    .filter(|e| e.is_stream())
                    .map(|e| e.len())
                    .fold(0u64, u64::saturating_add)
            })
            .unwrap_or(0)
    }
}

/// How much of the head of an RTF body is searched for `\fromhtml1`.
const RTF_HEADER_BYTES: usize = 4096;
/// Longest control word and parameter read (the RTF spec allows 32 and 10).
const MAX_RTF_WORD: usize = 32;
const MAX_RTF_DIGITS: usize = 10;
/// Bytes of RTF read between two `control.check()` calls.
const RTF_CHECK_EVERY: usize = 1 << 16;
/// Destinations of an RTF header whose text is never part of the encapsulated HTML.
const RTF_DESTINATIONS: &[&str] = &[
    "fonttbl",
    "colortbl",
    "stylesheet",
    "info",
    "pict",
    "object",
    "fldinst",
    "listtable",
    "listoverridetable",
    "revtbl",
    "rsidtbl",
    "generator",
    "header",
    "footer",
];

/// The RTF has `\fromhtml1` in its header: Outlook encapsulated an HTML body in it.
fn is_encapsulated_html(rtf: &[u8]) -> bool {
    let head = rtf.get(..rtf.len().min(RTF_HEADER_BYTES)).unwrap_or(rtf);
    head.starts_with(b"{\\rtf")
        && head
            .windows(11)
            .any(|w| w.starts_with(b"\\fromhtml1") && w.last().is_some_and(|b| !b.is_ascii_digit()))
}

/// What an RTF group's content is, for de-encapsulation.
#[derive(Debug, Clone, Copy)]
struct Scope {
    /// A destination that is not HTML (the font table, a `\*` destination other than
    /// `\htmltag`): nothing in it is written.
    skip: bool,
    /// An `{\*\htmltag ...}` group: HTML markup, written whatever `\htmlrtf` says.
    tag: bool,
    /// Inside `\htmlrtf` ... `\htmlrtf0`: RTF written for RTF readers only, not the HTML's.
    suppressed: bool,
    /// `\ucN`: the fallback characters that follow a `\uN`.
    uc: usize,
}

/// The HTML as it is written: bytes of `\'hh` escapes and text are decoded in the RTF's code
/// page (`\ansicpg`) a run at a time, so that double-byte code pages decode whole.
struct HtmlOut {
    out: String,
    pending: Vec<u8>,
    encoding: &'static Encoding,
}

impl HtmlOut {
    fn flush(&mut self) {
        if !self.pending.is_empty() {
            let (text, _) = self.encoding.decode_without_bom_handling(&self.pending);
            self.out.push_str(&text);
            self.pending.clear();
        }
    }

    fn text(&mut self, text: &str) {
        self.flush();
        self.out.push_str(text);
    }
}

/// The HTML an RTF body encapsulates ([MS-OXRTFEX] 2.2.3.2): the content of the
/// `{\*\htmltag}` groups and the text outside them that `\htmlrtf` does not mark as RTF-only,
/// with `\par`, `\tab`, `\'hh`, `\uN` and the escaped symbols turned back into text.
/// `None` when the RTF does not encapsulate HTML, when its nesting is deeper than
/// `limits.max_nesting_depth` or when nothing comes out: the caller reads it as RTF then.
/// Simplification: every `\'hh` is decoded in the document's code page (`\ansicpg`), not in
/// the code page of the current font's `\fcharset`, which Outlook's bodies rarely need.
fn html_from_rtf(
    rtf: &[u8],
    limits: &Limits,
    control: &Control,
) -> Result<Option<String>, ExtractError> {
    if !is_encapsulated_html(rtf) {
        return Ok(None);
    }
    let mut html = HtmlOut {
        out: String::new(),
        pending: Vec::new(),
        encoding: encoding_rs::WINDOWS_1252,
    };
    let mut scope = Scope {
        skip: false,
        tag: false,
        suppressed: false,
        uc: 1,
    };
    let mut stack: Vec<Scope> = Vec::new();
    // Just after `{` (and a `\*`): the next control word may name the group's destination.
    let mut group_start = false;
    let mut starred = false;
    // Fallback characters of a `\uN` still to be stepped over.
    let mut fallback = 0usize;
    let mut at = 0usize;
    let mut next_check = RTF_CHECK_EVERY;
    while let Some(&byte) = rtf.get(at) {
        if at >= next_check {
            control.check()?;
            next_check = at.saturating_add(RTF_CHECK_EVERY);
        }
        let emit = !scope.skip && (scope.tag || !scope.suppressed);
        match byte {
            b'{' => {
                if stack.len() >= limits.max_nesting_depth {
                    return Ok(None);
                }
                stack.push(scope);
                group_start = true;
                starred = false;
                fallback = 0;
                at += 1;
            }
            b'}' => {
                if let Some(outer) = stack.pop() {
                    scope = outer;
                }
                group_start = false;
                fallback = 0;
                at += 1;
            }
            b'\r' | b'\n' => at += 1,
            b'\\' => {
                let next = rtf.get(at + 1).copied();
                match next {
                    Some(c) if c.is_ascii_alphabetic() => {
                        let (word, param, end) = control_word(rtf, at + 1);
                        at = end;
                        if group_start {
                            if starred && word == b"htmltag" {
                                scope.tag = true;
                            } else if starred
                                || RTF_DESTINATIONS.iter().any(|d| d.as_bytes() == word)
                            {
                                scope.skip = true;
                            }
                        }
                        group_start = false;
                        starred = false;
                        match word {
                            b"ansicpg" => {
                                if let Some(encoding) = param
                                    .and_then(|p| u32::try_from(p).ok())
                                    .and_then(encoding_for_codepage)
                                {
                                    html.flush();
                                    html.encoding = encoding;
                                }
                            }
                            b"uc" => {
                                scope.uc = param
                                    .and_then(|p| usize::try_from(p).ok())
                                    .unwrap_or(1)
                                    .min(8);
                            }
                            b"bin" => {
                                let skip = param.and_then(|p| usize::try_from(p).ok()).unwrap_or(0);
                                at = at.saturating_add(skip);
                            }
                            b"htmlrtf" if !scope.tag => {
                                scope.suppressed = param != Some(0);
                            }
                            b"u" if emit => {
                                if let Some(p) = param {
                                    // Negative values are code units above 0x7FFF.
                                    let unit = if p < 0 { p + 65_536 } else { p };
                                    let c = u32::try_from(unit)
                                        .ok()
                                        .and_then(char::from_u32)
                                        .unwrap_or('\u{FFFD}');
                                    html.text(c.encode_utf8(&mut [0; 4]));
                                    fallback = scope.uc;
                                }
                            }
                            _ if emit => {
                                if let Some(text) = rtf_word_text(word) {
                                    html.text(text);
                                }
                            }
                            _ => {}
                        }
                    }
                    Some(b'*') => {
                        starred = group_start;
                        at += 2;
                    }
                    Some(b'\'') => {
                        let hex = rtf
                            .get(at + 2..at + 4)
                            .and_then(|h| std::str::from_utf8(h).ok())
                            .and_then(|h| u8::from_str_radix(h, 16).ok());
                        at += 4;
                        if let Some(value) = hex {
                            if fallback > 0 {
                                fallback -= 1;
                            } else if emit {
                                html.pending.push(value);
                            }
                        }
                        group_start = false;
                    }
                    Some(symbol) => {
                        at += 2;
                        group_start = false;
                        if emit {
                            let text = match symbol {
                                b'{' => "{",
                                b'}' => "}",
                                b'\\' => "\\",
                                b'~' => "\u{A0}",
                                b'_' => "\u{AD}",
                                b'\r' | b'\n' => "\r\n",
                                _ => "",
                            };
                            html.text(text);
                        }
                    }
                    None => at += 1,
                }
            }
            _ => {
                at += 1;
                group_start = false;
                if fallback > 0 {
                    fallback -= 1;
                } else if emit {
                    html.pending.push(byte);
                }
            }
        }
    }
    html.flush();
    Ok((!html.out.trim().is_empty()).then_some(html.out))
}

/// The control word whose letters start at `at` (after the backslash): its name, its numeric
/// parameter and where the next token starts (past the space that may end the word).
fn control_word(rtf: &[u8], at: usize) -> (&[u8], Option<i64>, usize) {
    let rest = rtf.get(at..).unwrap_or_default();
    let letters = rest
        .iter()
        .take(MAX_RTF_WORD)
        .take_while(|b| b.is_ascii_alphabetic())
        .count();
    let word = rest.get(..letters).unwrap_or_default();
    let mut end = letters;
    let negative =
        rest.get(end) == Some(&b'-') && rest.get(end + 1).is_some_and(u8::is_ascii_digit);
    if negative {
        end += 1;
    }
    let digits = rest
        .get(end..)
        .unwrap_or_default()
        .iter()
        .take(MAX_RTF_DIGITS)
        .take_while(|b| b.is_ascii_digit())
        .count();
    let param = rest
        .get(end..end + digits)
        .and_then(|d| std::str::from_utf8(d).ok())
        .and_then(|d| d.parse::<i64>().ok())
        .map(|v| if negative { -v } else { v });
    end += digits;
    if rest.get(end) == Some(&b' ') {
        end += 1;
    }
    (word, param, at + end)
}

/// The text of the control words [MS-OXRTFEX] 2.1.3.1.4.2 allows in encapsulated HTML.
fn rtf_word_text(word: &[u8]) -> Option<&'static str> {
    Some(match word {
        b"par" | b"line" => "\r\n",
        b"tab" => "\t",
        b"lquote" => "\u{2018}",
        b"rquote" => "\u{2019}",
        b"ldblquote" => "\u{201C}",
        b"rdblquote" => "\u{201D}",
        b"bullet" => "\u{2022}",
        b"endash" => "\u{2013}",
        b"emdash" => "\u{2014}",
        _ => return None,
    })
}

fn substg(path: &str, id: u16, kind: u16) -> String {
    format!("{path}/__substg1.0_{id:04X}{kind:04X}")
}

fn trim_nul(text: &str) -> String {
    text.trim_end_matches('\0').to_string()
}

fn clean_line(text: &str) -> String {
    collapse_whitespace(&text.replace(|c: char| c.is_control(), " "))
}

fn is_text(media: &str, name: Option<&str>) -> bool {
    TEXT_TYPES.contains(&media)
        || name
            .and_then(|n| n.rsplit_once('.'))
            .is_some_and(|(_, ext)| TEXT_EXTENSIONS.contains(&ext.to_ascii_lowercase().as_str()))
}

fn guess_media_type(name: &str) -> &'static str {
    let ext = name
        .rsplit_once('.')
        .map(|(_, e)| e.to_ascii_lowercase())
        .unwrap_or_default();
    match ext.as_str() {
        "txt" | "text" | "log" => "text/plain",
        "md" | "markdown" => "text/markdown",
        "csv" => "text/csv",
        "htm" | "html" => "text/html",
        "pdf" => "application/pdf",
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "docx" => "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        "xlsx" => "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
        "pptx" => "application/vnd.openxmlformats-officedocument.presentationml.presentation",
        "zip" => "application/zip",
        "msg" => "application/vnd.ms-outlook",
        "eml" => "message/rfc822",
        _ => "application/octet-stream",
    }
}

/// The encoding of a Windows code page number (`PR_INTERNET_CPID`, `PR_MESSAGE_CODEPAGE`).
fn encoding_for_codepage(codepage: u32) -> Option<&'static Encoding> {
    let label = match codepage {
        65001 => "utf-8",
        1200 => "utf-16le",
        1201 => "utf-16be",
        20127 => "us-ascii",
        28591 => "iso-8859-1",
        28592 => "iso-8859-2",
        28595 => "iso-8859-5",
        28597 => "iso-8859-7",
        28605 => "iso-8859-15",
        932 => "shift_jis",
        936 => "gbk",
        949 => "euc-kr",
        950 => "big5",
        50220..=50222 => "iso-2022-jp",
        51932 => "euc-jp",
        20866 => "koi8-r",
        21866 => "koi8-u",
        54936 => "gb18030",
        874 => "windows-874",
        1250..=1258 => return Encoding::for_label(format!("windows-{codepage}").as_bytes()),
        _ => return None,
    };
    Encoding::for_label(label.as_bytes())
}

/// A FILETIME (100 ns ticks since 1601) as Unix seconds; `None` for 0 and absurd values.
fn filetime_to_unix(ticks: u64) -> Option<i64> {
    if ticks == 0 {
        return None;
    }
    let seconds = i64::try_from(ticks / 10_000_000).ok()? - 11_644_473_600;
    // Years 1900 to 9999.
    (-2_208_988_800..=253_402_300_799)
        .contains(&seconds)
        .then_some(seconds)
}

/// `Tue, 2 Jan 2024 09:30:00 +0000` (MAPI times are UTC).
fn format_date(unix: i64) -> String {
    let days = unix.div_euclid(86_400);
    let secs = unix.rem_euclid(86_400);
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    const WEEKDAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let weekday = WEEKDAYS
        .get(usize::try_from(days.rem_euclid(7)).unwrap_or(0))
        .unwrap_or(&"");
    let month_name = MONTHS
        .get(usize::try_from(month - 1).unwrap_or(0))
        .unwrap_or(&"");
    format!(
        "{weekday}, {day} {month_name} {year} {:02}:{:02}:{:02} +0000",
        secs / 3600,
        secs % 3600 / 60,
        secs % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{assert_in_order, mutate, never_panics, run};
    use proptest::prelude::*;
    use std::io::Write;

    fn utf16(text: &str) -> Vec<u8> {
        text.encode_utf16().flat_map(u16::to_le_bytes).collect()
    }

    /// A `__properties_version1.0` stream: a header of `header` bytes, then 16-byte entries.
    fn properties(header: usize, entries: &[(u16, u16, u64)]) -> Vec<u8> {
        let mut out = vec![0u8; header];
        for &(id, kind, value) in entries {
            out.extend((u32::from(id) << 16 | u32::from(kind)).to_le_bytes());
            out.extend(6u32.to_le_bytes());
            out.extend(value.to_le_bytes());
        }
        out
    }

    /// 2024-01-02 09:30:00 UTC as a FILETIME.
    const SUBMITTED: u64 = (1_704_187_800 + 11_644_473_600) * 10_000_000;

    fn build(streams: &[(&str, Vec<u8>)], storages: &[&str]) -> Vec<u8> {
        let mut file = cfb::CompoundFile::create(Cursor::new(Vec::new())).unwrap();
        for storage in storages {
            file.create_storage(storage).unwrap();
        }
        for (path, data) in streams {
            file.create_stream(path).unwrap().write_all(data).unwrap();
        }
        file.flush().unwrap();
        file.into_inner().into_inner()
    }

    fn sample() -> Vec<u8> {
        let a0 = "/__attach_version1.0_#00000000";
        let a1 = "/__attach_version1.0_#00000001";
        let a2 = "/__attach_version1.0_#00000002";
        let inner = format!("{a2}/__substg1.0_3701000D");
        let path = |base: &str, name: &str| format!("{base}/{name}");
        build(
            &[
                ("/__substg1.0_0037001F", utf16("Quarterly plan ✓")),
                ("/__substg1.0_0C1A001F", utf16("Alice Example")),
                (
                    "/__substg1.0_0C1F001F",
                    utf16("/O=EXCHANGE/OU=FIRST/CN=ALICE"),
                ),
                ("/__substg1.0_5D01001F", utf16("alice@example.com")),
                ("/__substg1.0_0E04001F", utf16("Bob Builder; Carol Singer")),
                ("/__substg1.0_0E03001F", utf16("Dave")),
                (
                    "/__substg1.0_1000001F",
                    utf16("Hello team,\r\n\r\nThe plan is attached.\0"),
                ),
                (
                    "/__properties_version1.0",
                    properties(32, &[(PR_CLIENT_SUBMIT_TIME, PT_SYSTIME, SUBMITTED)]),
                ),
                (&path(a0, "__substg1.0_3707001F"), utf16("plan.pdf")),
                (&path(a0, "__substg1.0_370E001F"), utf16("application/pdf")),
                (
                    &path(a0, "__substg1.0_37010102"),
                    b"%PDF-1.4 not read".to_vec(),
                ),
                (&path(a1, "__substg1.0_3704001E"), b"NOTES.TXT".to_vec()),
                (
                    &path(a1, "__substg1.0_37010102"),
                    b"Remember the milk.".to_vec(),
                ),
                (&path(a2, "__substg1.0_3001001F"), utf16("Earlier thread")),
                (
                    &path(&inner, "__substg1.0_0037001E"),
                    b"Re: plan caf\xe9".to_vec(),
                ),
                (&path(&inner, "__substg1.0_0C1A001E"), b"Eve".to_vec()),
                (
                    &path(&inner, "__substg1.0_10130102"),
                    b"<html><body><p>Inner <b>HTML</b> body</p></body></html>".to_vec(),
                ),
                (
                    &path(&inner, "__properties_version1.0"),
                    properties(24, &[(PR_MESSAGE_CODEPAGE, PT_LONG, 1252)]),
                ),
            ],
            &[a0, a1, a2, &inner],
        )
    }

    #[test]
    fn headers_body_and_attachments() {
        let extraction = run(extract, &sample(), "msg").unwrap();
        let md = &extraction.markdown;
        assert_in_order(
            md,
            &[
                "# Quarterly plan ✓",
                "- **From:** Alice Example <alice@example.com>",
                "- **To:** Bob Builder; Carol Singer",
                "- **Cc:** Dave",
                "- **Date:** Tue, 2 Jan 2024 09:30:00 +0000",
                "- **Subject:** Quarterly plan ✓",
                "Hello team,\n\nThe plan is attached.",
                "## Attachments",
                "- plan.pdf (application/pdf, 17 bytes)",
                "- NOTES.TXT (text/plain, 18 bytes)",
                "- Earlier thread (application/vnd.ms-outlook,",
                "## Attachment: NOTES.TXT",
                "Remember the milk.",
                "## Attached message: Re: plan café",
                "### Re: plan café",
                "- **From:** Eve",
                "Inner **HTML** body",
            ],
        );
        assert!(!md.contains("not read") && !md.contains('\0'), "{md}");
        assert_eq!(
            extraction.metadata.title.as_deref(),
            Some("Quarterly plan ✓")
        );
        assert_eq!(extraction.metadata.author.as_deref(), Some("Alice Example"));
    }

    #[test]
    fn eight_bit_strings_use_the_message_code_page() {
        let bytes = build(
            &[
                (
                    "/__substg1.0_0037001E",
                    b"\xcf\xf0\xe8\xe2\xe5\xf2".to_vec(),
                ),
                (
                    "/__properties_version1.0",
                    properties(32, &[(PR_INTERNET_CPID, PT_LONG, 1251)]),
                ),
            ],
            &[],
        );
        let md = run(extract, &bytes, "msg").unwrap().markdown;
        assert!(md.starts_with("# Привет"), "{md}");
    }

    #[test]
    fn empty_message_gives_no_text() {
        let bytes = build(&[("/__substg1.0_0C1A001F", utf16("Someone"))], &[]);
        assert_eq!(run(extract, &bytes, "msg").unwrap().markdown, "");
    }

    #[test]
    fn compound_files_that_are_not_messages_are_malformed() {
        let bytes = build(&[("/WordDocument", vec![0u8; 64])], &[]);
        let err = run(extract, &bytes, "msg").unwrap_err();
        assert_eq!(err.code, "malformed_document");
        assert!(
            err.detail.contains("not an Outlook message"),
            "{}",
            err.detail
        );
        let err = run(extract, b"From: a@example.com\r\n\r\nnot a CFB", "msg").unwrap_err();
        assert_eq!(err.code, "malformed_document");
    }

    #[test]
    fn streams_are_bounded_by_the_read_budget() {
        let bytes = build(&[("/__substg1.0_1000001F", utf16(&"x".repeat(5000)))], &[]);
        let limits = Limits {
            max_decompressed_bytes: 4096,
            ..Limits::default()
        };
        let input = Input {
            path: std::path::Path::new("big.msg"),
            bytes: &bytes,
            extension: "msg",
        };
        let err = extract(input, &limits, &Control::default()).unwrap_err();
        assert_eq!(err.code, "document_too_complex");
    }

    #[test]
    fn dates_format_as_in_mail() {
        assert_eq!(format_date(0), "Thu, 1 Jan 1970 00:00:00 +0000");
        assert_eq!(format_date(951_782_400), "Tue, 29 Feb 2000 00:00:00 +0000");
        assert_eq!(filetime_to_unix(SUBMITTED), Some(1_704_187_800));
        assert_eq!(filetime_to_unix(u64::MAX), None);
    }

    /// A message whose only body is `rtf`, stored as compressed RTF.
    fn rtf_only(rtf: &[u8]) -> Vec<u8> {
        build(
            &[
                ("/__substg1.0_0037001F", utf16("RTF only")),
                (
                    "/__substg1.0_10090102",
                    crate::lzfu::compress_literally(rtf),
                ),
            ],
            &[],
        )
    }

    const PLAIN_RTF: &[u8] = b"{\\rtf1\\ansi\\ansicpg1252\\deff0{\\fonttbl{\\f0\\fswiss Arial;}}\
\\pard\\plain\\f0\\fs20 Hello from an RTF body.\\par Second paragraph caf\\'e9.\\par}";

    /// Encapsulated HTML as [MS-OXRTFEX] 3.1 writes it: markup in `\*\htmltag` groups, the
    /// RTF-only formatting between `\htmlrtf` and `\htmlrtf0`.
    const HTML_RTF: &[u8] = b"{\\rtf1\\ansi\\ansicpg1252\\fromhtml1 \\deff0{\\fonttbl\r\n\
{\\f0\\fswiss Arial;}}{\\colortbl\\red0\\green0\\blue0;}\r\n{\\*\\htmltag64}\r\n\
\\uc1\\pard\\plain\\deftab360 \\f0\\fs24 \r\n\
{\\*\\htmltag2 <html><head><title>Ignored</title></head><body>\\par <p>}\
{\\htmlrtf \\f0 \\htmlrtf0 Encapsulated {\\*\\htmltag84 <b>}{\\htmlrtf \\b \\htmlrtf0 bold\
{\\*\\htmltag92 </b>}} text \\{x\\} caf\\'e9 \\u8364?{\\*\\htmltag84 &lt;}\\htmlrtf <\\htmlrtf0 \
tag\\htmlrtf\\par\\htmlrtf0}\r\n\
{\\*\\htmltag4 </p>\\par <ul><li>}item one{\\*\\htmltag4 </li></ul></body></html>}}";

    #[test]
    fn a_compressed_rtf_body_is_read_as_rtf() {
        let extraction = run(extract, &rtf_only(PLAIN_RTF), "msg").unwrap();
        let md = &extraction.markdown;
        assert_in_order(
            md,
            &[
                "# RTF only",
                "Hello from an RTF body.",
                "Second paragraph café.",
            ],
        );
        assert!(!md.contains("Arial") && !md.contains('\\'), "{md}");
        assert!(extraction.warnings.is_empty(), "{:?}", extraction.warnings);
    }

    #[test]
    fn html_encapsulated_in_rtf_is_read_as_html() {
        let extraction = run(extract, &rtf_only(HTML_RTF), "msg").unwrap();
        let md = &extraction.markdown;
        assert_in_order(
            md,
            &[
                "# RTF only",
                "Encapsulated **bold** text {x} café €<tag",
                "- item one",
            ],
        );
        assert!(!md.contains("Arial") && !md.contains('?'), "{md}");
    }

    #[test]
    fn de_encapsulation_keeps_markup_and_drops_rtf_only_text() {
        let html = html_from_rtf(HTML_RTF, &Limits::default(), &Control::default())
            .unwrap()
            .unwrap();
        assert!(
            html.contains("<p>Encapsulated <b>bold</b> text {x} café €&lt;tag</p>\r\n<ul>"),
            "{html}"
        );
        assert!(html.contains("<ul><li>item one</li>"), "{html}");
        assert!(!html.contains("Arial") && !html.contains("\\"), "{html}");
        // Not encapsulated HTML: read as RTF.
        let plain = html_from_rtf(PLAIN_RTF, &Limits::default(), &Control::default()).unwrap();
        assert_eq!(plain, None);
        // Deeper than the nesting limit: read as RTF.
        let limits = Limits {
            max_nesting_depth: 2,
            ..Limits::default()
        };
        assert_eq!(
            html_from_rtf(HTML_RTF, &limits, &Control::default()).unwrap(),
            None
        );
    }

    #[test]
    fn the_plain_body_wins_over_the_rtf_body() {
        let bytes = build(
            &[
                ("/__substg1.0_1000001F", utf16("The plain body.")),
                (
                    "/__substg1.0_10090102",
                    crate::lzfu::compress_literally(PLAIN_RTF),
                ),
            ],
            &[],
        );
        let md = run(extract, &bytes, "msg").unwrap().markdown;
        assert!(
            md.contains("The plain body.") && !md.contains("RTF body"),
            "{md}"
        );
    }

    #[test]
    fn a_damaged_rtf_body_is_skipped_with_a_warning() {
        let mut compressed = crate::lzfu::compress_literally(PLAIN_RTF);
        let last = compressed.len() - 1;
        compressed[last] ^= 0xFF;
        let bytes = build(
            &[
                ("/__substg1.0_0037001F", utf16("Damaged")),
                ("/__substg1.0_10090102", compressed),
            ],
            &[],
        );
        let extraction = run(extract, &bytes, "msg").unwrap();
        assert!(extraction.markdown.starts_with("# Damaged"));
        assert!(!extraction.markdown.contains("Hello"));
        assert!(
            extraction
                .warnings
                .iter()
                .any(|w| w.contains("compressed RTF body was skipped") && w.contains("CRC")),
            "{:?}",
            extraction.warnings
        );
    }

    #[test]
    fn an_rtf_body_past_the_read_budget_is_too_complex() {
        // A header announcing 1 GiB of RTF: refused before anything is decompressed.
        let mut compressed = crate::lzfu::compress_literally(PLAIN_RTF);
        compressed[4..8].copy_from_slice(&(1u32 << 30).to_le_bytes());
        let bytes = rtf_only_stream(compressed);
        let err = run(extract, &bytes, "msg").unwrap_err();
        assert_eq!(err.code, "document_too_complex");
        assert!(err.detail.contains("RTF"), "{}", err.detail);
    }

    fn rtf_only_stream(compressed: Vec<u8>) -> Vec<u8> {
        build(&[("/__substg1.0_10090102", compressed)], &[])
    }

    const ALLOWED: &[&str] = &["malformed_document", "document_too_complex"];

    proptest! {
        #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..4096)) {
            never_panics(extract, &bytes, "msg", ALLOWED)?;
        }

        #[test]
        fn damaged_messages_never_panic(
            flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..32),
            cut in 0usize..16_384,
        ) {
            let mut bytes = sample();
            mutate(&mut bytes, &flips, cut);
            never_panics(extract, &bytes, "msg", ALLOWED)?;
        }

        #[test]
        fn damaged_rtf_bodies_never_panic(
            flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..16),
            cut in 0usize..4096,
            html in any::<bool>(),
        ) {
            let mut compressed =
                crate::lzfu::compress_literally(if html { HTML_RTF } else { PLAIN_RTF });
            mutate(&mut compressed, &flips, cut);
            never_panics(extract, &rtf_only_stream(compressed), "msg", ALLOWED)?;
        }

        #[test]
        fn arbitrary_rtf_never_panics(
            rtf in proptest::collection::vec(any::<u8>(), 0..1024),
            html in any::<bool>(),
        ) {
            // The RTF of a sound compressed stream is what the fuzzer controls here, with the
            // `\fromhtml1` header or without.
            let mut body = if html { b"{\\rtf1\\fromhtml1 ".to_vec() } else { Vec::new() };
            body.extend(rtf);
            never_panics(extract, &rtf_only(&body), "msg", ALLOWED)?;
        }
    }
}
