//! A worker folder's files: relative paths and contents, checked for size and shape before
//! anything is stored or written into a sandbox.

use super::fields::Problem;
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Most files in a worker folder.
pub const MAX_FILES: usize = 64;
/// Largest file in a worker folder.
pub const MAX_FILE_BYTES: usize = 256 * 1024;
/// Largest worker folder, all files together.
pub const MAX_TOTAL_BYTES: usize = 1024 * 1024;
/// Longest relative path.
const MAX_PATH: usize = 200;

/// A worker folder: relative path → contents (base64 in JSON, so binary files travel too).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FileSet(#[serde(with = "b64_map")] pub BTreeMap<String, Vec<u8>>);

impl FileSet {
    pub fn get(&self, path: &str) -> Option<&[u8]> {
        self.0.get(path).map(Vec::as_slice)
    }

    pub fn text(&self, path: &str) -> Option<&str> {
        self.get(path).and_then(|b| std::str::from_utf8(b).ok())
    }

    pub fn total_bytes(&self) -> usize {
        self.0.values().map(Vec::len).sum()
    }

    /// Every problem with the folder's shape (paths, counts, sizes).
    pub fn problems(&self) -> Vec<Problem> {
        let mut out = Vec::new();
        if self.0.len() > MAX_FILES {
            out.push(Problem::new(
                "files",
                format!(
                    "{} files; a worker folder holds at most {MAX_FILES}",
                    self.0.len()
                ),
            ));
        }
        for (path, bytes) in &self.0 {
            if let Err(why) = check_path(path) {
                out.push(Problem::new(format!("files[{path:?}]"), why));
            }
            if bytes.len() > MAX_FILE_BYTES {
                out.push(Problem::new(
                    format!("files[{path:?}]"),
                    format!(
                        "{} bytes; each file may have at most {MAX_FILE_BYTES} (256 KiB)",
                        bytes.len()
                    ),
                ));
            }
        }
        let total = self.total_bytes();
        if total > MAX_TOTAL_BYTES {
            out.push(Problem::new(
                "files",
                format!("{total} bytes in all; a worker folder may have at most {MAX_TOTAL_BYTES} (1 MiB)"),
            ));
        }
        out
    }

    /// SHA-256 over every path and content, in path order.
    pub fn digest(&self) -> String {
        use sha2::{Digest, Sha256};
        let mut hash = Sha256::new();
        for (path, bytes) in &self.0 {
            hash.update((path.len() as u64).to_be_bytes());
            hash.update(path.as_bytes());
            hash.update((bytes.len() as u64).to_be_bytes());
            hash.update(bytes);
        }
        hex::encode(hash.finalize())
    }
}

/// A file's media type from its extension (`application/octet-stream` when unknown).
pub fn media_type_of(path: &str) -> &'static str {
    let ext = path.rsplit_once('.').map(|(_, e)| e.to_ascii_lowercase());
    match ext.as_deref() {
        Some("txt" | "log") => "text/plain",
        Some("md") => "text/markdown",
        Some("csv") => "text/csv",
        Some("json") => "application/json",
        Some("html" | "htm") => "text/html",
        Some("pdf") => "application/pdf",
        Some("png") => "image/png",
        Some("jpg" | "jpeg") => "image/jpeg",
        Some("svg") => "image/svg+xml",
        Some("zip") => "application/zip",
        _ => "application/octet-stream",
    }
}

/// A relative path of plain names: letters, digits and `._-` separated by `/`; no `..`, no
/// hidden `.git`, no absolute paths, at most 200 bytes.
pub fn check_path(path: &str) -> Result<(), String> {
    let bad = |why: &str| Err(format!("{path:?} is not an acceptable file name: {why}"));
    if path.is_empty() || path.len() > MAX_PATH {
        return bad("it must have 1 to 200 characters");
    }
    if path.starts_with('/') {
        return bad("paths are relative to the worker folder");
    }
    if !path
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"._-/".contains(&b))
    {
        return bad("use letters, digits, '.', '_', '-' and '/'");
    }
    for part in path.split('/') {
        match part {
            "" => return bad("empty path segment"),
            "." | ".." => return bad("'.' and '..' are not allowed"),
            ".git" => return bad("a .git folder is not part of a worker"),
            _ => {}
        }
    }
    Ok(())
}

mod b64_map {
    use super::*;
    use serde::de::Error;
    use serde::{Deserializer, Serializer};

    pub fn serialize<S: Serializer>(
        map: &BTreeMap<String, Vec<u8>>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        let encoded: BTreeMap<&String, String> =
            map.iter().map(|(k, v)| (k, B64.encode(v))).collect();
        encoded.serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<BTreeMap<String, Vec<u8>>, D::Error> {
        let encoded = BTreeMap::<String, String>::deserialize(d)?;
        encoded
            .into_iter()
            .map(|(k, v)| B64.decode(v).map(|b| (k, b)).map_err(D::Error::custom))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_stay_inside_the_folder() {
        for ok in ["run.py", "lib/util.py", "SKILL.md", "data/a-b_c.json"] {
            assert!(check_path(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "/etc/passwd",
            "../x",
            "a/../b",
            "a//b",
            ".git/config",
            "a b",
            "a\\b",
            "./x",
        ] {
            assert!(check_path(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn sizes_and_counts_are_capped_and_travel_as_base64() {
        let mut set = FileSet::default();
        set.0.insert("big.bin".into(), vec![0; MAX_FILE_BYTES + 1]);
        let problems = set.problems();
        assert_eq!(problems.len(), 1);
        assert!(problems[0].message.contains("256 KiB"));
        let small = FileSet([("a.txt".to_string(), b"hi\0".to_vec())].into());
        let json = serde_json::to_value(&small).unwrap();
        assert_eq!(json, serde_json::json!({"a.txt": "aGkA"}));
        assert_eq!(serde_json::from_value::<FileSet>(json).unwrap(), small);
    }
}
