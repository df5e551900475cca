//! Wall-clock time as milliseconds since the Unix epoch, and RFC 3339 formatting for the wire.

/// Milliseconds since the Unix epoch. (Inside workerd the clock advances only across I/O.)
pub fn now_ms() -> i64 {
    #[cfg(target_arch = "wasm32")]
    {
        worker::Date::now().as_millis() as i64
    }
    #[cfg(not(target_arch = "wasm32"))]
    {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .unwrap_or(0)
    }
}

/// `first_ms`, doubled with each of `failures`, at most `cap_ms` (never below `first_ms`).
pub fn backoff_ms(first_ms: i64, failures: u32, cap_ms: i64) -> i64 {
    first_ms
        .saturating_mul(1 << failures.min(20))
        .clamp(1, cap_ms.max(first_ms))
}

/// A Durable Object alarm is set as an offset from now; this turns an absolute time into one.
pub fn alarm_offset(at_ms: i64) -> i64 {
    (at_ms - now_ms()).max(0)
}

/// Formats epoch milliseconds as RFC 3339 UTC with millisecond precision,
/// e.g. `2026-11-29T17:41:09.123Z`.
pub fn rfc3339(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let millis = ms.rem_euclid(1000);
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{millis:03}Z",
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60
    )
}

/// Days since 1970-01-01 to a proleptic Gregorian (year, month, day) — Howard Hinnant's algorithm.
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_known_instants() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(951_782_400_000), "2000-02-29T00:00:00.000Z");
        assert_eq!(rfc3339(1_795_974_069_123), "2026-11-29T17:41:09.123Z");
    }
}
