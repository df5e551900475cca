//! Where a sandbox's daemon runs: the local daemon (`SANDBOX_DAEMON_URL`), or a Cloudflare
//! Container on the instance type of the sandbox's size — the object's own container for
//! `large` (and sandboxes without a size), a host object's (`host`) for `small` and `medium`.

use super::daemon::{Daemon, Transport};
use super::{container, host, SandboxObject};
use crate::config;
use crate::error::{Error, Result};
use crate::sandboxes::{InstanceType, SandboxRecord, Size};
use worker::Stub;

enum Backend {
    /// The object's own container.
    Own(worker::Container),
    /// The container of the sandbox's host object.
    Hosted(Stub),
    Local,
}

impl SandboxObject {
    fn backend(&self, record: &SandboxRecord) -> Result<Backend> {
        let Some(own) = self.state.container() else {
            return Ok(Backend::Local);
        };
        // A deployment without the size's host class keeps every sandbox in its own container.
        match host::binding(Size::of_spec(&record.spec))
            .and_then(|b| self.env.durable_object(b).ok())
        {
            Some(hosts) => Ok(Backend::Hosted(hosts.get_by_name(&record.id)?)),
            None => Ok(Backend::Own(own)),
        }
    }

    /// The machine the sandbox runs on, when it is a Cloudflare Container.
    pub(super) fn machine(&self, record: &SandboxRecord) -> Option<InstanceType> {
        match self.backend(record).ok()? {
            Backend::Own(_) | Backend::Hosted(_) => {
                Some(Size::of_spec(&record.spec).instance_type())
            }
            Backend::Local => None,
        }
    }

    /// The daemon for this sandbox on whichever backend this deployment has, its container
    /// started (and the daemon answering) if it was not running.
    pub(super) async fn daemon(&self, record: &SandboxRecord) -> Result<Daemon> {
        let id = &record.id;
        let (daemon, started) = match self.backend(record)? {
            Backend::Own(own) => {
                let (daemon, started) = container::daemon(&own, &self.env, id, &self.watch).await?;
                if started {
                    // A new container's daemon has no sandbox yet: the next use puts it back.
                    self.ensured_at.set(0);
                }
                return Ok(daemon);
            }
            Backend::Hosted(host) => {
                if let Some(own) = self.state.container().filter(|c| c.running()) {
                    // Its container before it had a host of its size: no longer used.
                    let _ = own.destroy(None).await;
                }
                let mut started = false;
                if !self.watch.ready() {
                    started = host::ensure(&host, id).await?;
                    self.watch.set_ready(true);
                }
                (
                    Daemon::new(&self.env, Transport::Hosted(host), id)?,
                    started,
                )
            }
            Backend::Local => match config::sandbox_daemon_url(&self.env) {
                Some(base) => (
                    Daemon::new(&self.env, Transport::Local { base }, id)?,
                    false,
                ),
                None => {
                    return Err(Error::not_configured(format!(
                        "this deployment has no sandbox backend: set {} to a running sandbox \
                         daemon (cargo xtask dev starts one) or deploy with Cloudflare Containers",
                        config::SANDBOX_DAEMON_URL
                    )))
                }
            },
        };
        if started {
            self.ensured_at.set(0);
        }
        Ok(daemon)
    }

    /// Whether the sandbox's container is known to be gone (with its files): never for the
    /// local daemon.
    pub(super) async fn container_gone(&self, record: &SandboxRecord) -> bool {
        match self.backend(record) {
            Ok(Backend::Own(own)) => !own.running(),
            Ok(Backend::Hosted(host)) => !host::running(&host, &record.id).await.unwrap_or(true),
            _ => false,
        }
    }

    /// Stops the sandbox's container (after a pause or on delete).
    pub(super) async fn stop_container(&self, record: &SandboxRecord) {
        match self.backend(record) {
            Ok(Backend::Own(own)) => {
                let _ = own.destroy(None).await;
            }
            Ok(Backend::Hosted(host)) => {
                let _ = host::destroy(&host, &record.id).await;
                self.watch.set_ready(false);
            }
            _ => {}
        }
    }
}
