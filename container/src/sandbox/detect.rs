//! Finding out, once at start, what isolation the host gives: bubblewrap found by absolute
//! path, then a throwaway sandbox started under the probe user whose one command checks its
//! user, capabilities and view of the file system.

use super::init::{start_init, InitSpec};
use super::isolation::{etc_files, report, HostIsolation, Mode, Wanted};
use super::seccomp::Programs;
use handoff_wire::WORKSPACE;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;

/// Where bubblewrap is looked for when `--bwrap` does not say (never through `PATH`).
const BWRAP_PATHS: [&str; 3] = ["/usr/bin/bwrap", "/usr/local/bin/bwrap", "/bin/bwrap"];

/// Finds bubblewrap by absolute path.
fn find_bwrap(explicit: Option<&Path>) -> Result<PathBuf, String> {
    if let Some(path) = explicit {
        return if path.is_absolute() && path.is_file() {
            Ok(path.to_path_buf())
        } else {
            Err(format!(
                "bubblewrap was not found at {} (--bwrap needs the absolute path of bwrap)",
                path.display()
            ))
        };
    }
    BWRAP_PATHS
        .iter()
        .map(PathBuf::from)
        .find(|p| p.is_file())
        .ok_or_else(|| {
            "bubblewrap (bwrap) is not installed: install the Debian package `bubblewrap`".into()
        })
}

/// Probes namespace isolation by starting a throwaway sandbox under `probe_uid` and running a
/// command in it that checks its user, capabilities and view of the file system.
pub async fn detect(
    scratch: &Path,
    wanted: Wanted,
    bwrap: Option<&Path>,
    probe_uid: u32,
) -> Result<HostIsolation, String> {
    let seccomp = Arc::new(Programs::build()?);
    if wanted == Wanted::Dangerous {
        return Ok(HostIsolation {
            mode: Mode::None,
            report: report(Mode::None, None),
            problem: None,
            bwrap: None,
            seccomp,
        });
    }
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let probed = match (root, find_bwrap(bwrap)) {
        (false, _) => Err(
            "the sandbox daemon runs as an unprivileged user; it must run as root \
                           to give every sandbox its own user, namespaces and limits"
                .to_string(),
        ),
        (true, Err(e)) => Err(e),
        (true, Ok(path)) => probe(scratch, &path, probe_uid, &seccomp)
            .await
            .map(|()| path),
    };
    match (probed, wanted) {
        (Ok(path), _) => Ok(HostIsolation {
            mode: Mode::Namespaces,
            report: report(Mode::Namespaces, None),
            problem: None,
            bwrap: Some(path),
            seccomp,
        }),
        (Err(e), Wanted::Namespaces) => Err(format!("namespace isolation is required: {e}")),
        (Err(e), Wanted::Container) if root => Ok(HostIsolation {
            mode: Mode::Container,
            report: report(Mode::Container, Some(&e)),
            problem: None,
            bwrap: None,
            seccomp,
        }),
        (Err(e), Wanted::Container) => Err(format!("container isolation is required: {e}")),
        (Err(e), _) => {
            let problem = format!(
                "sandboxes cannot be isolated on this host, so none are run: {e}. Fix that, or \
                 for development only start the daemon with --dangerously-skip-isolation"
            );
            Ok(HostIsolation {
                mode: Mode::Unavailable,
                report: report(Mode::Unavailable, Some(&problem)),
                problem: Some(problem),
                bwrap: None,
                seccomp,
            })
        }
    }
}

async fn probe(
    scratch: &Path,
    bwrap: &Path,
    uid: u32,
    seccomp: &Arc<Programs>,
) -> Result<(), String> {
    let home = scratch.join(format!(".probe-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&home);
    std::fs::create_dir_all(&home).map_err(|e| e.to_string())?;
    std::os::unix::fs::chown(&home, Some(uid), Some(uid)).map_err(|e| e.to_string())?;
    let spec = InitSpec {
        bwrap,
        home: &home,
        etc: &etc_files(),
        tools: None,
        cgroup: None,
        host_uid: uid,
        seccomp,
        tls: None,
    };
    let result = match start_init(&spec).await {
        Ok(mut init) => {
            let check = "test \"$(id -u)\" = 1000 && test -d /home/sandbox && ! test -e /root \
                         && grep -q '^CapEff:[[:space:]]*0*$' /proc/self/status \
                         && grep -q '^NoNewPrivs:[[:space:]]*1$' /proc/self/status";
            let outcome = match init.command(
                "/bin/sh",
                &["-c".to_string(), check.to_string()],
                WORKSPACE,
                Some(seccomp.clone()),
                None,
            ) {
                Ok(mut cmd) => cmd
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .stderr(Stdio::piped())
                    .output()
                    .await
                    .map_err(|e| format!("could not enter the probe sandbox: {e}"))
                    .and_then(|out| {
                        if out.status.success() {
                            Ok(())
                        } else {
                            Err(format!(
                                "the probe sandbox did not confine its process as expected ({}): {}",
                                out.status,
                                String::from_utf8_lossy(&out.stderr).trim()
                            ))
                        }
                    }),
                Err(e) => Err(format!("could not enter the probe sandbox: {e}")),
            };
            init.kill().await;
            outcome
        }
        Err(e) => Err(format!(
            "bubblewrap could not create the sandbox namespaces ({e}); user namespaces may be \
             disabled (sysctl user.max_user_namespaces, kernel.unprivileged_userns_clone)"
        )),
    };
    let _ = std::fs::remove_dir_all(&home);
    result
}
