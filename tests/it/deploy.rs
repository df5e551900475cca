//! The project as committed deploys: `wrangler deploy --dry-run` bundles it and validates the
//! configuration (bindings, migrations, the container declaration) without an account. It runs
//! on the project's wrangler.toml minus the `[build]` step, which the test command has already
//! run (a nested cargo build would wait on the lock of the cargo running these tests), and with
//! `--containers-rollout=none`: building the container image needs a Docker engine, which these
//! machines lack (a real deploy builds it; see README, Deploy).

use handoff_tests::worker::write_config;
use handoff_tests::{root, WorkerOptions};
use std::process::Command;

#[test]
fn wrangler_deploy_dry_run_succeeds() {
    let node_bin = root().join("node_modules/.bin");
    let dir = std::env::temp_dir().join(format!("handoff-dry-run-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    write_config(&dir, &WorkerOptions::default());
    let out_dir = dir.join("out");
    let output = Command::new(node_bin.join("wrangler"))
        .args([
            "deploy",
            "--dry-run",
            "--containers-rollout=none",
            "--outdir",
        ])
        .arg(&out_dir)
        .current_dir(&dir)
        .env(
            "PATH",
            format!(
                "{}:{}",
                node_bin.display(),
                std::env::var("PATH").unwrap_or_default()
            ),
        )
        .env("WRANGLER_SEND_METRICS", "false")
        .env("CLOUDFLARE_CF_FETCH_ENABLED", "false")
        .output()
        .expect("run wrangler deploy --dry-run");
    let config = std::fs::read_to_string(dir.join("wrangler.toml")).unwrap_or_default();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(config.contains("[[containers]]") && config.contains("SandboxObject"));
    let dockerfile =
        std::fs::read_to_string(root().join("container/Dockerfile")).expect("Dockerfile");
    assert!(dockerfile.contains("handoff-sandboxd") && dockerfile.contains("3000"));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(output.status.success(), "dry run failed:\n{text}");
    assert!(text.contains("--dry-run: exiting now"), "{text}");
    for binding in ["LEDGER", "SESSIONS", "SANDBOXES", "ARTIFACTS"] {
        assert!(text.contains(binding), "binding {binding} in:\n{text}");
    }
}
