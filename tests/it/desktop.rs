//! A sandbox's desktop through the whole local stack: real X applications (xterm, xmessage) in
//! a sandbox, driven by `sandbox_computer` — typing into a terminal changes the screen and
//! reaches the program, a click presses a button — with every screenshot a real PNG.

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use handoff_tests::worker::with_sandboxes;
use handoff_tests::Mcp;
use serde_json::{json, Value};
use std::time::Duration;

/// Calls sandbox_computer; the structured result and the PNG it carried (if any).
async fn computer(mcp: &Mcp, arguments: Value) -> (Value, Option<Vec<u8>>) {
    let reply = mcp.call("sandbox_computer", arguments.clone()).await;
    let result = &reply["result"];
    assert_ne!(result["isError"], json!(true), "{arguments}: {reply:#}");
    let png = result["content"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "image")
        .map(|c| {
            assert_eq!(c["mimeType"], "image/png");
            B64.decode(c["data"].as_str().unwrap()).unwrap()
        });
    (result["structuredContent"].clone(), png)
}

/// A PNG's width and height.
fn dimensions(png: &[u8]) -> (u32, u32) {
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "not a PNG");
    let word = |at: usize| u32::from_be_bytes([png[at], png[at + 1], png[at + 2], png[at + 3]]);
    (word(16), word(20))
}

async fn exec(mcp: &Mcp, id: &str, command: &str) -> Value {
    mcp.call_ok(
        "sandbox_exec",
        json!({"sandboxId": id, "command": command, "timeoutMs": 30000}),
    )
    .await
}

/// The geometry (x, y, width, height) of the first visible window named `name`.
async fn window(mcp: &Mcp, id: &str, name: &str) -> (u32, u32, u32, u32) {
    let out = exec(
        mcp,
        id,
        &format!(
            "DISPLAY=:99 timeout 20 xdotool search --sync --onlyvisible --name '{name}' \
             getwindowgeometry --shell | head -5"
        ),
    )
    .await;
    let text = out["stdout"].as_str().unwrap_or_default();
    let field = |key: &str| -> u32 {
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("{key}=")))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {key} for window {name}: {out:#}"))
    };
    (field("X"), field("Y"), field("WIDTH"), field("HEIGHT"))
}

#[tokio::test]
async fn the_desktop_runs_real_applications_and_takes_input() {
    let mcp = Mcp::connect(&with_sandboxes().1.url("")).await;
    let id = mcp.call_ok("sandbox_create", json!({})).await["sandboxId"]
        .as_str()
        .unwrap()
        .to_string();
    let (first, png) = computer(&mcp, json!({"sandboxId": id, "action": "screenshot"})).await;
    assert_eq!(first["started"], json!(true), "{first:#}");
    assert_eq!(
        (first["width"].clone(), first["height"].clone()),
        (json!(1280), json!(800))
    );
    assert_eq!(dimensions(&png.expect("a screenshot")), (1280, 800));

    // Typing into a terminal changes the screen and reaches the program in it.
    exec(
        &mcp,
        &id,
        "DISPLAY=:99 xterm -geometry 60x10+20+20 -title typing-here -e sh -c \
         'read line; printf \"%s\" \"$line\" > typed.txt; sleep 300' >/dev/null 2>&1 &",
    )
    .await;
    let (x, y, w, h) = window(&mcp, &id, "typing-here").await;
    let (_, before) = computer(
        &mcp,
        json!({"sandboxId": id, "action": "click", "x": x + w / 2, "y": y + h / 2}),
    )
    .await;
    let (typed, after) = computer(
        &mcp,
        json!({"sandboxId": id, "action": "type", "text": "hello desktop\n"}),
    )
    .await;
    assert_eq!(typed["started"], json!(false));
    assert_ne!(before.unwrap(), after.unwrap(), "typing changed no pixel");
    let mut seen = String::new();
    for _ in 0..20 {
        seen = exec(&mcp, &id, "cat typed.txt 2>/dev/null").await["stdout"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        if !seen.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert_eq!(seen, "hello desktop");

    // A click on a program's button presses it.
    exec(
        &mcp,
        &id,
        "DISPLAY=:99 sh -c 'xmessage -geometry +500+400 -buttons press-me:7 \"press the button\"; \
         echo $? > clicked.txt' >/dev/null 2>&1 &",
    )
    .await;
    let (x, y, _, h) = window(&mcp, &id, "xmessage").await;
    computer(
        &mcp,
        json!({"sandboxId": id, "action": "click", "x": x + 25, "y": y + h - 14}),
    )
    .await;
    let mut clicked = String::new();
    for _ in 0..20 {
        clicked = exec(&mcp, &id, "cat clicked.txt 2>/dev/null").await["stdout"]
            .as_str()
            .unwrap_or_default()
            .trim()
            .to_string();
        if !clicked.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert_eq!(clicked, "7", "the button was not pressed");

    // The other actions answer with a screenshot; bad input is refused clearly.
    for args in [
        json!({"action": "key", "keys": "shift+Tab Escape"}),
        json!({"action": "scroll", "x": 10, "y": 10, "direction": "down", "amount": 2}),
        json!({"action": "drag", "x": 10, "y": 10, "toX": 50, "toY": 60}),
        json!({"action": "double_click", "x": 5, "y": 5}),
        json!({"action": "wait", "ms": 100}),
    ] {
        let mut args = args;
        args["sandboxId"] = json!(id);
        let (_, png) = computer(&mcp, args).await;
        assert_eq!(dimensions(&png.expect("a screenshot")), (1280, 800));
    }
    for (args, needle) in [
        (
            json!({"action": "click", "x": 1280, "y": 5}),
            "off the screen",
        ),
        (json!({"action": "click"}), "`x` and `y`"),
        (json!({"action": "key", "keys": "a;rm -rf"}), "key names"),
        (json!({"action": "wait", "ms": 60000}), "at most"),
        (
            json!({"action": "resize", "width": 10, "height": 10}),
            "screen may be",
        ),
    ] {
        let mut args = args;
        args["sandboxId"] = json!(id);
        let error = mcp.call_err("sandbox_computer", args.clone()).await;
        assert!(error.contains(needle), "{args}: {error}");
    }

    // The live view: a signed link to noVNC's page, whose WebSocket reaches the VNC server.
    let (streamed, _) = computer(&mcp, json!({"sandboxId": id, "action": "stream"})).await;
    let url = streamed["streamUrl"]
        .as_str()
        .expect("streamUrl")
        .to_string();
    assert!(streamed["streamExpiresAt"].is_string(), "{streamed:#}");
    let page = handoff_tests::preview_client(&url)
        .get(&url)
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), 200);
    assert!(page.text().await.unwrap().contains("noVNC"));
    assert_eq!(rfb_banner(&url).await.get(..4), Some("RFB "));

    // Resized: a new screen of that size; stopped: no image, and the next use starts it again.
    let (resized, png) = computer(
        &mcp,
        json!({"sandboxId": id, "action": "resize", "width": 800, "height": 600}),
    )
    .await;
    assert_eq!(resized["started"], json!(true));
    assert_eq!(dimensions(&png.unwrap()), (800, 600));
    let (stopped, png) = computer(&mcp, json!({"sandboxId": id, "action": "stop"})).await;
    assert!(png.is_none(), "{stopped:#}");
    let (again, _) = computer(&mcp, json!({"sandboxId": id, "action": "screenshot"})).await;
    assert_eq!(again["started"], json!(true));
    mcp.call_ok("sandbox_delete", json!({"sandboxId": id}))
        .await;
}

/// The first message of the live view's WebSocket (the VNC server's banner), through the
/// preview origin.
async fn rfb_banner(page_url: &str) -> String {
    use futures::StreamExt;
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    let parsed = reqwest::Url::parse(page_url).unwrap();
    let port = parsed.port().unwrap_or(80);
    let socket_url = format!("ws://{}:{port}/websockify", parsed.host_str().unwrap());
    let mut request = socket_url.into_client_request().unwrap();
    request
        .headers_mut()
        .insert("sec-websocket-protocol", "binary".parse().unwrap());
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    let (mut socket, _) = tokio_tungstenite::client_async(request, tcp)
        .await
        .expect("the WebSocket through the preview origin");
    let message = tokio::time::timeout(Duration::from_secs(10), socket.next())
        .await
        .expect("a message within 10 s")
        .expect("a message")
        .expect("not an error");
    String::from_utf8_lossy(&message.into_data()).into_owned()
}
