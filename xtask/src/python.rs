//! The official Python MCP SDK, which the integration tests drive against handoff as a real
//! client of both eras: a virtual environment under `target/py-mcp` with the pinned `mcp`
//! release, made once (Debian's `python3-venv` installed first when venvs cannot be made).

use crate::{proc, root, setup, Result};
use std::path::PathBuf;
use std::process::Command;

/// The pinned SDK release.
pub const MCP_VERSION: &str = "2.3.0";

/// The environment's interpreter (what the tests run, via `HANDOFF_PYTHON`).
pub fn interpreter() -> PathBuf {
    root().join("target/py-mcp/bin/python")
}

/// Makes the environment unless it already has the pinned SDK.
pub fn ensure() -> Result {
    let python = interpreter();
    let probe = format!(
        "import importlib.metadata as m, sys; sys.exit(m.version('mcp') != '{MCP_VERSION}')"
    );
    if python.exists() && proc::run(Command::new(&python).args(["-c", &probe])).is_ok() {
        return Ok(());
    }
    println!("xtask: installing the Python MCP SDK (mcp {MCP_VERSION}) into target/py-mcp");
    let venv = root().join("target/py-mcp");
    let make = || proc::run(Command::new("python3").args(["-m", "venv"]).arg(&venv));
    if make().is_err() {
        // Debian's python3 makes venvs only with python3-venv.
        setup::ensure_debian(&[(
            "python3-venv",
            &["/usr/lib/python3/dist-packages/ensurepip"],
        )])?;
        let _ = std::fs::remove_dir_all(&venv);
        make()?;
    }
    proc::run(
        Command::new(&python)
            .args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
            ])
            .arg(format!("mcp=={MCP_VERSION}")),
    )
}
