//! The whole local stack for delegated runs: the scripted LLM and the local forge (the stand-ins
//! for what cannot exist offline), the real sandbox daemon with OpenCode on its tools path, and
//! the real Worker configured to use them — with canary values as its "real" secrets.

use crate::daemon::Daemon;
use crate::forge::Forge;
use crate::llm::ScriptedLlm;
use crate::worker::{stop_daemon_at_exit, stop_group_at_exit, Worker, WorkerOptions};
use std::sync::OnceLock;

/// The Worker's "real" provider key: must reach the LLM, and nothing else.
pub const CANARY_ANTHROPIC_KEY: &str = "canary-anthropic-key-5c1f0e8d";
/// The Worker's "real" forge token: must reach the forge, and nothing else.
pub const CANARY_GITHUB_TOKEN: &str = "canary-github-token-9a7d2b41";
pub const CANARY_OPENAI_KEY: &str = "canary-openai-key-77e1c3a9";
/// Signs the scoped tokens sandboxes get.
pub const PROXY_SECRET: &str = "canary-proxy-jwt-secret-0123456789abcdef";

const IN_CONTAINERS: &str = "this stack runs its sandboxes in containers";

pub struct RunStack {
    pub forge: Forge,
    pub llm: ScriptedLlm,
    /// The local sandbox backend (none when sandboxes run in containers).
    daemon: Option<Daemon>,
    pub worker: Worker,
}

impl RunStack {
    /// Starts every part; `extra` adds or overrides Worker variables.
    pub fn start(extra: &[(&str, &str)]) -> RunStack {
        Self::with_daemon(Daemon::start(), extra)
    }

    /// Starts every part around `daemon`.
    pub fn with_daemon(daemon: Daemon, extra: &[(&str, &str)]) -> RunStack {
        let options = WorkerOptions::default().daemon(&daemon);
        Self::with_backend(Some(daemon), options, extra)
    }

    /// Starts every part with each sandbox in a real container (the container lane).
    pub fn in_containers(extra: &[(&str, &str)]) -> RunStack {
        Self::with_backend(None, WorkerOptions::default().containers(), extra)
    }

    /// The local sandbox daemon (panics for a stack whose sandboxes run in containers).
    pub fn daemon(&self) -> &Daemon {
        self.daemon.as_ref().expect(IN_CONTAINERS)
    }

    pub fn daemon_mut(&mut self) -> &mut Daemon {
        self.daemon.as_mut().expect(IN_CONTAINERS)
    }

    fn with_backend(
        daemon: Option<Daemon>,
        options: WorkerOptions,
        extra: &[(&str, &str)],
    ) -> RunStack {
        let root = crate::scratch_dir("forge");
        let forge = Forge::start(root, CANARY_GITHUB_TOKEN);
        let llm = ScriptedLlm::start_with(CANARY_ANTHROPIC_KEY, CANARY_OPENAI_KEY);
        let mut options = options
            .var("PROXY_JWT_SECRET", PROXY_SECRET)
            .var("ANTHROPIC_API_KEY", CANARY_ANTHROPIC_KEY)
            .var("ANTHROPIC_BASE_URL", llm.url())
            .var("OPENAI_API_KEY", CANARY_OPENAI_KEY)
            .var("OPENAI_BASE_URL", format!("{}/v1", llm.url()))
            .var("GITHUB_TOKEN", CANARY_GITHUB_TOKEN)
            .var("FORGE_GIT_URL", forge.git_url())
            .var("FORGE_API_URL", forge.api_url())
            .var("HANDOFF_DEFAULT_MODEL", "anthropic/claude-sonnet-4-5")
            .var("RUN_POLL_INTERVAL_MS", "500")
            .var("RUN_MODEL_RETRY_SECONDS", "1");
        // Spare sessions hold an OpenCode each: only the stacks that test them have them.
        if !extra.iter().any(|(key, _)| *key == "RUN_SPARE_SESSIONS") {
            options = options.var("RUN_SPARE_SESSIONS", "0");
        }
        for (key, value) in extra {
            options = options.var(key, *value);
        }
        let worker = Worker::start(options);
        RunStack {
            forge,
            llm,
            daemon,
            worker,
        }
    }

    pub fn url(&self) -> String {
        self.worker.url("")
    }

    /// A new repository with a failing test: `add.sh` subtracts instead of adding.
    pub fn broken_repo(&self, name: &str) -> String {
        self.forge.create_repo(
            "acme",
            name,
            &[
                ("add.sh", "#!/bin/sh\necho $(( $1 - $2 ))\n"),
                (
                    "test.sh",
                    "#!/bin/sh\nif [ \"$(sh add.sh 2 3)\" = \"5\" ]; then echo PASS; else echo FAIL; exit 1; fi\n",
                ),
                ("README.md", "A calculator.\n"),
            ],
        )
    }
}

/// The stack shared by the run tests that neither restart nor kill anything.
pub fn shared() -> &'static RunStack {
    static STACK: OnceLock<RunStack> = OnceLock::new();
    STACK.get_or_init(|| {
        // Second-level schedules, so the worker tests see a schedule fire in seconds.
        // Callbacks to the tests' receivers on 127.0.0.1, retried after a second.
        kept_to_the_end(RunStack::start(&[
            ("WORKER_MIN_SCHEDULE_SECONDS", "1"),
            ("HANDOFF_CALLBACK_SECRET", crate::callbacks::CALLBACK_SECRET),
            ("CALLBACK_ALLOW_PRIVATE_HOSTS", "127.0.0.1"),
            ("CALLBACK_RETRY_SECONDS", "1"),
        ]))
    })
}

/// The longest a run of [`short_runs`] may take, in seconds (`RUN_MAX_DURATION_SECONDS`).
/// Long enough for the agent's first command to be done well before the stop (its start alone
/// was seen to take 12 s on a loaded machine), short enough to wait for.
pub const SHORT_RUN_SECONDS: u64 = 45;

/// A stack shared by the tests of runs that reach `RUN_MAX_DURATION_SECONDS`: theirs is
/// [`SHORT_RUN_SECONDS`].
pub fn short_runs() -> &'static RunStack {
    static STACK: OnceLock<RunStack> = OnceLock::new();
    STACK.get_or_init(|| {
        let seconds = SHORT_RUN_SECONDS.to_string();
        kept_to_the_end(RunStack::start(&[("RUN_MAX_DURATION_SECONDS", &seconds)]))
    })
}

/// A stack that lives in a static (never dropped): its servers are stopped when the test
/// process exits.
fn kept_to_the_end(stack: RunStack) -> RunStack {
    stop_group_at_exit(&stack.worker);
    if let Some(daemon) = &stack.daemon {
        stop_daemon_at_exit(daemon);
    }
    stack
}
