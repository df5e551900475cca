//! What a push may do: the ref-update commands at the start of a `git-receive-pack` request
//! (pkt-lines up to the flush packet, before the pack) are read and checked before anything
//! reaches the forge. A run's token may create or update `refs/heads/handoff/<runId>` — no
//! other branch, no tag, no delete, no shallow or signed push.

use crate::error::{Error, ErrorKind, Result};

/// The command section is never longer than this (one update is ~150 bytes).
pub const MAX_COMMANDS_BYTES: usize = 64 * 1024;

/// One ref update a push asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefUpdate {
    pub old: String,
    pub new: String,
    pub name: String,
}

fn refused(message: impl Into<String>) -> Error {
    Error::new(ErrorKind::Forbidden, message)
}

fn is_oid(s: &str) -> bool {
    (s.len() == 40 || s.len() == 64) && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Parses the command section at the start of `buf`: the updates and the bytes they take, or
/// `None` when the flush packet has not arrived yet.
pub fn parse(buf: &[u8]) -> Result<Option<(Vec<RefUpdate>, usize)>> {
    let mut at = 0;
    let mut updates = Vec::new();
    loop {
        let Some(len) = buf.get(at..at + 4) else {
            return Ok(None);
        };
        let len = std::str::from_utf8(len)
            .ok()
            .and_then(|h| usize::from_str_radix(h, 16).ok())
            .ok_or_else(|| refused("the push does not start with git pkt-lines"))?;
        if len == 0 {
            return Ok(Some((updates, at + 4)));
        }
        if len < 4 {
            return Err(refused("the push has a malformed pkt-line"));
        }
        let Some(line) = buf.get(at + 4..at + len) else {
            return Ok(None);
        };
        at += len;
        let line =
            std::str::from_utf8(line).map_err(|_| refused("the push's commands are not text"))?;
        // The first command carries the capabilities after a NUL.
        let command = line
            .split('\0')
            .next()
            .unwrap_or_default()
            .trim_end_matches('\n');
        let mut fields = command.split(' ');
        let update = match (fields.next(), fields.next(), fields.next(), fields.next()) {
            (Some(old), Some(new), Some(name), None) if is_oid(old) && is_oid(new) => RefUpdate {
                old: old.to_string(),
                new: new.to_string(),
                name: name.to_string(),
            },
            _ => {
                return Err(refused(
                    "only plain ref updates may be pushed (no shallow, signed or option lines)",
                ))
            }
        };
        updates.push(update);
    }
}

/// Checks that `updates` only create or move the run's own branch.
pub fn check(updates: &[RefUpdate], run_id: &str) -> Result<()> {
    let allowed = format!("refs/heads/handoff/{run_id}");
    if updates.is_empty() {
        return Err(refused("the push updates no ref"));
    }
    for update in updates {
        if update.name != allowed {
            return Err(refused(format!(
                "this run may push only {allowed}, not {}",
                update.name
            )));
        }
        if update.new.bytes().all(|b| b == b'0') {
            return Err(refused(format!("this run may not delete {allowed}")));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pkt(line: &str) -> String {
        format!("{:04x}{line}", line.len() + 4)
    }

    const A: &str = "1111111111111111111111111111111111111111";
    const B: &str = "2222222222222222222222222222222222222222";
    const Z: &str = "0000000000000000000000000000000000000000";

    #[test]
    fn the_runs_own_branch_passes_and_nothing_else() {
        let body = format!(
            "{}0000PACK...",
            pkt(&format!(
                "{Z} {B} refs/heads/handoff/run_x\0report-status side-band-64k\n"
            ))
        );
        let (updates, used) = parse(body.as_bytes()).unwrap().unwrap();
        assert_eq!(&body[used..], "PACK...");
        assert!(check(&updates, "run_x").is_ok());
        assert!(check(&updates, "run_y").is_err());
        for line in [
            format!("{A} {B} refs/heads/main\0caps\n"),
            format!("{A} {B} refs/tags/handoff/run_x\0caps\n"),
            format!("{A} {Z} refs/heads/handoff/run_x\0caps\n"),
            format!("{A} {B} refs/heads/handoff/run_x/../main\0caps\n"),
        ] {
            let (updates, _) = parse(format!("{}0000", pkt(&line)).as_bytes())
                .unwrap()
                .unwrap();
            assert!(check(&updates, "run_x").is_err(), "{line}");
        }
        let two = format!(
            "{}{}0000",
            pkt(&format!("{A} {B} refs/heads/handoff/run_x\0caps\n")),
            pkt(&format!("{A} {B} refs/heads/main\n"))
        );
        let (updates, _) = parse(two.as_bytes()).unwrap().unwrap();
        assert!(
            check(&updates, "run_x").is_err(),
            "a second ref rides along"
        );
    }

    #[test]
    fn malformed_and_incomplete_sections() {
        assert!(parse(b"00").unwrap().is_none());
        assert!(parse(pkt("abc").as_bytes()).is_err());
        assert!(parse(b"zzzz").is_err());
        assert!(parse(b"0002").is_err());
        let shallow = format!("{}0000", pkt(&format!("shallow {A}\n")));
        assert!(parse(shallow.as_bytes()).is_err());
        let partial = pkt(&format!("{A} {B} refs/heads/handoff/run_x\0caps\n"));
        assert!(parse(&partial.as_bytes()[..20]).unwrap().is_none());
        assert!(parse(partial.as_bytes()).unwrap().is_none(), "no flush yet");
    }
}
