//! Sandbox ↔ host: what a command (`sandbox_exec`), a background process or the sandbox's init
//! can do. They run as uid 1000 without capabilities under `no_new_privs` and seccomp, cannot
//! remount or reach the host's files, and the caller's environment never reaches a host
//! process.

use handoff_tests::worker::with_sandboxes;
use handoff_tests::Mcp;
use serde_json::{json, Value};
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;

async fn mcp() -> Mcp {
    Mcp::connect(&with_sandboxes().1.url("")).await
}

async fn create(mcp: &Mcp) -> String {
    let out = mcp.call_ok("sandbox_create", json!({})).await;
    out["sandboxId"].as_str().expect("sandboxId").to_string()
}

async fn exec(mcp: &Mcp, id: &str, command: &str, env: Value) -> Value {
    mcp.call_ok(
        "sandbox_exec",
        json!({"sandboxId": id, "command": command, "env": env}),
    )
    .await
}

/// The sandbox's workspace as the host sees it.
fn host_home(id: &str) -> PathBuf {
    with_sandboxes().0.workspace(id)
}

/// A system call's number on this architecture, for the probes below.
fn syscall_number(name: &str) -> u32 {
    let table: &[(&str, u32, u32)] = &[
        // name, x86_64, aarch64
        ("mount", 165, 40),
        ("unshare", 272, 97),
        ("ptrace", 101, 117),
        ("add_key", 248, 217),
        ("keyctl", 250, 219),
        ("bpf", 321, 280),
        ("setns", 308, 268),
        ("init_module", 175, 105),
        ("perf_event_open", 298, 241),
        ("getpid", 39, 172),
    ];
    let (_, x86, arm) = table
        .iter()
        .find(|(n, ..)| *n == name)
        .unwrap_or_else(|| panic!("no number for {name}"));
    if cfg!(target_arch = "aarch64") {
        *arm
    } else {
        *x86
    }
}

#[tokio::test]
async fn commands_run_unprivileged_and_cannot_remount_the_host() {
    let mcp = mcp().await;
    let id = create(&mcp).await;
    let who = exec(
        &mcp,
        &id,
        "id -u; id -g; id -G; grep -E '^(CapInh|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs|Seccomp):' /proc/self/status",
        json!({}),
    )
    .await;
    let out = who["stdout"].as_str().unwrap();
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(&lines[..3], &["1000", "1000", "1000"], "{out}");
    for cap in ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"] {
        let line = lines.iter().find(|l| l.starts_with(cap)).expect(cap);
        assert!(line.ends_with("0000000000000000"), "{line}");
    }
    assert!(out.contains("NoNewPrivs:\t1"), "{out}");
    assert!(out.contains("Seccomp:\t2"), "seccomp filter mode: {out}");

    // The attack from the report: remount the host's /usr writable and write into it.
    let marker = format!("handoff-remount-{}", std::process::id());
    let remount = exec(
        &mcp,
        &id,
        &format!("mount -o remount,bind,rw /usr && touch /usr/{marker}; echo rc=$?; touch /usr/{marker}-2; echo rc2=$?"),
        json!({}),
    )
    .await;
    let text = format!("{remount}");
    assert!(!text.contains("rc=0"), "remount succeeded: {text}");
    assert!(!text.contains("rc2=0"), "/usr is writable: {text}");
    assert!(!std::path::Path::new("/usr").join(&marker).exists());
    assert!(!std::path::Path::new("/usr")
        .join(format!("{marker}-2"))
        .exists());

    // The sandbox's pid 1 and its other processes are just as unprivileged.
    let init = exec(
        &mcp,
        &id,
        "for p in /proc/[0-9]*; do awk '/^(Uid|CapEff):/ {printf \"%s \", $2} END {print \"\"}' $p/status; done",
        json!({}),
    )
    .await;
    for line in init["stdout"].as_str().unwrap().lines() {
        assert_eq!(line.trim(), "1000 0000000000000000", "a process: {init}");
    }

    // New user namespaces (which would hand out capabilities again) and setuid are gone.
    let nested = exec(
        &mcp,
        &id,
        "unshare -U -r true; echo unshare=$?; unshare -m true; echo unshare_m=$?",
        json!({}),
    )
    .await;
    let text = nested["stdout"].as_str().unwrap();
    assert!(
        text.contains("unshare=1") && text.contains("unshare_m=1"),
        "{nested}"
    );
}

#[tokio::test]
async fn the_seccomp_filter_refuses_kernel_level_calls_and_allows_ordinary_ones() {
    let mcp = mcp().await;
    let id = create(&mcp).await;
    let probe = |name: &str| {
        format!(
            "perl -e '$r = syscall({}, 0, 0, 0, 0, 0); print \"{name}=\", ($r == -1 ? $!+0 : \"ok\"), \"\\n\"'",
            syscall_number(name)
        )
    };
    let names = [
        "mount",
        "unshare",
        "ptrace",
        "add_key",
        "keyctl",
        "bpf",
        "setns",
        "init_module",
        "perf_event_open",
    ];
    let script: Vec<String> = names
        .iter()
        .map(|n| probe(n))
        .chain([probe("getpid")])
        .collect();
    let out = exec(&mcp, &id, &script.join("; "), json!({})).await;
    let stdout = out["stdout"].as_str().unwrap();
    for name in names {
        assert!(
            stdout.contains(&format!("{name}=1\n")),
            "{name} is not refused with EPERM: {out}"
        );
    }
    assert!(stdout.contains("getpid=ok"), "{out}");
    // Ordinary work still works: threads (clone3 falls back to clone), pipes, subprocesses.
    let work = exec(
        &mcp,
        &id,
        "python3 -c 'import threading, subprocess; t = threading.Thread(target=print, args=(\"thread\",)); t.start(); t.join(); print(subprocess.run([\"echo\", \"child\"], capture_output=True, text=True).stdout.strip())'",
        json!({}),
    )
    .await;
    assert_eq!(work["stdout"], "thread\nchild\n", "{work}");
}

/// A host file that shows whether a planted program ran on the host.
fn marker(name: &str) -> PathBuf {
    handoff_tests::scratch_dir("attack").join(name)
}

#[tokio::test]
async fn a_callers_path_and_ld_preload_never_reach_a_host_process() {
    let mcp = mcp().await;
    let id = create(&mcp).await;
    let home = host_home(&id);
    let ran = marker("planted-ran");
    // Programs a host-side helper might look up by name, planted in the workspace.
    let script = format!(
        "#!/bin/sh\ntouch {}\nexec /usr/bin/env \"$@\"\n",
        ran.display()
    );
    for name in ["nsenter", "sh", "env", "bwrap", "setpriv", "echo"] {
        mcp.call_ok(
            "sandbox_files_write",
            json!({"sandboxId": id, "path": format!("bin/{name}"), "content": script}),
        )
        .await;
    }
    exec(&mcp, &id, "chmod +x bin/*", json!({})).await;
    // A preload library that records where it was loaded.
    let preloaded = marker("preload-ran");
    let source = marker("preload.c");
    std::fs::write(
        &source,
        format!(
            "#include <stdio.h>\n#include <unistd.h>\n__attribute__((constructor)) static void hit(void) {{\n  FILE *f = fopen(\"{}\", \"a\"); if (f) {{ fprintf(f, \"uid=%d\\n\", (int)getuid()); fclose(f); }}\n  f = fopen(\"/home/sandbox/preload-ran\", \"a\"); if (f) {{ fprintf(f, \"uid=%d\\n\", (int)getuid()); fclose(f); }}\n}}\n",
            preloaded.display()
        ),
    )
    .unwrap();
    let library = source.with_extension("so");
    let built = std::process::Command::new("gcc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(&library)
        .arg(&source)
        .status()
        .expect("gcc");
    assert!(built.success());
    let in_workspace = home.join("evil.so");
    std::fs::copy(&library, &in_workspace).unwrap();
    std::fs::set_permissions(
        &in_workspace,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();

    let hostile_path = format!("{}/bin:/home/sandbox/bin:/usr/bin:/bin", home.display());
    for preload in [
        library.display().to_string(),
        "/home/sandbox/evil.so".into(),
    ] {
        let out = exec(
            &mcp,
            &id,
            "echo still-works",
            json!({"PATH": hostile_path, "LD_PRELOAD": preload, "LD_LIBRARY_PATH": home.display().to_string()}),
        )
        .await;
        assert!(
            out["stdout"].as_str().unwrap().contains("still-works"),
            "{out}"
        );
    }
    assert!(
        !preloaded.exists(),
        "a preload library ran outside the sandbox: {:?}",
        std::fs::read_to_string(&preloaded)
    );
    // Inside the sandbox the caller's environment applies, to the sandboxed program only.
    let inside = exec(&mcp, &id, "cat /home/sandbox/preload-ran", json!({})).await;
    assert!(
        inside["stdout"].as_str().unwrap().contains("uid=1000"),
        "{inside}"
    );
    // The planted programs either never ran, or ran inside the sandbox: the host marker's path
    // does not exist there, so a run inside leaves no trace on the host.
    assert!(!ran.exists(), "a planted program ran on the host");
}

#[tokio::test]
async fn every_sandbox_has_its_own_host_user_and_files_stay_usable() {
    let mcp = mcp().await;
    let a = create(&mcp).await;
    let b = create(&mcp).await;
    mcp.call_ok(
        "sandbox_files_write",
        json!({"sandboxId": a, "path": "deep/dir/written.txt", "content": "from the API\n"}),
    )
    .await;
    let appended = exec(
        &mcp,
        &a,
        "echo from-inside >> deep/dir/written.txt && mkdir deep/dir/more && cat deep/dir/written.txt && touch made-inside",
        json!({}),
    )
    .await;
    assert_eq!(
        appended["stdout"], "from the API\nfrom-inside\n",
        "{appended}"
    );
    exec(&mcp, &b, "touch made-inside", json!({})).await;
    let owner = |id: &str, rel: &str| std::fs::metadata(host_home(id).join(rel)).unwrap().uid();
    let (ua, ub) = (owner(&a, ""), owner(&b, ""));
    assert_ne!(ua, 0, "a workspace belongs to root");
    assert_ne!(ua, ub, "two sandboxes share a host user");
    for rel in ["made-inside", "deep", "deep/dir", "deep/dir/written.txt"] {
        assert_eq!(owner(&a, rel), ua, "{rel}");
    }
    assert_eq!(owner(&b, "made-inside"), ub);
    let mode = std::fs::metadata(host_home(&a)).unwrap().mode() & 0o777;
    assert_eq!(mode, 0o700, "the workspace is the sandbox user's alone");
    // Created all at once, sandboxes still get users of their own.
    let ids = futures::future::join_all((0..6).map(|_| create(&mcp))).await;
    let mut users: Vec<u32> = ids.iter().map(|id| owner(id, "")).collect();
    users.sort();
    users.dedup();
    assert_eq!(
        users.len(),
        ids.len(),
        "concurrent sandboxes share a host user"
    );
}
