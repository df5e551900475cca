//! `handoff-test-orphan`: a stand-in for a test process that dies without stopping its servers.
//! Starts a sandbox daemon as a test does, prints `<pgid> <dir>` of it, and waits to be killed
//! (`it::leftovers` kills it with SIGKILL and checks that the daemon's guard ends the rest).

fn main() {
    let daemon = handoff_tests::daemon::Daemon::start();
    let pgid = daemon.pgid().expect("the daemon runs");
    println!("{pgid} {}", daemon.dir().display());
    loop {
        std::thread::sleep(std::time::Duration::from_secs(3600));
    }
}
