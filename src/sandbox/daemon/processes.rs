//! The daemon's background processes of one sandbox: started, looked up, frozen and thawed,
//! killed, their logs read.

use super::Daemon;
use crate::error::{Error, Result};
use handoff_wire::{ProcessInfo, ProcessList, ProcessLogs, StartProcess};
use worker::Method;

impl Daemon {
    pub async fn start_process(&self, req: &StartProcess) -> Result<ProcessInfo> {
        self.call(Method::Post, "/processes", Some(req)).await
    }

    /// One background process, from the sandbox's list.
    pub async fn process(&self, id: u64) -> Result<ProcessInfo> {
        let list: ProcessList = self.call::<(), _>(Method::Get, "/processes", None).await?;
        list.processes
            .into_iter()
            .find(|p| p.id == id)
            .ok_or_else(|| Error::not_found(format!("process {id} is not known in this sandbox")))
    }

    pub async fn kill_process(&self, id: u64) -> Result<ProcessInfo> {
        self.call::<(), _>(Method::Delete, &format!("/processes/{id}"), None)
            .await
    }

    /// Stops (`frozen`) or continues a running process's group; see the daemon's
    /// `processes::set_frozen`.
    pub async fn freeze_process(&self, id: u64, frozen: bool) -> Result<ProcessInfo> {
        let action = if frozen { "freeze" } else { "thaw" };
        let path = format!("/processes/{id}/{action}");
        self.call::<(), _>(Method::Post, &path, None).await
    }

    pub async fn process_logs(&self, id: u64) -> Result<ProcessLogs> {
        self.call::<(), _>(Method::Get, &format!("/processes/{id}/logs"), None)
            .await
    }
}
