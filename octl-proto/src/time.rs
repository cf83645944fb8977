//! RFC 3339 UTC timestamps with millisecond precision (`2026-11-30T10:00:00.123Z`).
//! Written by hand: two small calendar conversions do not justify a date crate.

/// Formats milliseconds since the Unix epoch as `YYYY-MM-DDTHH:MM:SS.mmmZ`.
pub fn format_millis(unix_ms: u64) -> String {
    let secs = unix_ms / 1000;
    let ms = unix_ms % 1000;
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{ms:03}Z",
        rem / 3600,
        (rem / 60) % 60,
        rem % 60
    )
}

/// Parses what [`format_millis`] writes (also accepts no fraction). `None` for anything else.
pub fn parse_millis(s: &str) -> Option<u64> {
    let s = s.strip_suffix('Z')?;
    let (date, time) = s.split_once('T')?;
    let mut dp = date.splitn(3, '-');
    let y: i64 = dp.next()?.parse().ok()?;
    let m: u32 = dp.next()?.parse().ok()?;
    let d: u32 = dp.next()?.parse().ok()?;
    let (hms, frac) = match time.split_once('.') {
        Some((hms, frac)) => (hms, frac),
        None => (time, "0"),
    };
    let mut tp = hms.splitn(3, ':');
    let h: u64 = tp.next()?.parse().ok()?;
    let mi: u64 = tp.next()?.parse().ok()?;
    let se: u64 = tp.next()?.parse().ok()?;
    if !(1..=12).contains(&m) || !(1..=31).contains(&d) || h > 23 || mi > 59 || se > 60 {
        return None;
    }
    let frac3: String = frac.chars().chain("000".chars()).take(3).collect();
    let ms: u64 = frac3.parse().ok()?;
    let days = days_from_civil(y, m, d);
    if days < 0 {
        return None;
    }
    Some(((days as u64) * 86_400 + h * 3600 + mi * 60 + se) * 1000 + ms)
}

// Howard Hinnant's algorithms (public domain), proleptic Gregorian calendar.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// Parses an age such as `7d`, `12h`, `30m` or `45s` (a whole number and one unit) into
/// milliseconds; the error names `field` and the accepted form.
pub fn parse_age(field: &str, s: &str) -> Result<u64, crate::AppError> {
    let bad = || {
        crate::AppError::invalid(format!(
            "invalid {field} {s:?}: give a whole number and a unit, d, h, m or s (e.g. 7d, 12h, 30m)"
        ))
    };
    let unit = s.chars().last().ok_or_else(bad)?;
    let ms: u64 = match unit {
        'd' => 86_400_000,
        'h' => 3_600_000,
        'm' => 60_000,
        's' => 1000,
        _ => return Err(bad()),
    };
    let n = &s[..s.len() - 1];
    if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    n.parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(ms))
        .ok_or_else(bad)
}

fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let m = m as i64;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + d as i64 - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_instants() {
        assert_eq!(format_millis(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(format_millis(951_782_400_123), "2000-02-29T00:00:00.123Z");
        assert_eq!(format_millis(1_796_032_800_001), "2026-11-30T10:00:00.001Z");
    }

    #[test]
    fn round_trip() {
        for ms in [
            0u64,
            1,
            86_399_999,
            951_782_400_123,
            1_796_032_800_001,
            4_102_444_800_000,
        ] {
            assert_eq!(parse_millis(&format_millis(ms)), Some(ms));
        }
        assert_eq!(
            parse_millis("2026-11-30T10:00:00Z"),
            Some(1_796_032_800_000)
        );
        assert_eq!(parse_millis("2026-13-01T00:00:00Z"), None);
        assert_eq!(parse_millis("yesterday"), None);
    }

    #[test]
    fn ages() {
        assert_eq!(parse_age("f", "7d").unwrap(), 7 * 86_400_000);
        assert_eq!(parse_age("f", "12h").unwrap(), 12 * 3_600_000);
        assert_eq!(parse_age("f", "30m").unwrap(), 1_800_000);
        assert_eq!(parse_age("f", "0s").unwrap(), 0);
        for bad in [
            "",
            "7",
            "d",
            "-1d",
            "1.5h",
            "7 d",
            "7D",
            "1w",
            "99999999999999999999d",
        ] {
            let e = parse_age("--older-than", bad).unwrap_err();
            assert!(e.message.contains("--older-than"), "{bad:?}: {}", e.message);
        }
    }
}
