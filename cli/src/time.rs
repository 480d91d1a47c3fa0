//! Times on the command line: read as milliseconds since the epoch or RFC 3339 (`consume
//! --from-timestamp`, `groups reset-offsets --to-datetime`), shown as RFC 3339 in UTC.

/// Milliseconds since the epoch, or an RFC 3339 time (`YYYY-MM-DDTHH:MM:SS[.frac]` then
/// `Z` or `±HH:MM`) as milliseconds since the epoch; times before 1970 are refused.
pub fn parse_time(text: &str) -> Result<u64, String> {
    if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
        return text.parse().map_err(|e| format!("{e}"));
    }
    parse_rfc3339(text).ok_or_else(|| {
        format!(
            "expected milliseconds since the epoch or an RFC 3339 time such as \
             2026-12-03T10:00:00Z, got '{text}'"
        )
    })
}

fn parse_rfc3339(text: &str) -> Option<u64> {
    let b = text.as_bytes();
    let num = |range: std::ops::Range<usize>| num_of(text.get(range)?);
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't' | b' ') {
        return None;
    }
    if b[13] != b':' || b[16] != b':' {
        return None;
    }
    let (year, month, day) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hour, minute, second) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&month) || day < 1 || day > days_in_month(year, month) {
        return None;
    }
    if hour > 23 || minute > 59 || second > 60 {
        return None;
    }
    let mut rest = &text[19..];
    let mut millis = 0;
    if let Some(fraction) = rest.strip_prefix('.') {
        let digits = fraction.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return None;
        }
        let padded = format!("{:0<3}", &fraction[..digits.min(3)]);
        millis = padded.parse::<i64>().ok()?;
        rest = &fraction[digits..];
    }
    let offset_minutes = match rest {
        "Z" | "z" => 0,
        _ if rest.len() == 6 && rest.as_bytes()[3] == b':' => {
            let sign = match rest.as_bytes()[0] {
                b'+' => 1,
                b'-' => -1,
                _ => return None,
            };
            let (h, m) = (num_of(rest.get(1..3)?)?, num_of(rest.get(4..6)?)?);
            if h > 23 || m > 59 {
                return None;
            }
            sign * (h * 60 + m)
        }
        _ => return None,
    };
    let days = days_from_civil(year, month, day);
    let seconds = days * 86_400 + hour * 3600 + minute * 60 + second - offset_minutes * 60;
    u64::try_from(seconds * 1000 + millis).ok()
}

fn num_of(digits: &str) -> Option<i64> {
    digits
        .bytes()
        .all(|c| c.is_ascii_digit())
        .then(|| digits.parse().ok())?
}

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        2 if (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// `ms` (since the epoch) as RFC 3339 in UTC, to the millisecond: `2023-11-14T22:13:20.123Z`.
pub fn format_time(ms: u64) -> String {
    let (days, in_day) = (ms / 86_400_000, ms % 86_400_000);
    let (year, month, day) = civil_from_days(days as i64);
    let (hour, minute) = (in_day / 3_600_000, in_day / 60_000 % 60);
    let (second, millis) = (in_day / 1000 % 60, in_day % 1000);
    format!("{year:04}-{month:02}-{day:02}T{hour:02}:{minute:02}:{second:02}.{millis:03}Z")
}

/// The proleptic Gregorian date `days` after 1970-01-01 (Howard Hinnant's
/// `civil_from_days`, the inverse of [`days_from_civil`]).
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z - era * 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let shifted_month = (5 * day_of_year + 2) / 153; // March is 0
    let day = day_of_year - (153 * shifted_month + 2) / 5 + 1;
    let month = if shifted_month < 10 {
        shifted_month + 3
    } else {
        shifted_month - 9
    };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// Days from 1970-01-01 to a proleptic Gregorian date (Howard Hinnant's `days_from_civil`).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let shifted_month = (month + 9) % 12; // March is 0
    let day_of_year = (153 * shifted_month + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

#[cfg(test)]
mod tests {
    use super::{format_time, parse_time};

    #[test]
    fn times_format_as_rfc_3339_in_utc_and_parse_back() {
        assert_eq!(format_time(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(format_time(1_700_000_000_123), "2023-11-14T22:13:20.123Z");
        assert_eq!(format_time(1_709_164_800_000), "2024-02-29T00:00:00.000Z");
        assert_eq!(format_time(951_868_799_999), "2000-02-29T23:59:59.999Z");
        for ms in [
            1,
            86_399_999,
            1_001_000,
            4_102_444_800_000,
            253_402_300_799_999,
        ] {
            assert_eq!(parse_time(&format_time(ms)), Ok(ms), "{ms}");
        }
    }

    #[test]
    fn times_parse_as_epoch_milliseconds() {
        assert_eq!(parse_time("1700000000123"), Ok(1_700_000_000_123));
        assert_eq!(parse_time("1970-01-01T00:00:00Z"), Ok(0));
        assert_eq!(parse_time("2023-11-14T22:13:20Z"), Ok(1_700_000_000_000));
        assert_eq!(parse_time("2023-11-14T22:13:20.5Z"), Ok(1_700_000_000_500));
        assert_eq!(
            parse_time("2023-11-15T00:13:20.123+02:00"),
            Ok(1_700_000_000_123)
        );
        assert_eq!(parse_time("2024-02-29T00:00:00Z"), Ok(1_709_164_800_000));
    }

    #[test]
    fn bad_times_are_refused() {
        for bad in [
            "",
            "yesterday",
            "2023-02-29T00:00:00Z",
            "2023-11-14T25:00:00Z",
            "2023-11-14T22:13:20",
            "2023-11-14T22:13:20+0200",
            "1969-12-31T23:59:59Z",
            "-5",
        ] {
            assert!(parse_time(bad).is_err(), "{bad}");
        }
    }
}
