//! Background workers with their sandboxes in real containers: every runtime the image promises
//! (python3, node, sh, TypeScript on Bun) runs a script that reads its inputs and leaves an
//! output, and the worker's container is gone when its run ends.

use crate::mcp;
use handoff_tests::containers::wait_gone;
use handoff_tests::workers::every_runtime;
use std::time::Duration;

#[tokio::test]
async fn workers_of_every_runtime_run_in_containers() {
    let mcp = mcp().await;
    for sandbox in every_runtime(&mcp).await {
        assert!(
            wait_gone(&sandbox, Duration::from_secs(60)),
            "the container of {sandbox} outlived its run"
        );
    }
}
