//! Figures both sandbox backends share: create → first exec done, and pause (snapshot to R2) /
//! resume (restore) of a sandbox holding a 50 MB workspace.

use handoff_tests::Mcp;
use serde_json::json;
use std::time::Instant;

/// The median of some samples (sorted in place).
pub fn p50(samples: &mut [f64]) -> f64 {
    samples.sort_by(f64::total_cmp);
    samples[samples.len() / 2]
}

pub fn ms_since(started: Instant) -> f64 {
    started.elapsed().as_secs_f64() * 1000.0
}

/// Creates `count` sandboxes one after another, each followed by two `sandbox_exec true`; returns
/// their ids and the times of each step (see [`CreateAndExec`]).
pub async fn create_and_exec(mcp: &Mcp, count: usize) -> CreateAndExec {
    let mut out = CreateAndExec::default();
    let exec = |id: &str| mcp.call_ok("sandbox_exec", json!({"sandboxId": id, "command": "true"}));
    for _ in 0..count {
        let started = Instant::now();
        let created = mcp.call_ok("sandbox_create", json!({})).await;
        out.create.push(ms_since(started));
        let id = created["sandboxId"]
            .as_str()
            .expect("sandboxId")
            .to_string();
        let first = Instant::now();
        let done = exec(&id).await;
        assert_eq!(done["exitCode"], 0, "{done:#}");
        out.first_exec.push(ms_since(first));
        out.ready.push(ms_since(started));
        let second = Instant::now();
        assert_eq!(exec(&id).await["exitCode"], 0);
        out.second_exec.push(ms_since(second));
        out.ids.push(id);
    }
    out
}

/// What [`create_and_exec`] measured (ms per sandbox): `sandbox_create`'s answer, then the first
/// `sandbox_exec` alone, create → that exec done (`ready`), and a second exec right after.
#[derive(Default)]
pub struct CreateAndExec {
    pub ids: Vec<String>,
    pub create: Vec<f64>,
    pub first_exec: Vec<f64>,
    pub ready: Vec<f64>,
    pub second_exec: Vec<f64>,
}

/// Pause and resume times (ms, `rounds` each) of a sandbox with 50 MB of incompressible files;
/// the files are checked after the last resume.
pub async fn pause_resume(mcp: &Mcp, id: &str, rounds: usize) -> (Vec<f64>, Vec<f64>) {
    let exec = |command: &str| {
        mcp.call_ok(
            "sandbox_exec",
            json!({"sandboxId": id, "command": command, "timeoutMs": 120000}),
        )
    };
    let made =
        exec("head -c 52428800 /dev/urandom > blob.bin && sha256sum blob.bin > blob.sum").await;
    assert_eq!(made["exitCode"], 0, "{made:#}");
    let (mut pause, mut resume) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        let started = Instant::now();
        let paused = mcp.call_ok("sandbox_pause", json!({"sandboxId": id})).await;
        assert_eq!(paused["status"], "paused", "{paused:#}");
        pause.push(ms_since(started));
        let started = Instant::now();
        let resumed = mcp
            .call_ok("sandbox_resume", json!({"sandboxId": id}))
            .await;
        assert_eq!(resumed["status"], "running", "{resumed:#}");
        let back = exec("true").await;
        assert_eq!(back["exitCode"], 0, "{back:#}");
        resume.push(ms_since(started));
    }
    let checked = exec("sha256sum -c blob.sum").await;
    assert_eq!(checked["exitCode"], 0, "the 50 MB survived: {checked:#}");
    (pause, resume)
}

/// Prints the pause/resume line of one backend.
pub fn report_pause_resume(backend: &str, pause: &mut [f64], resume: &mut [f64]) {
    println!(
        "{backend}: pause (50 MB workspace → R2) p50 {:.0} ms, resume (→ first exec done) p50 {:.0} ms over {} rounds",
        p50(pause),
        p50(resume),
        pause.len()
    );
}
