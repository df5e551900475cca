//! The sandbox's Cloudflare Container: starting it with the key of its sandbox alone, waiting
//! for its daemon to answer, and watching it so that a container that stops is noticed (the
//! runtime reports it as not running once its exit is observed, and the next use starts a new
//! one, which the object then restores from the last snapshot).

use super::daemon::{self, Daemon, Transport, CONTAINER_PORT};
use crate::config;
use crate::error::{Error, Result};
use crate::time::{backoff_ms, now_ms};
use std::cell::Cell;
use std::rc::Rc;
use std::time::Duration;
use worker::{js_sys, wasm_bindgen::JsValue, wasm_bindgen_futures, Delay, Env, Fetcher};

/// How long a freshly started container may take to open the daemon's port.
const READY_MS: i64 = 60_000;
/// How soon a starting container's daemon is asked again whether it is up; the wait doubles
/// with each answer it does not give, up to [`POLL_MAX_MS`]: at most about 300 tries in
/// [`READY_MS`] (a fixed 40 ms poll made up to 1,500).
const POLL_MS: i64 = 10;
const POLL_MAX_MS: i64 = 200;

/// Starts the container for sandbox `id` with the key of that sandbox alone (never the master
/// secret) and the id it is to serve.
pub fn start(container: &worker::Container, env: &Env, id: &str) -> Result<()> {
    let master = config::daemon_secret(env).ok_or_else(|| {
        Error::not_configured(format!(
            "{} is not set (at least 32 characters)",
            config::DAEMON_SECRET
        ))
    })?;
    let options = js_sys::Object::new();
    let vars = js_sys::Object::new();
    set(
        &vars,
        "SANDBOX_DAEMON_SECRET",
        daemon::container_key(&master, id).into(),
    )?;
    set(&vars, "HANDOFF_SANDBOX_ID", id.into())?;
    if let Some(proxy) = config::get(env, config::CONTAINER_UPSTREAM_PROXY) {
        set(&vars, "HANDOFF_UPSTREAM_PROXY", proxy.into())?;
    }
    if let Some(pem) = config::get(env, config::CONTAINER_UPSTREAM_CA) {
        set(&vars, "HANDOFF_UPSTREAM_EXTRA_CA_PEM", pem.into())?;
    }
    set(&options, "env", vars.into())?;
    set(&options, "enableInternet", JsValue::TRUE)?;
    method(container, "start")?
        .call1(container.as_ref(), &options)
        .map_err(|e| Error::unavailable(format!("the container did not start: {e:?}")))?;
    Ok(())
}

/// What one object instance knows of its container.
#[derive(Default)]
pub struct Watch {
    /// Something awaits the container's exit.
    watching: Cell<bool>,
    /// Its daemon has answered since it last started.
    ready: Cell<bool>,
}

/// The daemon in the sandbox's container, starting the container first if it is not running
/// (then `started` is true) and waiting until its daemon answers. Until something awaits
/// `monitor()`, the runtime keeps reporting a container that died as running, so every
/// running container is watched; once its exit is seen, the next use starts a new one.
pub async fn daemon(
    container: &worker::Container,
    env: &Env,
    id: &str,
    watch: &Rc<Watch>,
) -> Result<(Daemon, bool)> {
    let (port, started) = ensure(container, env, id, watch).await?;
    Ok((Daemon::new(env, Transport::Container(port), id)?, started))
}

/// The daemon's port in the sandbox's container, started (then `started` is true) and
/// answering: what [`daemon`] and the sandbox hosts of other sizes both rely on.
pub async fn ensure(
    container: &worker::Container,
    env: &Env,
    id: &str,
    watch: &Rc<Watch>,
) -> Result<(Fetcher, bool)> {
    let deadline = now_ms() + READY_MS;
    let mut started = false;
    let mut polls = Polls::default();
    loop {
        if !container.running() {
            start(container, env, id)?;
            started = true;
            watch.ready.set(false);
        }
        watch_exit(container, watch);
        if watch.ready.get() {
            return Ok((container.get_tcp_port(CONTAINER_PORT)?, started));
        }
        let port = container.get_tcp_port(CONTAINER_PORT)?;
        let tried = now_ms();
        match Daemon::new(env, Transport::Container(port), id)?
            .health()
            .await
        {
            Ok(()) => {
                watch.ready.set(true);
                return Ok((container.get_tcp_port(CONTAINER_PORT)?, started));
            }
            Err(e) if now_ms() > deadline => {
                return Err(Error::unavailable(format!(
                    "the sandbox container did not become ready: {}",
                    e.message
                )))
            }
            Err(_) => match polls.after_failure(now_ms() - tried) {
                0 => {}
                wait => Delay::from(Duration::from_millis(wait as u64)).await,
            },
        }
    }
}

/// The waits between tries to reach a starting container's daemon.
#[derive(Default)]
struct Polls {
    /// A try the runtime held until the container ran was seen.
    held: bool,
    /// Waits so far.
    waits: u32,
}

impl Polls {
    /// The wait (ms) before the next try after one that failed after `took_ms`. The runtime
    /// holds the first try until the container runs, then fails it when the daemon in it is not
    /// listening yet — which it is some 15 ms later (measured with workerd and Docker): a try
    /// that was held is followed at once. Otherwise [`POLL_MS`], doubling, up to
    /// [`POLL_MAX_MS`].
    fn after_failure(&mut self, took_ms: i64) -> i64 {
        if !self.held && took_ms >= POLL_MS {
            self.held = true;
            return 0;
        }
        self.waits += 1;
        backoff_ms(POLL_MS, self.waits - 1, POLL_MAX_MS)
    }
}

/// Whether the container runs, as far as the runtime has seen (watching it from now on).
pub fn running(container: &worker::Container, watch: &Rc<Watch>) -> bool {
    if container.running() {
        watch_exit(container, watch);
        return true;
    }
    false
}

impl Watch {
    /// Its daemon has answered since it last started (as far as this instance knows).
    pub fn ready(&self) -> bool {
        self.ready.get()
    }

    pub fn set_ready(&self, ready: bool) {
        self.ready.set(ready);
    }
}

fn watch_exit(container: &worker::Container, watch: &Rc<Watch>) {
    if watch.watching.replace(true) {
        return;
    }
    let exited = method(container, "monitor")
        .and_then(|monitor| {
            monitor
                .call0(container.as_ref())
                .map_err(|e| Error::internal(format!("container.monitor: {e:?}")))
        })
        .map(|promise| wasm_bindgen_futures::JsFuture::from(js_sys::Promise::from(promise)));
    let Ok(exited) = exited else {
        watch.watching.set(false);
        return;
    };
    let watch = watch.clone();
    wasm_bindgen_futures::spawn_local(async move {
        // Resolves when the container exits and rejects when it is destroyed or crashes:
        // either way it is gone.
        let _ = exited.await;
        watch.watching.set(false);
        watch.ready.set(false);
    });
}

fn set(object: &js_sys::Object, key: &str, value: JsValue) -> Result<()> {
    js_sys::Reflect::set(object, &key.into(), &value)
        .map(|_| ())
        .map_err(|_| Error::internal("container options"))
}

fn method(container: &worker::Container, name: &str) -> Result<js_sys::Function> {
    js_sys::Reflect::get(container.as_ref(), &name.into())
        .ok()
        .filter(|f| f.is_function())
        .map(js_sys::Function::from)
        .ok_or_else(|| Error::internal(format!("container.{name} is missing")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_held_try_is_followed_at_once_then_the_waits_double_to_a_cap() {
        let mut polls = Polls::default();
        // The first try waited for the container to start: the daemon is nearly up.
        assert_eq!(polls.after_failure(540), 0);
        let waits: Vec<i64> = (0..8).map(|_| polls.after_failure(540)).collect();
        assert_eq!(waits, [10, 20, 40, 80, 160, 200, 200, 200]);
        // Quick failures (the container was already running) wait from the start.
        let mut polls = Polls::default();
        assert_eq!(polls.after_failure(3), 10);
        // About 300 tries at most in the minute a container may take.
        let mut polls = Polls::default();
        let (mut spent, mut tries) = (0, 0);
        while spent < READY_MS {
            spent += polls.after_failure(3);
            tries += 1;
        }
        assert!(tries <= 310, "{tries} tries");
    }
}
