//! Durations in pipeline files: `500ms`, `2s`, `10m`, `1h`, and sums such as `1m30s`.

use std::time::Duration;

pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let expected = || format!("`{text}` is not a duration; write e.g. 500ms, 2s, 10m, 1h or 1m30s");
    let text_trimmed = text.trim();
    if text_trimmed.is_empty() {
        return Err(expected());
    }
    let mut total = Duration::ZERO;
    let mut rest = text_trimmed;
    while !rest.is_empty() {
        let digits = rest.chars().take_while(|c| c.is_ascii_digit()).count();
        if digits == 0 {
            return Err(expected());
        }
        let number: u64 = rest[..digits].parse().map_err(|_| expected())?;
        rest = &rest[digits..];
        let unit_len = rest.chars().take_while(|c| c.is_ascii_alphabetic()).count();
        let unit = &rest[..unit_len];
        rest = &rest[unit_len..];
        let part = match unit {
            "ms" => Duration::from_millis(number),
            "s" => Duration::from_secs(number),
            "m" => Duration::from_secs(number.saturating_mul(60)),
            "h" => Duration::from_secs(number.saturating_mul(3600)),
            _ => return Err(expected()),
        };
        total = total.saturating_add(part);
    }
    Ok(total)
}

pub fn format_duration(d: Duration) -> String {
    let ms = d.as_millis();
    if !ms.is_multiple_of(1000) {
        format!("{ms}ms")
    } else if !ms.is_multiple_of(60_000) || ms == 0 {
        format!("{}s", ms / 1000)
    } else if !ms.is_multiple_of(3_600_000) {
        format!("{}m", ms / 60_000)
    } else {
        format!("{}h", ms / 3_600_000)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_units_and_sums() {
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2s"), Ok(Duration::from_secs(2)));
        assert_eq!(parse_duration("10m"), Ok(Duration::from_secs(600)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_duration("1m30s"), Ok(Duration::from_secs(90)));
    }

    #[test]
    fn refuses_garbage() {
        for bad in [
            "",
            "s",
            "10",
            "10x",
            "-1s",
            "1.5s",
            "99999999999999999999999s",
        ] {
            assert!(parse_duration(bad).is_err(), "{bad} should be refused");
        }
    }

    #[test]
    fn formats_round_trip() {
        for text in ["500ms", "2s", "10m", "1h", "90s"] {
            let d = parse_duration(text).unwrap();
            assert_eq!(parse_duration(&format_duration(d)).unwrap(), d);
        }
    }
}
