//! The load driver behind `cargo xtask load` and the short load test: many `opencode_run_task`
//! calls at once against a real stack — half with idempotency keys, some of those cut off right
//! after sending and sent again like a phone on a bad network — then polling the sessions'
//! run lists until every run has ended, counting what was lost or duplicated.

use crate::mcp::{send, Mcp};
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

/// What to send.
pub struct LoadPlan {
    /// `opencode_run_task` calls in all (the first `sessions` of them open the sessions).
    pub calls: usize,
    /// Work sessions the runs are spread over (each runs its runs one at a time).
    pub sessions: usize,
    /// Every this many keyed calls, the first attempt is cut off after a few milliseconds.
    pub cut_every: usize,
    /// How long every run may take to end, from the first call.
    pub deadline: Duration,
}

/// What happened.
#[derive(Debug, Default)]
pub struct LoadReport {
    pub calls: usize,
    pub keyed: usize,
    /// First attempts cut off by the client, and attempts sent again.
    pub cut_off: usize,
    pub retries: usize,
    /// Answers that said the key's run already existed (`deduplicated`).
    pub deduplicated: usize,
    /// Distinct runs the calls were answered with.
    pub runs: usize,
    /// Keys answered with more than one run.
    pub duplicates: usize,
    /// Runs the sessions list that no answer named (a cut-off call without a key would make
    /// one; keyed calls must not).
    pub unanswered_runs: usize,
    /// Answered runs missing from the lists or not ended by the deadline.
    pub lost: usize,
    pub by_status: BTreeMap<String, usize>,
    /// Milliseconds from sending to the answer, of every answered attempt.
    pub ack_ms: Vec<f64>,
    /// From the first call to the last run ended.
    pub elapsed: Duration,
    /// Calls answered with an error.
    pub errors: Vec<String>,
}

impl LoadReport {
    pub fn percentile(&self, p: f64) -> f64 {
        let mut sorted = self.ack_ms.clone();
        sorted.sort_by(f64::total_cmp);
        if sorted.is_empty() {
            return 0.0;
        }
        sorted[((sorted.len() - 1) as f64 * p).round() as usize]
    }

    pub fn runs_per_minute(&self) -> f64 {
        self.runs as f64 / self.elapsed.as_secs_f64().max(0.001) * 60.0
    }

    pub fn print(&self) {
        println!(
            "load: {} calls ({} with idempotency keys, {} cut off and sent again, {} retries, \
             {} answered with the run the cut-off attempt had started)",
            self.calls, self.keyed, self.cut_off, self.retries, self.deduplicated
        );
        println!(
            "load: {} runs; lost {}, duplicates {}, runs nobody was answered with {}, errors {}",
            self.runs,
            self.lost,
            self.duplicates,
            self.unanswered_runs,
            self.errors.len()
        );
        println!("load: ended {:?}", self.by_status);
        println!(
            "load: acknowledgement p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms; {:.1} s to the last \
             run's end, {:.0} runs per minute",
            self.percentile(0.5),
            self.percentile(0.99),
            self.percentile(1.0),
            self.elapsed.as_secs_f64(),
            self.runs_per_minute()
        );
        for e in self.errors.iter().take(5) {
            println!("load: error: {e}");
        }
    }
}

/// One call's outcome: the run it was answered with (or the error), attempts and latencies.
struct Outcome {
    key: Option<String>,
    run: Result<(String, String), String>,
    cut_off: bool,
    deduplicated: bool,
    attempts: usize,
    ack_ms: Vec<f64>,
}

/// Sends one `opencode_run_task`; `cut_after` cuts the first attempt off (and sends it again).
async fn call(mcp: &Mcp, id: i64, args: Value, cut_after: Option<Duration>) -> Outcome {
    let key = args["idempotencyKey"].as_str().map(str::to_string);
    let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": "opencode_run_task", "arguments": args}})
    .to_string();
    let mut outcome = Outcome {
        key,
        run: Err("never answered".into()),
        cut_off: false,
        deduplicated: false,
        attempts: 0,
        ack_ms: Vec::new(),
    };
    for attempt in 0..5 {
        // Only a keyed call may be sent again: without a key a second run would be wanted.
        let limit = match (attempt, cut_after) {
            (0, Some(cut)) => cut,
            _ => Duration::from_secs(60),
        };
        outcome.attempts += 1;
        let sent = Instant::now();
        let post = send(
            &mcp.http,
            &mcp.endpoint,
            &mcp.token,
            Some(&mcp.session),
            Some(&mcp.version),
            &body,
            &[],
        );
        let Ok(response) = tokio::time::timeout(limit, post).await else {
            outcome.cut_off |= attempt == 0 && cut_after.is_some();
            if outcome.key.is_none() {
                return outcome;
            }
            continue;
        };
        outcome.ack_ms.push(sent.elapsed().as_secs_f64() * 1000.0);
        let value = response.json();
        let result = &value["result"];
        outcome.run = if result["isError"] == false {
            let s = &result["structuredContent"];
            outcome.deduplicated = s["deduplicated"] == true;
            Ok((
                s["runId"].as_str().unwrap_or_default().to_string(),
                s["sessionId"].as_str().unwrap_or_default().to_string(),
            ))
        } else {
            Err(format!("{} {}", response.status, response.body))
        };
        return outcome;
    }
    outcome
}

/// Runs the plan against the MCP endpoint at `base` and reports.
pub async fn run(base: &str, plan: &LoadPlan) -> LoadReport {
    let mcp = Mcp::connect(base).await;
    let tag = crate::runs::repo_name("load");
    let task = "Nothing to change here; say so. [scenario:no-change]";
    let started = Instant::now();
    let args = |i: usize, session: Option<&str>| {
        let mut a = json!({"task": task, "title": format!("load {i}")});
        if i.is_multiple_of(2) {
            a["idempotencyKey"] = json!(format!("{tag}-{i}"));
        }
        if let Some(s) = session {
            a["sessionId"] = json!(s);
        }
        a
    };
    let cut = |i: usize| {
        (i.is_multiple_of(2) && plan.cut_every > 0 && (i / 2).is_multiple_of(plan.cut_every))
            .then(|| Duration::from_millis(5 + (i as u64 * 37) % 120))
    };
    // The sessions first, then every other call at once, spread over them.
    let opening: Vec<_> = (0..plan.sessions)
        .map(|i| call(&mcp, i as i64 + 1, args(i, None), None))
        .collect();
    let mut outcomes = futures::future::join_all(opening).await;
    let sessions: Vec<String> = outcomes
        .iter()
        .filter_map(|o| o.run.as_ref().ok().map(|(_, s)| s.clone()))
        .collect();
    assert!(!sessions.is_empty(), "no session opened");
    let rest: Vec<_> = (plan.sessions..plan.calls)
        .map(|i| {
            let session = &sessions[i % sessions.len()];
            call(&mcp, i as i64 + 1, args(i, Some(session)), cut(i))
        })
        .collect();
    outcomes.extend(futures::future::join_all(rest).await);

    let mut report = LoadReport {
        calls: plan.calls,
        ..Default::default()
    };
    let mut answered = BTreeSet::new();
    let mut per_key: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for o in &outcomes {
        report.keyed += usize::from(o.key.is_some());
        report.cut_off += usize::from(o.cut_off);
        report.deduplicated += usize::from(o.deduplicated);
        report.retries += o.attempts - 1;
        report.ack_ms.extend(&o.ack_ms);
        match &o.run {
            Ok((run, _)) => {
                answered.insert(run.clone());
                if let Some(key) = &o.key {
                    per_key.entry(key.clone()).or_default().insert(run.clone());
                }
            }
            Err(e) => report.errors.push(e.clone()),
        }
    }
    report.runs = answered.len();
    report.duplicates = per_key.values().filter(|runs| runs.len() > 1).count();

    // Every run of the sessions, until all have ended or the deadline passes.
    let listed = loop {
        let listed = list(&mcp, &sessions).await;
        let done = listed.values().all(|s| is_terminal(s));
        if done && answered.iter().all(|r| listed.contains_key(r)) {
            break listed;
        }
        if started.elapsed() > plan.deadline {
            break listed;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    report.elapsed = started.elapsed();
    report.lost = answered
        .iter()
        .filter(|r| !listed.get(*r).is_some_and(|s| is_terminal(s)))
        .count();
    report.unanswered_runs = listed.keys().filter(|r| !answered.contains(*r)).count();
    for status in listed.values() {
        *report.by_status.entry(status.clone()).or_default() += 1;
    }
    report
}

fn is_terminal(status: &str) -> bool {
    matches!(status, "completed" | "failed" | "cancelled")
}

/// Every run of the sessions with its status (all pages).
async fn list(mcp: &Mcp, sessions: &[String]) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for session in sessions {
        let mut cursor: Option<String> = None;
        loop {
            let mut args = json!({"sessionId": session, "limit": 100});
            if let Some(c) = &cursor {
                args["cursor"] = json!(c);
            }
            let page = mcp.call_ok("opencode_list_runs", args).await;
            for run in page["runs"].as_array().into_iter().flatten() {
                out.insert(
                    run["runId"].as_str().unwrap_or_default().to_string(),
                    run["status"].as_str().unwrap_or_default().to_string(),
                );
            }
            match page["nextCursor"].as_str() {
                Some(c) => cursor = Some(c.to_string()),
                None => break,
            }
        }
    }
    out
}
