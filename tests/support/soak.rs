//! The soak behind `cargo xtask soak` and its short test: mixed traffic against one real stack
//! for a while — delegated runs (some cancelled), sandboxes created, used and deleted, steady
//! polling and listing, OAuth refreshes with each new token used — sampling the resident memory
//! of workerd (and, inside it, the size of handoff's WebAssembly memory, which only grows: a
//! leak in handoff's own heap shows there), the sandbox daemon and the sandboxes' processes. At
//! the end every sandbox it made is deleted and nothing may be left: no process below the
//! daemon, no sandbox folder, no cgroup.

use crate::mcp::Mcp;
use crate::oauth::{mcp_status, post_form, register_public, sign_in, Tokens};
use crate::procs;
use crate::runs::{repo_name, terminal};
use crate::stack::RunStack;
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long and how often.
pub struct SoakPlan {
    pub duration: Duration,
    /// One memory sample per this interval.
    pub sample_every: Duration,
    /// Sessions running delegated runs one after another.
    pub run_lanes: usize,
    /// Which kinds of traffic run: `runs`, `sandboxes`, `polling`, `oauth` (all when empty).
    pub only: Vec<String>,
}

impl SoakPlan {
    fn wants(&self, lane: &str) -> bool {
        self.only.is_empty() || self.only.iter().any(|l| l == lane)
    }
}

/// One memory sample, in MiB.
#[derive(Debug, Clone)]
pub struct Sample {
    pub at: Duration,
    /// The whole workerd process (the runtime's own memory included).
    pub workerd: f64,
    /// handoff's WebAssembly memory inside it (`GET /health`).
    pub wasm: f64,
    pub wrangler: f64,
    pub daemon: f64,
    pub sandboxes: f64,
    pub sandbox_processes: usize,
}

/// What the soak did and what it left.
#[derive(Debug, Default)]
pub struct SoakReport {
    pub elapsed: Duration,
    pub tool_calls: usize,
    pub runs: BTreeMap<String, usize>,
    pub sandboxes: usize,
    pub refreshes: usize,
    pub errors: Vec<String>,
    pub samples: Vec<Sample>,
    /// Left after every sandbox was deleted.
    pub leftover_processes: Vec<String>,
    pub leftover_dirs: Vec<String>,
    pub leftover_cgroups: Vec<String>,
}

impl SoakReport {
    pub fn print(&self) {
        println!(
            "soak: {:.0} s; {} tool calls, runs {:?}, {} sandboxes created and deleted, {} OAuth \
             refreshes; errors {}",
            self.elapsed.as_secs_f64(),
            self.tool_calls,
            self.runs,
            self.sandboxes,
            self.refreshes,
            self.errors.len()
        );
        for e in self.errors.iter().take(5) {
            println!("soak: error: {e}");
        }
        println!(
            "soak: memory (MiB)   workerd  handoff's wasm  wrangler  daemon  sandboxes (processes)"
        );
        for s in &self.samples {
            println!(
                "soak: {:>6.0} s     {:>8.1}  {:>14.1}  {:>8.1}  {:>6.1}  {:>9.1} ({})",
                s.at.as_secs_f64(),
                s.workerd,
                s.wasm,
                s.wrangler,
                s.daemon,
                s.sandboxes,
                s.sandbox_processes
            );
        }
        if let Some([workerd, wasm, daemon]) = self.growth() {
            println!(
                "soak: growth from the first quarter to the last: workerd {workerd:+.1} MiB \
                 (handoff's wasm {wasm:+.1} MiB), daemon {daemon:+.1} MiB"
            );
        }
        println!(
            "soak: left afterwards: {} processes, {} sandbox folders, {} cgroups",
            self.leftover_processes.len(),
            self.leftover_dirs.len(),
            self.leftover_cgroups.len()
        );
        for p in self.leftover_processes.iter().take(5) {
            println!("soak: left running: {p}");
        }
    }

    /// Mean memory of the last quarter's samples minus the first quarter's (workerd, handoff's
    /// wasm, daemon), once there are enough samples.
    pub fn growth(&self) -> Option<[f64; 3]> {
        let n = self.samples.len();
        if n < 4 {
            return None;
        }
        let quarter = n / 4;
        let mean =
            |s: &[Sample], f: fn(&Sample) -> f64| s.iter().map(f).sum::<f64>() / s.len() as f64;
        let (first, last) = (&self.samples[..quarter], &self.samples[n - quarter..]);
        Some([
            mean(last, |s| s.workerd) - mean(first, |s| s.workerd),
            mean(last, |s| s.wasm) - mean(first, |s| s.wasm),
            mean(last, |s| s.daemon) - mean(first, |s| s.daemon),
        ])
    }
}

/// Shared between the lanes.
#[derive(Default)]
struct Tally {
    tool_calls: usize,
    runs: BTreeMap<String, usize>,
    sandboxes: usize,
    refreshes: usize,
    errors: Vec<String>,
    last_run: Option<String>,
    /// Every sandbox the soak made (its own and its sessions').
    made: BTreeSet<String>,
}

struct Soak<'a> {
    stack: &'a RunStack,
    mcp: Mcp,
    until: Instant,
    tally: Mutex<Tally>,
}

impl Soak<'_> {
    fn note<T>(&self, f: impl FnOnce(&mut Tally) -> T) -> T {
        let mut tally = self.tally.lock().unwrap_or_else(|e| e.into_inner());
        f(&mut tally)
    }

    fn going(&self) -> bool {
        Instant::now() < self.until
    }

    /// One tool call; a failure is counted, never a panic.
    async fn call(&self, tool: &str, args: Value) -> Option<Value> {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": tool, "arguments": args}});
        let response = self.mcp.post(&body.to_string(), &[]).await;
        let value = response.json();
        self.note(|t| t.tool_calls += 1);
        if response.status == 200 && value["result"]["isError"] == false {
            return Some(value["result"]["structuredContent"].clone());
        }
        let error = format!("{tool}: {} {}", response.status, response.body);
        self.note(|t| t.errors.push(error));
        None
    }

    /// Runs one after another in one session: fixes with a pull request, answers without a
    /// change, and every fourth run cancelled while it works.
    async fn runs(&self, lane: usize) {
        let mut session: Option<String> = None;
        for i in 0.. {
            if !self.going() {
                break;
            }
            let (task, cancel) = match i % 4 {
                0 | 2 => (
                    "The test in test.sh fails. Fix it. [scenario:fix-add]",
                    false,
                ),
                1 => (
                    "Nothing to change here; say so. [scenario:no-change]",
                    false,
                ),
                _ => ("Wait. [scenario:slow]", true),
            };
            let repo = self.stack.broken_repo(&repo_name(&format!("soak{lane}")));
            let mut args = json!({"task": task, "repository": repo});
            if let Some(s) = &session {
                args["sessionId"] = json!(s);
            }
            let Some(out) = self.call("opencode_run_task", args).await else {
                continue;
            };
            let run = out["runId"].as_str().unwrap_or_default().to_string();
            if session.is_none() {
                let s = out["sessionId"].as_str().unwrap_or_default().to_string();
                let sandbox = format!("sbx_{}", s.trim_start_matches("ses_"));
                self.note(|t| t.made.insert(sandbox));
                session = Some(s);
            }
            self.note(|t| t.last_run = Some(run.clone()));
            if cancel {
                tokio::time::sleep(Duration::from_secs(2)).await;
                self.call("opencode_cancel_run", json!({"runId": run}))
                    .await;
            }
            let status = self.until_ended(&run).await;
            self.note(|t| *t.runs.entry(status).or_default() += 1);
        }
    }

    async fn until_ended(&self, run: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(300);
        while Instant::now() < deadline {
            if let Some(r) = self
                .call("opencode_get_result", json!({"runId": run}))
                .await
            {
                if terminal(&r) {
                    return r["status"].as_str().unwrap_or_default().to_string();
                }
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        "never ended".into()
    }

    /// Sandboxes created, used (command, file written and read back) and deleted.
    async fn sandboxes(&self) {
        while self.going() {
            let Some(made) = self.call("sandbox_create", json!({})).await else {
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            };
            let id = made["sandboxId"].as_str().unwrap_or_default().to_string();
            self.note(|t| t.made.insert(id.clone()));
            let said = self
                .call(
                    "sandbox_exec",
                    json!({"sandboxId": id, "command": "echo soak-$((6*7))"}),
                )
                .await;
            self.expect(said.as_ref().map(|s| &s["stdout"]), "soak-42\n", "exec");
            let content = format!("note {id}");
            let path = "/home/sandbox/note.txt";
            self.call(
                "sandbox_files_write",
                json!({"sandboxId": id, "path": path, "content": content}),
            )
            .await;
            let read = self
                .call("sandbox_files_read", json!({"sandboxId": id, "path": path}))
                .await;
            self.expect(read.as_ref().map(|r| &r["content"]), &content, "read");
            if self
                .call("sandbox_delete", json!({"sandboxId": id}))
                .await
                .is_some()
            {
                self.note(|t| t.sandboxes += 1);
            }
        }
    }

    fn expect(&self, got: Option<&Value>, want: &str, what: &str) {
        if let Some(got) = got.filter(|g| g.as_str() != Some(want)) {
            let error = format!("{what}: wanted {want:?}, got {got}");
            self.note(|t| t.errors.push(error));
        }
    }

    /// What a phone does between runs: reading the latest run, listing runs, sessions and
    /// sandboxes, and the tool list — a few calls a second.
    async fn polling(&self) {
        while self.going() {
            if let Some(run) = self.note(|t| t.last_run.clone()) {
                self.call("opencode_get_result", json!({"runId": run}))
                    .await;
            }
            self.call("opencode_list_runs", json!({"limit": 20})).await;
            self.call("opencode_list_sessions", json!({})).await;
            self.call("sandbox_list", json!({})).await;
            let tools = self
                .mcp
                .post(
                    &json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}).to_string(),
                    &[],
                )
                .await;
            self.note(|t| t.tool_calls += 1);
            if tools.status != 200 || !tools.json()["result"]["tools"].is_array() {
                let error = format!("tools/list: {} {}", tools.status, tools.body);
                self.note(|t| t.errors.push(error));
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// An OAuth client that refreshes every few seconds (rotating its refresh token) and uses
    /// each new access token.
    async fn oauth(&self) {
        let base = self.stack.url();
        let client = register_public(&base, "soak").await;
        let mut tokens = sign_in(&base, &client).await;
        while self.going() {
            tokio::time::sleep(Duration::from_secs(5)).await;
            let refresh = tokens.refresh.clone().unwrap_or_default();
            let answer = post_form(
                &base,
                "/oauth/token",
                &[
                    ("grant_type", "refresh_token"),
                    ("refresh_token", &refresh),
                    ("client_id", &client),
                ],
            )
            .await;
            if answer.status != 200 {
                let error = format!("refresh: {} {}", answer.status, answer.body);
                self.note(|t| t.errors.push(error));
                continue;
            }
            tokens = Tokens::from(&answer);
            let used = mcp_status(&base, &tokens.access).await;
            if used.status != 200 {
                let error = format!("refreshed token refused: {} {}", used.status, used.body);
                self.note(|t| t.errors.push(error));
            }
            self.note(|t| t.refreshes += 1);
        }
    }

    async fn sample(&self, started: Instant, every: Duration) -> Vec<Sample> {
        let mut samples = vec![self.measure(started).await];
        while self.going() {
            tokio::time::sleep(every.min(self.until.saturating_duration_since(Instant::now())))
                .await;
            samples.push(self.measure(started).await);
        }
        samples
    }

    async fn measure(&self, started: Instant) -> Sample {
        let wasm = self.stack.worker.wasm_heap_mib(&self.mcp.http).await;
        let all = procs::all();
        let worker = self.stack.worker.pgid().map(|g| procs::group(&all, g));
        let (workerd, wrangler): (Vec<_>, Vec<_>) = worker
            .unwrap_or_default()
            .into_iter()
            .partition(|p| p.name.starts_with("workerd"));
        let daemon = self.stack.daemon().pgid().unwrap_or(-1);
        let own: Vec<_> = all.iter().filter(|p| p.pid == daemon).cloned().collect();
        let below = procs::descendants(&all, daemon);
        Sample {
            at: started.elapsed(),
            workerd: procs::rss_mib(&workerd),
            wasm,
            wrangler: procs::rss_mib(&wrangler),
            daemon: procs::rss_mib(&own),
            sandboxes: procs::rss_mib(&below),
            sandbox_processes: below.len(),
        }
    }

    /// Deletes every sandbox the soak made and reports what is left of them.
    async fn clean_up(&self, made: &BTreeSet<String>, report: &mut SoakReport) {
        for id in made {
            // A lane's own sandboxes are already gone: "not found" is fine here.
            let body = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                "params": {"name": "sandbox_delete", "arguments": {"sandboxId": id}}});
            self.mcp.post(&body.to_string(), &[]).await;
        }
        let daemon = self.stack.daemon().pgid().unwrap_or(-1);
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let below = procs::descendants(&procs::all(), daemon);
            report.leftover_processes = below
                .iter()
                .map(|p| {
                    format!(
                        "{} {} ({:.1} MiB)",
                        p.pid,
                        p.name,
                        p.rss_kib as f64 / 1024.0
                    )
                })
                .collect();
            report.leftover_dirs = made
                .iter()
                .filter(|id| self.stack.daemon().sandboxes().join(id).exists())
                .cloned()
                .collect();
            report.leftover_cgroups = made.iter().flat_map(|id| cgroups_of(id)).collect();
            let clean = report.leftover_processes.is_empty()
                && report.leftover_dirs.is_empty()
                && report.leftover_cgroups.is_empty();
            if clean || Instant::now() > deadline {
                break;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
}

/// The cgroup folders of sandbox `id` that still exist (any controller's `handoff/<id>`).
pub fn cgroups_of(id: &str) -> Vec<String> {
    let Ok(controllers) = std::fs::read_dir("/sys/fs/cgroup") else {
        return Vec::new();
    };
    let mut found: Vec<String> = controllers
        .flatten()
        .map(|c| c.path().join("handoff").join(id))
        .filter(|p| p.is_dir())
        .map(|p| p.display().to_string())
        .collect();
    let unified = std::path::Path::new("/sys/fs/cgroup/handoff").join(id);
    if unified.is_dir() {
        found.push(unified.display().to_string());
    }
    found.sort();
    found.dedup();
    found
}

/// `lane`, when it is wanted.
async fn when(wanted: bool, lane: impl std::future::Future<Output = ()>) {
    if wanted {
        lane.await
    }
}

/// Runs the plan against `stack` (which must be the soak's own: the end checks its daemon).
pub async fn run(stack: &RunStack, plan: &SoakPlan) -> SoakReport {
    let started = Instant::now();
    let soak = Soak {
        stack,
        mcp: Mcp::connect(&stack.url()).await,
        until: started + plan.duration,
        tally: Mutex::new(Tally::default()),
    };
    let lanes = if plan.wants("runs") {
        plan.run_lanes
    } else {
        0
    };
    let runs = futures::future::join_all((0..lanes).map(|lane| soak.runs(lane)));
    let (samples, ..) = tokio::join!(
        soak.sample(started, plan.sample_every),
        runs,
        when(plan.wants("sandboxes"), soak.sandboxes()),
        when(plan.wants("polling"), soak.polling()),
        when(plan.wants("oauth"), soak.oauth())
    );
    let tally = soak.note(std::mem::take);
    let mut report = SoakReport {
        elapsed: started.elapsed(),
        tool_calls: tally.tool_calls,
        runs: tally.runs,
        sandboxes: tally.sandboxes,
        refreshes: tally.refreshes,
        errors: tally.errors,
        samples,
        ..Default::default()
    };
    soak.clean_up(&tally.made, &mut report).await;
    report
}
