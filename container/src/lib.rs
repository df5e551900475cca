//! handoff-sandbox: the sandbox daemon as a library — the `/v1` API (`routes`), the sandboxes
//! (`sandbox`: registry, isolation, lifecycle) and what can be done in one (exec, processes,
//! files, git, ports, snapshots, the egress proxy, a desktop). `handoff-sandboxd` (`main.rs`) only parses
//! its command line and serves `routes::router`.
//!
//! Invariant: it knows nothing about MCP, users or accounts — only sandboxes, identified by ids
//! the Worker chooses and authenticated by tokens the Worker mints.

pub mod auth;
mod beneath;
mod clock;
mod desktop;
mod egress;
pub mod error;
mod exec;
mod files;
#[cfg(test)]
mod fuzz_tests;
mod git;
mod group;
mod netns;
mod ports;
mod processes;
pub mod routes;
pub mod sandbox;
mod snapshot;
mod tree;
mod zipdir;
