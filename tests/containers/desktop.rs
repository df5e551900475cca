//! The desktop in a container of its own: the X server and the applications run in the
//! sandbox's container (the image carries them), and typing into a terminal reaches the program
//! and changes the screen.

use crate::{create, exec, mcp, stdout};
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use serde_json::{json, Value};
use std::time::Duration;

/// The screenshot of a sandbox_computer call (it must succeed).
async fn shot(mcp: &handoff_tests::Mcp, arguments: Value) -> Vec<u8> {
    let reply = mcp.call("sandbox_computer", arguments.clone()).await;
    let content = reply["result"]["content"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let image = content
        .iter()
        .find(|c| c["type"] == "image")
        .unwrap_or_else(|| panic!("{arguments}: no image in {reply:#}"));
    B64.decode(image["data"].as_str().unwrap()).unwrap()
}

#[tokio::test]
async fn the_desktop_works_in_a_container() {
    let mcp = mcp().await;
    let id = create(&mcp, json!({})).await;
    let first = shot(&mcp, json!({"sandboxId": id, "action": "screenshot"})).await;
    assert!(first.starts_with(b"\x89PNG\r\n\x1a\n"));
    let word =
        |at: usize| u32::from_be_bytes([first[at], first[at + 1], first[at + 2], first[at + 3]]);
    assert_eq!((word(16), word(20)), (1280, 800));
    exec(
        &mcp,
        &id,
        "DISPLAY=:99 xterm -geometry 60x10+20+20 -e sh -c \
         'read line; printf \"%s\" \"$line\" > typed.txt; sleep 300' >/dev/null 2>&1 &",
    )
    .await;
    let found = exec(
        &mcp,
        &id,
        "DISPLAY=:99 timeout 20 xdotool search --sync --onlyvisible --class xterm | head -1",
    )
    .await;
    assert!(
        !stdout(&found).trim().is_empty(),
        "no xterm window: {found:#}"
    );
    let before = shot(
        &mcp,
        json!({"sandboxId": id, "action": "click", "x": 200, "y": 60}),
    )
    .await;
    let after = shot(
        &mcp,
        json!({"sandboxId": id, "action": "type", "text": "from a container\n"}),
    )
    .await;
    assert_ne!(before, after, "typing changed no pixel");
    let mut typed = String::new();
    for _ in 0..20 {
        typed = stdout(&exec(&mcp, &id, "cat typed.txt 2>/dev/null").await);
        if !typed.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert_eq!(typed, "from a container");
    mcp.call_ok("sandbox_delete", json!({"sandboxId": id}))
        .await;
}
