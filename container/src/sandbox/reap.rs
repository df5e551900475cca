//! Waiting for a stopped sandbox's last processes: the kernel kills what is left of a PID
//! namespace after its init, asynchronously.

/// Waits (at most 5 s) until no process runs as `uid`, a sandbox's own host user.
pub async fn wait_until_gone(uid: u32) {
    use std::os::unix::fs::MetadataExt;
    let alive = || {
        std::fs::read_dir("/proc").is_ok_and(|entries| {
            entries.flatten().any(|e| {
                let is_pid = e
                    .file_name()
                    .to_str()
                    .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()));
                is_pid && e.metadata().is_ok_and(|m| m.uid() == uid)
            })
        })
    };
    for _ in 0..250 {
        if !alive() {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    eprintln!(
        "handoff-sandboxd: processes of user {uid} still run 5 s after their sandbox stopped"
    );
}
