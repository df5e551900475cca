//! Helpers for the background-worker tests: deploying folders, running and following worker
//! runs, signing webhook deliveries, and a local server that records the requests it gets (a
//! worker's side effect).

use crate::Mcp;
use hmac::{KeyInit, Mac};
use serde_json::{json, Map, Value};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A unique worker name for a test.
pub fn name(prefix: &str) -> String {
    format!(
        "{prefix}-{}",
        crate::runs::repo_name("w").trim_start_matches("w-")
    )
}

/// A folder as `files` for workers_deploy.
pub fn folder(files: &[(&str, &str)]) -> Value {
    let map: Map<String, Value> = files
        .iter()
        .map(|(path, text)| (path.to_string(), json!(text)))
        .collect();
    Value::Object(map)
}

impl Mcp {
    /// Deploys a folder; returns the structured output.
    pub async fn deploy(&self, files: &[(&str, &str)]) -> Value {
        self.call_ok("workers_deploy", json!({"files": folder(files)}))
            .await
    }

    /// Starts a run; returns its runId.
    pub async fn run_worker(&self, worker: &str, arguments: Value) -> String {
        let mut args = arguments;
        args["worker"] = json!(worker);
        let out = self.call_ok("workers_run", args).await;
        out["runId"].as_str().expect("runId").to_string()
    }

    pub async fn worker_run(&self, run_id: &str) -> Value {
        self.call_ok("workers_run_get", json!({"runId": run_id}))
            .await
    }

    /// Polls a worker run until `done` holds (at most `timeout`).
    pub async fn wait_worker(
        &self,
        run_id: &str,
        timeout: Duration,
        done: impl Fn(&Value) -> bool,
    ) -> Value {
        self.poll_run("workers_run_get", run_id, timeout, done)
            .await
    }

    /// Waits until the run has ended.
    pub async fn worker_ended(&self, run_id: &str) -> Value {
        self.wait_worker(run_id, Duration::from_secs(120), |r| {
            matches!(
                r["status"].as_str(),
                Some("completed" | "failed" | "cancelled")
            )
        })
        .await
    }
}

/// `X-Handoff-Signature` for `body` at `timestamp` under `secret`.
pub fn handoff_signature(secret: &str, timestamp: i64, body: &[u8]) -> String {
    let mut message = format!("{timestamp}.").into_bytes();
    message.extend_from_slice(body);
    format!("sha256={}", hmac_hex(secret, &message))
}

/// `X-Hub-Signature-256` (GitHub's form) for `body` under `secret`.
pub fn github_signature(secret: &str, body: &[u8]) -> String {
    format!("sha256={}", hmac_hex(secret, body))
}

pub fn hmac_hex(secret: &str, message: &[u8]) -> String {
    let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(secret.as_bytes()).expect("key");
    mac.update(message);
    mac.finalize()
        .into_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

pub fn now_s() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// A server on the host's loopback that answers every request with 200 and records its method,
/// path and body.
pub struct Recorder {
    pub port: u16,
    seen: Arc<Mutex<Vec<String>>>,
}

impl Recorder {
    pub fn start() -> Recorder {
        use axum::body::Bytes;
        use axum::http::{Method, Uri};
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        let app = axum::Router::new().fallback(move |method: Method, uri: Uri, body: Bytes| {
            let log = log.clone();
            async move {
                log.lock().expect("log").push(format!(
                    "{method} {} {}",
                    uri.path(),
                    String::from_utf8_lossy(&body)
                ));
                "ok"
            }
        });
        let port = crate::serve_forever(app);
        Recorder { port, seen }
    }

    pub fn requests(&self) -> Vec<String> {
        self.seen.lock().expect("log").clone()
    }
}

/// A worker folder on disk as `files` for workers_deploy (text files; subfolders included).
pub fn read_folder(dir: &std::path::Path) -> Value {
    let mut files = Map::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(folder) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&folder) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if let Ok(text) = std::fs::read_to_string(&path) {
                let relative = path.strip_prefix(dir).unwrap_or(&path);
                files.insert(relative.display().to_string(), json!(text));
            }
        }
    }
    Value::Object(files)
}

/// The example workers of `examples/workers/`, each as (folder name, files).
pub fn examples() -> Vec<(String, Value)> {
    let root = crate::root().join("examples/workers");
    let mut out: Vec<(String, Value)> = std::fs::read_dir(&root)
        .map(|entries| {
            entries
                .flatten()
                .filter(|e| e.path().is_dir())
                .map(|e| {
                    (
                        e.file_name().to_string_lossy().into_owned(),
                        read_folder(&e.path()),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// A script for each runtime the sandboxes promise: (runtime, entrypoint, what it writes to
/// `outputs/out.txt` for the input `word: boxed`, the script).
pub const RUNTIME_SCRIPTS: [(&str, &str, &str, &str); 4] = [
    (
        "python3",
        "run.py",
        "python boxed",
        "import json; v = json.load(open('inputs.json'))['word']; open('outputs/out.txt', 'w').write('python ' + v)\n",
    ),
    (
        "node",
        "run.js",
        "node boxed",
        "const fs = require('fs'); const v = JSON.parse(fs.readFileSync('inputs.json')).word; fs.writeFileSync('outputs/out.txt', 'node ' + v);\n",
    ),
    (
        "node",
        "run.ts",
        "ts boxed",
        "import { readFileSync, writeFileSync } from 'fs';\nconst v: string = JSON.parse(readFileSync('inputs.json', 'utf8')).word;\nwriteFileSync('outputs/out.txt', 'ts ' + v);\n",
    ),
    (
        "sh",
        "run.sh",
        "sh boxed",
        "printf 'sh %s' \"$(sed -n 's/.*\"word\": \"\\(.*\\)\".*/\\1/p' inputs.json)\" > outputs/out.txt\n",
    ),
];

/// Deploys and runs a worker of every runtime, checks what each wrote, and returns the
/// sandboxes the runs had.
pub async fn every_runtime(mcp: &Mcp) -> Vec<String> {
    let mut sandboxes = Vec::new();
    for (runtime, entry, expected, script) in RUNTIME_SCRIPTS {
        let worker = name(&format!("rt-{}", entry.replace('.', "-")));
        let manifest = format!(
            "schema_version: 1\nname: {worker}\nruntime: {runtime}\nentrypoint: {entry}\n\
             inputs:\n  - {{name: word, type: string, default: hi}}\n"
        );
        mcp.deploy(&[("worker.yml", &manifest), (entry, script)])
            .await;
        let run_id = mcp
            .run_worker(&worker, json!({"inputs": {"word": "boxed"}}))
            .await;
        let run = mcp.worker_ended(&run_id).await;
        assert_eq!(run["status"], json!("completed"), "{entry}: {run:#}");
        let url = run["outputs"][0]["downloadUrl"]
            .as_str()
            .expect("an output");
        let text = reqwest::get(url)
            .await
            .expect("download")
            .text()
            .await
            .expect("text");
        assert_eq!(text, expected, "{entry}");
        sandboxes.push(run["sandboxId"].as_str().expect("sandboxId").to_string());
    }
    sandboxes
}
