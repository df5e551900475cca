//! Sandboxes as the domain knows them: their lifecycle status, the record their object keeps and
//! the summary the ledger lists.

use crate::names::named_enum;
use handoff_wire::SandboxSpec;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

named_enum! {
/// Where a sandbox is in its life.
pub enum Status {
    Running,
    Paused,
    Deleted,
}
}

named_enum! {
/// How much of the machine a sandbox may use: memory, processes and CPU, each at most what the
/// sandbox backend allows (`large` is the backend's own limits today: 2 CPUs, 2 GiB, 1024
/// processes by default).
#[derive(schemars::JsonSchema)]
pub enum Size {
    /// Half a CPU, 512 MiB, 256 processes.
    Small,
    /// One CPU, 1 GiB, 512 processes.
    Medium,
    /// Two CPUs, 2 GiB, 1024 processes.
    Large,
}
}

impl Size {
    /// The limits this size asks the backend for.
    pub fn limits(self) -> handoff_wire::Limits {
        const MIB: u64 = 1024 * 1024;
        let (cpu_millis, memory, pids) = match self {
            Size::Small => (500, 512 * MIB, 256),
            Size::Medium => (1000, 1024 * MIB, 512),
            Size::Large => (2000, 2048 * MIB, 1024),
        };
        handoff_wire::Limits {
            memory_bytes: Some(memory),
            pids: Some(pids),
            cpu_millis: Some(cpu_millis),
            disk_bytes: None,
        }
    }

    /// The Cloudflare Container instance type a sandbox of this size runs on (wrangler.toml's
    /// `[[containers]]` entry of its class, see `sandbox::host`): the machine's own share,
    /// within which the size's limits still apply.
    pub fn instance_type(self) -> InstanceType {
        match self {
            Size::Small => InstanceType {
                name: "standard-1",
                vcpus: 0.5,
                memory_mib: 4096,
                disk_gb: 8,
            },
            Size::Medium => InstanceType {
                name: "standard-2",
                vcpus: 1.0,
                memory_mib: 6144,
                disk_gb: 12,
            },
            Size::Large => InstanceType {
                name: "standard-3",
                vcpus: 2.0,
                memory_mib: 8192,
                disk_gb: 16,
            },
        }
    }

    /// The size of a sandbox with this spec: the one whose limits it asks for, `large` when it
    /// asks for none (the backend's own limits).
    pub fn of_spec(spec: &SandboxSpec) -> Size {
        match spec.limits {
            None => Size::Large,
            Some(_) => Size::of(spec).unwrap_or(Size::Large),
        }
    }

    /// The size whose limits a spec asks for, if any.
    pub fn of(spec: &SandboxSpec) -> Option<Size> {
        let asked = spec.limits.as_ref()?;
        [Size::Small, Size::Medium, Size::Large]
            .into_iter()
            .find(|size| &size.limits() == asked)
    }
}

/// A Cloudflare Container instance type (developers.cloudflare.com/containers/platform/limits).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct InstanceType {
    pub name: &'static str,
    pub vcpus: f64,
    pub memory_mib: u32,
    pub disk_gb: u32,
}

/// The sandbox a work session owns: `sbx_` and the session id's random part.
pub fn of_session(session_id: &str) -> String {
    format!(
        "{}{}",
        crate::ids::SANDBOX,
        session_id.trim_start_matches(crate::ids::SESSION)
    )
}

/// What a sandbox's object knows about its sandbox.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SandboxRecord {
    pub id: String,
    pub name: String,
    pub created_by: String,
    pub created_at: i64,
    pub status: Status,
    pub spec: SandboxSpec,
    pub idle_timeout_s: i64,
    pub metadata: Map<String, Value>,
    pub last_active_at: i64,
    /// The daemon's `created_at` for this sandbox when last seen: a different value means the
    /// daemon lost the workspace (a new container) and it must be restored.
    pub daemon_created_at: Option<i64>,
    pub snapshot_key: Option<String>,
    pub snapshot_bytes: Option<i64>,
    pub snapshot_at: Option<i64>,
    /// When the sandbox is deleted whatever it is doing (its lifetime), if it has one.
    #[serde(default)]
    pub expires_at: Option<i64>,
}

impl SandboxRecord {
    /// The record as the ledger's listing shows it, as of its creation.
    pub fn summary(&self) -> SandboxSummary {
        SandboxSummary {
            id: self.id.clone(),
            name: self.name.clone(),
            created_by: self.created_by.clone(),
            created_at: self.created_at,
            status: self.status,
            updated_at: self.created_at,
            metadata: self.metadata.clone(),
        }
    }
}

/// A sandbox as the listing shows it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SandboxSummary {
    pub id: String,
    pub name: String,
    pub created_by: String,
    pub created_at: i64,
    pub status: Status,
    pub updated_at: i64,
    pub metadata: Map<String, Value>,
}

#[cfg(test)]
mod tests {
    use super::{Size, Status};

    /// wrangler.toml gives each size's container class the instance type named here.
    #[test]
    fn wrangler_toml_gives_each_size_its_instance_type() {
        let config = include_str!("../wrangler.toml");
        for (class, size) in [
            ("SandboxHostSmall", Size::Small),
            ("SandboxHostMedium", Size::Medium),
            ("SandboxObject", Size::Large),
        ] {
            let entry = config
                .split("[[containers]]")
                .skip(1)
                .find(|entry| entry.contains(&format!("class_name = \"{class}\"")))
                .unwrap_or_else(|| panic!("no [[containers]] entry for {class}"));
            let wanted = format!("instance_type = \"{}\"", size.instance_type().name);
            assert!(entry.contains(&wanted), "{class}: {wanted}");
            // Each size's limits fit its machine.
            let limits = size.limits();
            let machine = size.instance_type();
            assert!(limits.cpu_millis.unwrap() as f64 <= machine.vcpus * 1000.0);
            assert!(limits.memory_bytes.unwrap() <= u64::from(machine.memory_mib) << 20);
        }
    }

    #[test]
    fn status_names_are_the_serde_names() {
        for status in [Status::Running, Status::Paused, Status::Deleted] {
            let serde_name = serde_json::to_value(status).unwrap();
            assert_eq!(serde_name, status.as_str());
            assert_eq!(status.as_str().parse::<Status>().unwrap(), status);
        }
        assert!("stopped".parse::<Status>().is_err());
    }
}
