//! Database passwords out of every text Shelf shows: [`without_password`] is the one function
//! that `/config`, `shelf migrate`, `db-check --json`, error messages and the log writer pass
//! database URLs and driver errors through.
//!
//! It knows the forms a PostgreSQL password takes: a URL's userinfo
//! (`postgres://u:pw@h/db`), a query parameter (`?password=pw`, `&sslpassword=pw`, any case),
//! a key=value connection string (`host=h password=pw`, `password='p w'`), an environment
//! assignment (`PGPASSWORD=pw`), a field (`"password": "pw"`, `password: Some("pw")`), and each
//! of these percent-encoded inside another URL (`postgres%3A%2F%2Fu%3Apw%40h`). The text is
//! scanned twice, as written and percent-decoded, and everything either pass finds is replaced
//! by `***`: a value's encoded `%26` cannot end it early, and an encoded URL cannot hide one.

use std::ops::Range;

/// What a password is replaced with.
pub const MASK: &str = "***";

/// `text` with every database password in it replaced by [`MASK`]; the rest unchanged.
pub fn without_password(text: &str) -> String {
    let mut ranges = password_ranges(text);
    if ranges.is_empty() {
        return text.to_string();
    }
    ranges.sort_by_key(|r| r.start);
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for range in ranges {
        let start = floor_boundary(text, range.start.max(at));
        let end = ceil_boundary(text, range.end);
        if start >= end {
            continue;
        }
        out.push_str(&text[at..start]);
        out.push_str(MASK);
        at = end;
    }
    out.push_str(&text[at..]);
    out
}

/// The passwords `text` holds (a database URL, say), as written and percent-decoded: the log
/// writer also removes these wherever they appear, in case a driver quotes one alone.
pub fn passwords_in(text: &str) -> Vec<String> {
    let mut passwords = Vec::new();
    for range in password_ranges(text) {
        let start = floor_boundary(text, range.start);
        let end = ceil_boundary(text, range.end);
        let Some(written) = text.get(start..end) else {
            continue;
        };
        let (decoded, _) = percent_decoded(written.as_bytes());
        if let Ok(decoded) = String::from_utf8(decoded)
            && decoded != written
        {
            passwords.push(decoded);
        }
        passwords.push(written.to_string());
    }
    passwords.sort();
    passwords.dedup();
    passwords
}

/// The byte ranges of `text`'s passwords, found as written and percent-decoded (overlapping).
fn password_ranges(text: &str) -> Vec<Range<usize>> {
    let mut ranges = found(text.as_bytes());
    if text.contains('%') {
        let (decoded, spans) = percent_decoded(text.as_bytes());
        ranges.extend(found(&decoded).into_iter().filter_map(|r| {
            let start = spans.get(r.start)?.start;
            let end = spans.get(r.end.checked_sub(1)?)?.end;
            Some(start..end)
        }));
    }
    ranges
}

fn floor_boundary(text: &str, mut i: usize) -> usize {
    while i > 0 && !text.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn ceil_boundary(text: &str, mut i: usize) -> usize {
    while i < text.len() && !text.is_char_boundary(i) {
        i += 1;
    }
    i.min(text.len())
}

/// `bytes` with `%XX` decoded, and for each decoded byte the range of `bytes` it came from.
fn percent_decoded(bytes: &[u8]) -> (Vec<u8>, Vec<Range<usize>>) {
    let hex = |b: u8| (b as char).to_digit(16);
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut spans = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let pair = bytes
            .get(i + 1..i + 3)
            .and_then(|p| Some(hex(p[0])? * 16 + hex(p[1])?));
        match (bytes[i], pair) {
            (b'%', Some(value)) => {
                decoded.push(value as u8);
                spans.push(i..i + 3);
                i += 3;
            }
            (b, _) => {
                decoded.push(b);
                spans.push(i..i + 1);
                i += 1;
            }
        }
    }
    (decoded, spans)
}

/// Whether a URL or connection-string value ends at `bytes[i]`, whatever the form: white space,
/// and quotes (also `\"`, inside a JSON string) and angle brackets that close the text around
/// it (JSON, logs, Debug output).
fn ends_text(bytes: &[u8], i: usize) -> bool {
    match bytes[i] {
        b'\\' => matches!(bytes.get(i + 1), Some(b'"' | b'\'')),
        b => b.is_ascii_whitespace() || matches!(b, b'"' | b'\'' | b'`' | b'<' | b'>'),
    }
}

/// The first index from `start` where [`ends_text`] holds, else the end.
fn text_end(bytes: &[u8], start: usize, also: impl Fn(u8) -> bool) -> usize {
    (start..bytes.len())
        .find(|&i| ends_text(bytes, i) || also(bytes[i]))
        .unwrap_or(bytes.len())
}

/// The byte ranges of the passwords in `bytes`.
fn found(bytes: &[u8]) -> Vec<Range<usize>> {
    let lower = bytes.to_ascii_lowercase();
    let mut ranges = userinfo_passwords(bytes);
    ranges.extend(assigned_passwords(bytes, &lower));
    ranges
}

/// `scheme://user:PASSWORD@host`: the userinfo ends at the last `@` before the first `/`, `?`
/// or `#` that follows an `@`, so a password holding any of those (unencoded) is still found.
fn userinfo_passwords(bytes: &[u8]) -> Vec<Range<usize>> {
    let mut ranges = Vec::new();
    let mut from = 0;
    while let Some(found) = find(&bytes[from..], b"://") {
        let start = from + found + 3;
        from = start;
        let token_end = text_end(bytes, start, |_| false);
        let token = &bytes[start..token_end];
        let Some(first_at) = token.iter().position(|&b| b == b'@') else {
            continue;
        };
        let authority_end = token[first_at..]
            .iter()
            .position(|b| matches!(b, b'/' | b'?' | b'#'))
            .map_or(token.len(), |i| first_at + i);
        let Some(last_at) = token[..authority_end].iter().rposition(|&b| b == b'@') else {
            continue;
        };
        if let Some(colon) = token[..last_at].iter().position(|&b| b == b':')
            && colon + 1 < last_at
        {
            ranges.push(start + colon + 1..start + last_at);
        }
    }
    ranges
}

/// The keys whose value is a password: any key ending in `password` (`sslpassword`,
/// `PGPASSWORD`, `db_password`), and exactly `passwd` or `pwd`.
const SUFFIX_KEY: &[u8] = b"password";
const WHOLE_KEYS: [&[u8]; 2] = [b"passwd", b"pwd"];

fn is_key_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.')
}

/// `KEY=VALUE`, `KEY: VALUE`, `"KEY": "VALUE"`, `KEY: Some("VALUE")` for the password keys. In a
/// URL's query (the key follows `?`, `&` or `;`) the value ends at `&` or `#`; in a key=value
/// string at white space; a quoted value at its closing quote (libpq's `\'` escapes kept).
fn assigned_passwords(bytes: &[u8], lower: &[u8]) -> Vec<Range<usize>> {
    let mut ranges = Vec::new();
    let keys = std::iter::once(SUFFIX_KEY).chain(WHOLE_KEYS);
    for key in keys {
        let mut from = 0;
        while let Some(found) = find(&lower[from..], key) {
            let key_start = from + found;
            let key_end = key_start + key.len();
            from = key_end;
            // The key must end here: `passwords are` is no assignment.
            if bytes.get(key_end).is_some_and(|&b| is_key_byte(b)) {
                continue;
            }
            let name_start = bytes[..key_start]
                .iter()
                .rposition(|&b| !is_key_byte(b))
                .map_or(0, |i| i + 1);
            if key != SUFFIX_KEY && name_start != key_start {
                continue;
            }
            let in_query = name_start
                .checked_sub(1)
                .is_some_and(|i| matches!(bytes[i], b'?' | b'&' | b';'));
            if let Some(value) = value_after(bytes, key_end, in_query) {
                ranges.push(value);
            }
        }
    }
    ranges
}

/// The value assigned after a key ending at `at`, if an assignment follows.
fn value_after(bytes: &[u8], mut at: usize, in_query: bool) -> Option<Range<usize>> {
    let skip_spaces = |mut i: usize| {
        while bytes.get(i).is_some_and(|b| *b == b' ' || *b == b'\t') {
            i += 1;
        }
        i
    };
    // A quoted key: `"password": ...`, or `\"password\": ...` inside a JSON string.
    if bytes.get(at) == Some(&b'\\') && matches!(bytes.get(at + 1), Some(b'"' | b'\'')) {
        at += 2;
    } else if matches!(bytes.get(at), Some(b'"' | b'\'')) {
        at += 1;
    }
    at = skip_spaces(at);
    if !matches!(bytes.get(at), Some(b'=' | b':')) {
        return None;
    }
    at = skip_spaces(at + 1);
    if bytes[at..].starts_with(b"Some(") {
        at += 5;
    }
    let escaped_quote = bytes.get(at) == Some(&b'\\') && matches!(bytes.get(at + 1), Some(b'"'));
    if escaped_quote {
        // `\"VALUE\"`: a JSON string inside a JSON string ends at the next `\"`.
        let start = at + 2;
        let end = find(&bytes[start..], b"\\\"").map_or(bytes.len(), |i| start + i);
        return (start < end).then_some(start..end);
    }
    if let Some(&quote @ (b'"' | b'\'')) = bytes.get(at) {
        let start = at + 1;
        let mut i = start;
        while i < bytes.len() && bytes[i] != quote {
            i += if bytes[i] == b'\\' { 2 } else { 1 };
        }
        let end = i.min(bytes.len());
        return (start < end).then_some(start..end);
    }
    let start = at;
    let end = text_end(bytes, start, |b| in_query && matches!(b, b'&' | b'#'));
    (start < end).then_some(start..end)
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn every_form_loses_its_password_and_keeps_the_rest() {
        let cases = [
            (
                "postgres://shelf:hunter2@db.example:5432/shelf?sslmode=require",
                "postgres://shelf:***@db.example:5432/shelf?sslmode=require",
            ),
            (
                "postgres://u@127.0.0.1:1/db?password=SECRETX",
                "postgres://u@127.0.0.1:1/db?password=***",
            ),
            (
                "postgresql://u@h/db?sslmode=require&PassWord=SECRETX&application_name=a",
                "postgresql://u@h/db?sslmode=require&PassWord=***&application_name=a",
            ),
            (
                "postgres://u@h/db?sslpassword=SECRETX",
                "postgres://u@h/db?sslpassword=***",
            ),
            (
                "host=db port=5432 password=SECRETX dbname=shelf",
                "host=db port=5432 password=*** dbname=shelf",
            ),
            (
                r"host=db password='SECRET X\'s' user=u",
                r"host=db password='***' user=u",
            ),
            ("PGPASSWORD=SECRETX psql", "PGPASSWORD=*** psql"),
            (
                r#"{"database_url":"postgres://u:SECRETX@h/db","n":1}"#,
                r#"{"database_url":"postgres://u:***@h/db","n":1}"#,
            ),
            (
                r#"PgConnectOptions { password: Some("SECRETX"), port: 5432 }"#,
                r#"PgConnectOptions { password: Some("***"), port: 5432 }"#,
            ),
            ("postgres://u:p%40ss%2Fw@h/db", "postgres://u:***@h/db"),
            ("postgres://u:pa/ss?w@rd@h/db", "postgres://u:***@h/db"),
            (
                "postgres://u@h/db?password=SEC%26RET&x=1",
                "postgres://u@h/db?password=***&x=1",
            ),
            (
                "see ?url=postgres%3A%2F%2Fu%3ASECRETX%40h%2Fdb%3Fpassword%3DOTHERX%26x%3D1 end",
                "see ?url=postgres%3A%2F%2Fu%3A***%40h%2Fdb%3Fpassword%3D***%26x%3D1 end",
            ),
            (
                r#"{"msg":"connect to \"postgres://u@h/db?password=SECRETX\" failed"}"#,
                r#"{"msg":"connect to \"postgres://u@h/db?password=***\" failed"}"#,
            ),
            (
                r#"{"fields":"{\"password\":\"SECRETX\"}"}"#,
                r#"{"fields":"{\"password\":\"***\"}"}"#,
            ),
            (
                "Driver={PG};Server=h;Pwd=SECRETX;",
                "Driver={PG};Server=h;Pwd=***",
            ),
        ];
        for (input, expected) in cases {
            assert_eq!(without_password(input), expected, "input: {input}");
        }
    }

    #[test]
    fn the_passwords_of_a_url_are_listed_as_written_and_decoded() {
        assert_eq!(
            passwords_in("postgres://u:p%40ss@h/db?password=SECRETX"),
            ["SECRETX", "p%40ss", "p@ss"]
        );
        assert!(passwords_in("postgres://u@h/db").is_empty());
    }

    #[test]
    fn texts_without_a_password_pass_unchanged() {
        for text in [
            "postgres://shelf@db.example:5432/shelf?sslmode=require",
            "postgres://db.example/shelf",
            "/var/lib/shelf/shelf.sqlite",
            "password authentication failed for user \"shelf\"",
            "passwords are never logged; keys=3",
            "sqlite://shelf.sqlite?mode=rw",
            "100% done, 50%3 left",
            "user@example.com wrote: hello",
        ] {
            assert_eq!(without_password(text), text);
        }
    }

    /// A password: anything a user may put in one but a character that ends a value in its
    /// form (a test of the form, not of a broken URL) or the mask's; it starts with `Zq`, which
    /// no name around it has, so any `Zq` left is the secret's.
    fn password() -> impl Strategy<Value = String> {
        "Zq[A-Za-z0-9!$()+,.:;=~_-]{2,24}"
    }

    fn percent_encoded(text: &str) -> String {
        text.bytes()
            .map(|b| {
                if b.is_ascii_alphanumeric() {
                    (b as char).to_string()
                } else {
                    format!("%{b:02X}")
                }
            })
            .collect()
    }

    proptest! {
        #[test]
        fn no_form_lets_the_password_through(
            secret in password(),
            user in "[a-z]{1,8}",
            host in "[a-z]{1,8}(\\.[a-z]{2,5})?(:[0-9]{1,5})?",
            key in prop::sample::select(vec!["password", "PASSWORD", "Password", "sslpassword", "SSLPassword"]),
            form in 0usize..8,
            before in "[ -~]{0,20}",
            after in "[ -~]{0,20}",
            quote in prop::sample::select(vec![" ", "\"", "'", "(", "\t"]),
        ) {
            // In a query the secret's own `&`, `#` would end it: encode those as a client must.
            let in_query = secret.replace('&', "%26").replace('#', "%23");
            let url = match form {
                0 => format!("postgres://{user}:{secret}@{host}/db"),
                1 => format!("postgres://{user}@{host}/db?{key}={in_query}"),
                2 => format!("postgresql://{user}@{host}/db?sslmode=require&{key}={in_query}&x=1"),
                3 => format!("host={host} {key}={secret} dbname=db"),
                4 => format!("host={host} {key}='{}' dbname=db", secret.replace('\'', "\\'")),
                5 => format!("PGPASSWORD={secret}"),
                6 => format!("postgres://{user}:{}@{host}/db", percent_encoded(&secret)),
                _ => format!("url={}", percent_encoded(&format!("postgres://{user}:{secret}@{host}/db?{key}={secret}"))),
            };
            let line = format!("{before}{quote}{url}{quote}{after}");
            let out = without_password(&line);
            // The secret may occur by chance in the random text around it; count only ours.
            let allowed = before.matches("Zq").count() + after.matches("Zq").count();
            let encoded = percent_encoded(&secret);
            prop_assert!(out.matches("Zq").count() <= allowed, "{line:?} -> {out:?}");
            if form >= 6 && encoded != secret {
                prop_assert!(!out.contains(&encoded), "{line:?} -> {out:?}");
            }
        }
    }
}
