//! The fuzz targets: every parser in the Worker that reads outside input. Each must end (no
//! panic, no hang) on anything, and what it accepts must keep the parser's promise.

use super::{bytes, fuzz, hostile_text, json};
use proptest::prelude::*;
use serde_json::Value;

#[test]
fn fuzz_jsonrpc_envelope() {
    let input = prop_oneof![
        json(),
        bytes(512).prop_map(|b| serde_json::from_slice(&b).unwrap_or(Value::Null)),
    ];
    fuzz("jsonrpc_envelope", input, |value| {
        let text = value.to_string();
        if let Ok(crate::mcp::jsonrpc::Message::Request { method, .. }) =
            crate::mcp::jsonrpc::classify(value)
        {
            // A request names its method as the client sent it (as it appears, escaped, in
            // the message's JSON).
            let quoted = serde_json::to_string(&method).unwrap_or_default();
            prop_assert!(text.contains(quoted.trim_matches('"')), "{method:?}");
        }
        Ok(())
    });
}

const URL_PIECES: &[&str] = &[
    "https://",
    "http://",
    "github.com",
    "/",
    "..",
    ".",
    ".git",
    "acme",
    "repo",
    "%2e",
    "%2F",
    "@",
    ":",
    "?",
    "#",
    "\\",
    " ",
    "\n",
    "\0",
    "-",
    "_",
    "~",
    "ftp://",
    "//",
    "github.com.evil",
];

#[test]
fn fuzz_repository_urls() {
    fuzz("repository_urls", hostile_text(URL_PIECES), |url| {
        let normalized = crate::repository::normalize(&url);
        if let Ok((owner, name)) = crate::repository::split(&url, "https://github.com") {
            for part in [&owner, &name] {
                let plain = |c: char| c.is_ascii_alphanumeric() || "._-".contains(c);
                prop_assert!(!part.is_empty() && part.chars().all(plain), "{part:?}");
                prop_assert!(part != "." && part != "..", "{part:?}");
            }
            prop_assert!(url.starts_with("https://github.com/"), "{url:?}");
            prop_assert!(normalized.len() <= url.len() + 4);
        }
        Ok(())
    });
}

#[test]
fn fuzz_branch_names() {
    let pieces = &[
        "main",
        "feature",
        "/",
        "..",
        ".",
        "-",
        "_",
        ".lock",
        "@{",
        "~",
        "^",
        ":",
        "?",
        "*",
        "[",
        "\\",
        " ",
        "\n",
        "refs/heads/",
        "HEAD",
        "-rf",
        "$(id)",
        "`id`",
        "a",
        "0",
    ];
    fuzz("branch_names", hostile_text(pieces), |name| {
        if handoff_wire::is_safe_branch(&name) {
            // What handoff accepts, git accepts too, and no command line reads it as an option.
            prop_assert!(!name.starts_with('-'));
            let git = std::process::Command::new("git")
                .args(["check-ref-format", &format!("refs/heads/{name}")])
                .status();
            prop_assert!(git.is_ok_and(|s| s.success()), "git refuses {name:?}");
        }
        Ok(())
    });
}

#[test]
fn fuzz_receive_pack_commands() {
    let pkt = |line: String| format!("{:04x}{line}", line.len() + 4);
    let sha = "[0-9a-f]{40}";
    let line = (
        sha,
        sha,
        hostile_text(&["refs/heads/", "handoff/run_1", "\0", " ", "report-status"]),
    )
        .prop_map(move |(old, new, name)| pkt(format!("{old} {new} {name}\n")));
    let structured = proptest::collection::vec(line, 0..4).prop_map(|lines| {
        let mut text = lines.concat();
        text.push_str("0000PACK");
        text.into_bytes()
    });
    let input = prop_oneof![structured, bytes(300)];
    fuzz("receive_pack_commands", input, |buf| {
        if let Ok(Some((updates, used))) = crate::proxy::receive_pack::parse(&buf) {
            prop_assert!(used <= buf.len());
            for u in updates {
                prop_assert!(u.old.len() == 40 && u.new.len() == 40, "{u:?}");
                prop_assert!(!u.name.contains('\0') && !u.name.contains(' '), "{u:?}");
            }
        }
        Ok(())
    });
}

#[test]
fn fuzz_jwts() {
    let key = b"fuzz-key-0123456789abcdef0123456789";
    let expect = crate::jwt::Expect {
        audience: "handoff:fuzz",
        issuer: None,
    };
    let valid = crate::jwt::sign(
        key,
        &serde_json::json!({"aud": "handoff:fuzz", "exp": 4_000_000_000u64, "sub": "x"}),
    )
    .unwrap_or_default();
    let tampered = (0..valid.len(), any::<u8>()).prop_map({
        let valid = valid.clone();
        move |(at, byte)| {
            let mut b = valid.clone().into_bytes();
            b[at] = b'!'.max(byte % 127);
            String::from_utf8_lossy(&b).into_owned()
        }
    });
    let input = prop_oneof![
        tampered,
        hostile_text(&["eyJ", ".", "alg", "none", "HS256", "=", "-", "_"]),
    ];
    fuzz("jwts", input, |token| {
        let verified = crate::jwt::verify::<Value>(key, &token, &expect);
        // Only the token this key signed verifies (a changed byte may still decode the same).
        if verified.is_ok() {
            prop_assert!(
                token.split('.').nth(2) == valid.split('.').nth(2),
                "a forged token verified: {token:?}"
            );
        }
        Ok(())
    });
}

#[test]
fn fuzz_cookies() {
    let pieces = &[
        "handoff_owner",
        "handoff_owner_x",
        "xhandoff_owner",
        "handoff_csrf",
        "=",
        ";",
        " ",
        "\t",
        ",",
        "\"",
        "%3B",
        "eyJ.x.y",
    ];
    fuzz("cookies", hostile_text(pieces), |header| {
        for name in ["handoff_owner", "handoff_csrf"] {
            let Some(value) = crate::cookies::find(&header, name) else {
                continue;
            };
            // Only a pair named exactly `name` is read, whole, and never across a `;`.
            prop_assert!(!value.is_empty() && !value.contains(';'), "{header:?}");
            prop_assert_eq!(value, value.trim());
            let named = header.split(';').any(|pair| {
                pair.trim()
                    .split_once('=')
                    .is_some_and(|(k, v)| k.trim() == name && v.trim() == value)
            });
            prop_assert!(named, "{name} read as {value:?} from {header:?}");
        }
        Ok(())
    });
}

#[test]
fn fuzz_oauth_form_parameters() {
    let input = prop_oneof![
        bytes(400),
        hostile_text(&[
            "client_id=",
            "&",
            "=",
            "%",
            "%00",
            "+",
            "redirect_uri",
            "code",
            "x"
        ])
        .prop_map(String::into_bytes),
    ];
    fuzz("oauth_form_parameters", input, |body| {
        if let Ok(params) = crate::oauth::params::Params::parse(&body) {
            prop_assert!(params
                .get("client_id")
                .is_none_or(|v| v.len() <= body.len()));
        }
        Ok(())
    });
}

#[test]
fn fuzz_webhook_signatures() {
    use crate::workers::webhook::{verify, Headers};
    let key = b"fuzz-webhook-secret";
    let hmac = |m: &[u8]| crate::mac::hmac_hex(key, m);
    let header = || {
        proptest::option::of(hostile_text(&[
            "sha256=", "t=", ",", "v1=", "00", "ff", " ",
        ]))
    };
    let input = (header(), header(), header(), bytes(64), any::<i64>());
    fuzz("webhook_signatures", input, |(sig, ts, gh, body, now)| {
        let headers = Headers {
            handoff_signature: sig,
            handoff_timestamp: ts,
            github_signature: gh,
            ..Headers::default()
        };
        // Random signatures never pass.
        prop_assert!(verify(&headers, &body, now, hmac, crate::mac::same).is_err());
        Ok(())
    });
}

#[test]
fn fuzz_cron_expressions() {
    let pieces = &[
        "*",
        "/",
        ",",
        "-",
        " ",
        "L",
        "W",
        "#",
        "?",
        "@daily",
        "@every",
        "0",
        "5",
        "59",
        "60",
        "31",
        "12",
        "7",
        "MON",
        "JAN",
        "99999999999",
        "*/0",
    ];
    let zones =
        proptest::sample::select(&["UTC", "Europe/Berlin", "America/Havana", "Nope/Zone"][..]);
    fuzz(
        "cron_expressions",
        (hostile_text(pieces), zones, any::<u32>()),
        |(cron, zone, at)| {
            let _ = crate::workers::schedule::check(&cron, zone, i64::from(at) * 1000, 60);
            let _ = crate::workers::schedule::describe(&cron);
            Ok(())
        },
    );
}

#[test]
fn fuzz_worker_manifest_yaml() {
    let pieces = &[
        "name: x\n",
        "triggers:\n",
        "  schedule:\n",
        "- ",
        ": ",
        "&a ",
        "*a",
        "!!str ",
        "{",
        "}",
        "[",
        "]",
        "\n",
        "  ",
        "'",
        "\"",
        "#",
        "---\n",
        "|\n",
        ">\n",
    ];
    fuzz("worker_manifest_yaml", hostile_text(pieces), |text| {
        let _ = crate::workers::yaml::parse(&text);
        Ok(())
    });
}

#[test]
fn fuzz_paths() {
    let pieces = &[
        "..",
        ".",
        "/",
        "//",
        "a",
        "work",
        "\0",
        "\\",
        "~",
        "%2e",
        " ",
        "\n",
        "/home/sandbox",
    ];
    fuzz("paths", hostile_text(pieces), |path| {
        if crate::workers::files::check_path(&path).is_ok() {
            prop_assert!(!path.starts_with('/') && !path.contains('\0'), "{path:?}");
            prop_assert!(
                path.split('/').all(|part| part != ".." && part != "."),
                "{path:?}"
            );
        }
        let _ = crate::tools::sandbox_params::check_path("path", &path);
        Ok(())
    });
}

#[test]
fn fuzz_resource_uris_and_diffs() {
    let pieces = &[
        "handoff://",
        "runs/",
        "run_",
        "/transcript",
        "/diff",
        "sandboxes/",
        "/files/",
        "..",
        "%",
        "diff --git a/x b/x\n",
        "+++ b/",
        "--- a/",
        "@@ -1 +1 @@\n",
        "+",
        "-",
        "\n",
    ];
    fuzz("resource_uris_and_diffs", hostile_text(pieces), |text| {
        if let Some(crate::mcp::resources::Target::SandboxFile { path, .. }) =
            crate::mcp::resources::parse(&text)
        {
            prop_assert!(!path.contains('\0'), "{path:?}");
        }
        let _ = crate::diff::parse(&text);
        Ok(())
    });
}

#[test]
fn fuzz_json_cost_covers_any_value() {
    fuzz("json_cost_covers", json(), |value| {
        let (reckoned, taken) = crate::json_cost::tests::reckoned_and_taken(&value.to_string());
        prop_assert!(reckoned >= taken, "reckoned {reckoned} < taken {taken}");
        Ok(())
    });
}

#[test]
fn fuzz_json_cost_of_any_bytes_in_little_memory() {
    fuzz("json_cost_bytes", bytes(4096), |bytes| {
        let (_, _, peak) =
            crate::json_cost::tests::measured(|| crate::json_cost::tree_bytes(&bytes));
        prop_assert!(
            peak <= crate::json_cost::MAX_DEPTH * 64,
            "took {peak} bytes"
        );
        Ok(())
    });
}

/// Keeps some of what `json()` builds: an MCP request's method and its params' name and cursor.
const KEEP_SOME: crate::json_cost::kept::Keep = {
    use crate::json_cost::kept::Keep;
    Keep::Object(&[
        ("method", Keep::Scalar),
        (
            "params",
            Keep::Object(&[
                ("name", Keep::Scalar),
                ("cursor", Keep::Array(&Keep::Scalar)),
            ]),
        ),
    ])
};

#[test]
fn fuzz_json_kept_is_the_value_pruned_and_reckoned_above_it() {
    use crate::json_cost::kept::{self, tests::pruned};
    fuzz("json_kept", json(), |value| {
        let text = value.to_string();
        let ((kept, reckoned), held, _) = crate::json_cost::tests::measured(|| {
            kept::counted(text.as_bytes(), &KEEP_SOME, usize::MAX)
        });
        let whole: Value =
            serde_json::from_str(&text).map_err(|e| TestCaseError::fail(format!("{e}")))?;
        let kept = kept.map_err(|e| TestCaseError::fail(format!("{e}")))?;
        prop_assert_eq!(kept, pruned(&whole, &KEEP_SOME));
        prop_assert!(reckoned >= held, "reckoned {reckoned} < held {held}");
        Ok(())
    });
}

#[test]
fn fuzz_json_kept_of_any_bytes() {
    fuzz("json_kept_bytes", bytes(4096), |bytes| {
        let kept = crate::json_cost::kept::parse(&bytes, &KEEP_SOME, 1 << 20);
        // Only JSON is kept.
        prop_assert!(kept.is_err() || serde_json::from_slice::<Value>(&bytes).is_ok());
        Ok(())
    });
}

#[test]
fn fuzz_json_pruned_is_what_the_kept_parse_keeps() {
    use crate::json_cost::kept;
    use crate::json_cost::pruned::tests::prune_in;
    let skeleton = KEEP_SOME.skeleton();
    let input = (json(), proptest::collection::vec(any::<usize>(), 0..6));
    fuzz("json_pruned", input, |(value, cuts)| {
        let text = value.to_string();
        let out = prune_in(text.as_bytes(), &skeleton, &cuts, usize::MAX)
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        let kept = kept::parse(&out, &KEEP_SOME, usize::MAX).ok();
        prop_assert_eq!(
            kept,
            kept::parse(text.as_bytes(), &KEEP_SOME, usize::MAX).ok()
        );
        Ok(())
    });
}

#[test]
fn fuzz_json_pruned_of_any_bytes() {
    use crate::json_cost::kept;
    use crate::json_cost::pruned::tests::prune_in;
    let skeleton = KEEP_SOME.skeleton();
    let input = (bytes(4096), proptest::collection::vec(any::<usize>(), 0..6));
    fuzz("json_pruned_bytes", input, |(bytes, cuts)| {
        let out = prune_in(&bytes, &skeleton, &cuts, 1 << 20);
        // Refused exactly when it is not JSON, and what is kept parses as the whole would.
        let json = serde_json::from_slice::<serde::de::IgnoredAny>(&bytes);
        prop_assert_eq!(out.is_ok(), json.is_ok(), "{:?}", out);
        if let Ok(whole) = kept::parse(&bytes, &KEEP_SOME, 1 << 20) {
            let out = out.map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(kept::parse(&out, &KEEP_SOME, 1 << 20).ok(), Some(whole));
        }
        Ok(())
    });
}
