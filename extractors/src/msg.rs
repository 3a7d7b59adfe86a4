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
//! total). The body is the plain-text body, else the HTML body through [`crate::html`];
//! the compressed RTF body (`PR_RTF_COMPRESSED`) alone is not read.

use std::io::{Cursor, Read};

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
            attachments,
        })
    }

    fn render(
        &mut self,
        writer: &mut Output,
        msg: &Msg,
        level: usize,
        depth: usize,
    ) -> Result<(), ExtractError> {
        self.control.check()?;
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
        }
        self.attachments(writer, msg, level, depth)
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
    }
}
