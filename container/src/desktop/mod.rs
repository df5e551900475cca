//! A sandbox's desktop: an X server (Xvfb) and a light window manager (twm) started on demand
//! as background processes of the sandbox — so they stop with it, and when it pauses — driven
//! with xdotool and photographed with xwd, all inside the sandbox under its confinement. The
//! daemon only reads the window dump and encodes it as PNG.

pub mod image;

use crate::error::{ApiError, Result};
use crate::exec;
use crate::processes;
use crate::sandbox::{Registry, Sandbox};
use base64::Engine;
use handoff_wire::desktop::*;
use handoff_wire::StartProcess;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::AsyncReadExt;

/// A running desktop: its X server's process and screen size.
#[derive(Clone, Copy)]
struct Screen {
    server: u64,
    width: u32,
    height: u32,
    /// The live view's VNC server and web server, once started.
    stream: Option<(u64, u64)>,
}

/// Desktops by sandbox id.
fn screens() -> &'static Mutex<HashMap<String, Screen>> {
    static SCREENS: std::sync::OnceLock<Mutex<HashMap<String, Screen>>> =
        std::sync::OnceLock::new();
    SCREENS.get_or_init(Mutex::default)
}

/// twm's settings: windows placed without asking, the server never grabbed.
const TWMRC: &str = "RandomPlacement\nNoGrabServer\nUsePPosition \"on\"\n";

fn env() -> BTreeMap<String, String> {
    BTreeMap::from([("DISPLAY".to_string(), DISPLAY.to_string())])
}

fn argv(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

/// Runs a program on the desktop to completion; its standard output.
async fn run(registry: &Registry, sandbox: &Arc<Sandbox>, args: Vec<String>) -> Result<String> {
    let result = exec::run_argv(registry, sandbox, &args, None, &env(), 15_000).await?;
    if result.exit_code != Some(0) {
        return Err(ApiError::bad_request(format!(
            "{} failed on the desktop (exit {:?}): {}",
            args[0],
            result.exit_code,
            result.stderr.trim()
        )));
    }
    Ok(result.stdout)
}

fn running(sandbox: &Sandbox, id: u64) -> bool {
    sandbox
        .processes
        .list()
        .iter()
        .any(|p| p.id == id && p.running)
}

/// The desktop, started (or started again at `size`) if need be; whether this call started it.
async fn ensure(
    registry: &Registry,
    sandbox: &Arc<Sandbox>,
    size: Option<(u32, u32)>,
) -> Result<(Screen, bool)> {
    let current = screens()
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get(&sandbox.id)
        .copied();
    if let Some(screen) = current.filter(|s| running(sandbox, s.server)) {
        match size {
            Some(size) if size != (screen.width, screen.height) => stop(sandbox, &screen).await,
            _ => return Ok((screen, false)),
        }
    }
    let (width, height) = size.unwrap_or(DEFAULT_SIZE);
    let server = processes::start(
        registry,
        sandbox,
        &StartProcess {
            // A server killed before (stopped, resized, the sandbox paused) may have left its
            // lock behind.
            command: format!(
                "rm -f /tmp/.X{n}-lock /tmp/.X11-unix/X{n}; \
                 exec Xvfb {DISPLAY} -screen 0 {width}x{height}x24 -nolisten tcp",
                n = DISPLAY.trim_start_matches(':')
            ),
            argv: None,
            cwd: None,
            env: BTreeMap::new(),
            timeout_ms: None,
            key: None,
        },
    )
    .await?;
    let mut ready = false;
    for _ in 0..100 {
        let probe = argv(&["xdotool", "getdisplaygeometry"]);
        if run(registry, sandbox, probe).await.is_ok() {
            ready = true;
            break;
        }
        if !running(sandbox, server.id) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    if !ready {
        let log = processes::logs(sandbox, server.id)
            .map(|l| l.stderr)
            .unwrap_or_default();
        let _ = processes::kill(sandbox, server.id).await;
        return Err(ApiError::unavailable(format!(
            "the desktop did not start (is Xvfb installed where the sandbox runs?): {}",
            log.trim()
        )));
    }
    let window_manager = format!(
        "printf '{}' > /tmp/.handoff-twmrc && exec twm -f /tmp/.handoff-twmrc",
        TWMRC.replace('\n', "\\n")
    );
    processes::start(
        registry,
        sandbox,
        &StartProcess {
            command: window_manager,
            argv: None,
            cwd: None,
            env: env(),
            timeout_ms: None,
            key: None,
        },
    )
    .await?;
    let screen = Screen {
        server: server.id,
        width,
        height,
        stream: None,
    };
    screens()
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(sandbox.id.clone(), screen);
    Ok((screen, true))
}

/// Stops a desktop's processes: the live view's and the X server (the window manager and the
/// applications end with it).
async fn stop(sandbox: &Sandbox, screen: &Screen) {
    if let Some((vnc, web)) = screen.stream {
        let _ = processes::kill(sandbox, web).await;
        let _ = processes::kill(sandbox, vnc).await;
    }
    let _ = processes::kill(sandbox, screen.server).await;
}

fn check_point(screen: &Screen, x: u32, y: u32) -> Result<()> {
    if x >= screen.width || y >= screen.height {
        return Err(ApiError::bad_request(format!(
            "({x}, {y}) is off the screen, which is {}×{} (x 0–{}, y 0–{})",
            screen.width,
            screen.height,
            screen.width - 1,
            screen.height - 1
        )));
    }
    Ok(())
}

/// Key names as xdotool takes them: letters, digits, `_`, `+` and `-`, space-separated.
fn check_keys(keys: &str) -> Result<Vec<String>> {
    let names: Vec<String> = keys.split_whitespace().map(str::to_string).collect();
    let valid = !names.is_empty()
        && names.len() <= 50
        && names.iter().all(|k| {
            k.len() <= 64
                && k.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"_+-".contains(&b))
        });
    if !valid {
        return Err(ApiError::bad_request(
            "keys must be key names such as Return, ctrl+c or alt+Tab, separated by spaces",
        ));
    }
    Ok(names)
}

/// The xdotool arguments for an input action (checked against the screen).
fn input(screen: &Screen, action: &DesktopAction) -> Result<Option<Vec<String>>> {
    let at = |x: u32, y: u32| -> Result<Vec<String>> {
        check_point(screen, x, y)?;
        Ok(argv(&[
            "mousemove",
            &x.to_string(),
            &y.to_string(),
            "sleep",
            "0.05",
        ]))
    };
    let mut args = vec!["xdotool".to_string()];
    match action {
        DesktopAction::Screenshot
        | DesktopAction::Stop
        | DesktopAction::Resize { .. }
        | DesktopAction::Stream => return Ok(None),
        DesktopAction::Wait { ms } => {
            if *ms > WAIT_MAX_MS {
                return Err(ApiError::bad_request(format!(
                    "a wait is at most {WAIT_MAX_MS} ms"
                )));
            }
            args.extend(argv(&["sleep", &format!("{:.3}", *ms as f64 / 1000.0)]));
        }
        DesktopAction::MouseMove { x, y } => args.extend(at(*x, *y)?),
        DesktopAction::Click {
            x,
            y,
            button,
            count,
        } => {
            let button = match button {
                MouseButton::Left => "1",
                MouseButton::Middle => "2",
                MouseButton::Right => "3",
            };
            let count = (*count).clamp(1, 3).to_string();
            args.extend(at(*x, *y)?);
            args.extend(argv(&["click", "--repeat", &count, button]));
        }
        DesktopAction::Drag { x, y, to_x, to_y } => {
            check_point(screen, *to_x, *to_y)?;
            args.extend(at(*x, *y)?);
            args.extend(argv(&["mousedown", "1", "sleep", "0.05"]));
            args.extend(argv(&["mousemove", &to_x.to_string(), &to_y.to_string()]));
            args.extend(argv(&["sleep", "0.05", "mouseup", "1"]));
        }
        DesktopAction::Scroll {
            x,
            y,
            direction,
            amount,
        } => {
            let button = match direction {
                ScrollDirection::Up => "4",
                ScrollDirection::Down => "5",
                ScrollDirection::Left => "6",
                ScrollDirection::Right => "7",
            };
            let amount = (*amount).clamp(1, 20).to_string();
            args.extend(at(*x, *y)?);
            args.extend(argv(&["click", "--repeat", &amount, button]));
        }
        DesktopAction::Key { keys } => {
            args.extend(argv(&["key", "--clearmodifiers"]));
            args.extend(check_keys(keys)?);
        }
        DesktopAction::Type { text } => {
            if text.is_empty() || text.chars().count() > TYPE_MAX_CHARS || text.contains('\0') {
                return Err(ApiError::bad_request(format!(
                    "text must be 1 to {TYPE_MAX_CHARS} characters"
                )));
            }
            args.extend(argv(&["type", "--delay", "5", "--", text]));
        }
    }
    Ok(Some(args))
}

/// The screen now, as PNG within the cap.
async fn screenshot(
    registry: &Registry,
    sandbox: &Arc<Sandbox>,
    screen: &Screen,
) -> Result<(Vec<u8>, u32, u32)> {
    let args = argv(&["xwd", "-root", "-silent"]);
    // Shared like any command, so a pause, snapshot or delete does not run beside the dump (or
    // find the sandbox started again after it halted it). Nothing below takes the gate again.
    let _shared = sandbox.gate.shared().await?;
    let mut child = exec::spawn(registry, sandbox, &args, None, &env()).await?;
    let cap = screen.width as usize * screen.height as usize * 4 + 64 * 1024;
    let mut dump = Vec::new();
    if let Some(out) = child.stdout.take() {
        let mut limited = out.take(cap as u64);
        let read = limited.read_to_end(&mut dump);
        if tokio::time::timeout(Duration::from_secs(15), read)
            .await
            .is_err()
        {
            exec::kill_group(&child);
            return Err(ApiError::internal("the screenshot took too long"));
        }
    }
    let _ = child.wait().await;
    let image = image::from_xwd(&dump).map_err(ApiError::internal)?;
    Ok(image::png_within(image, SCREENSHOT_CAP))
}

/// Does `action` on the sandbox's desktop (starting it if need be) and photographs the result.
pub async fn act(
    registry: &Registry,
    sandbox: &Arc<Sandbox>,
    action: DesktopAction,
) -> Result<DesktopReply> {
    if action == DesktopAction::Stop {
        let screen = screens()
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&sandbox.id);
        if let Some(screen) = &screen {
            stop(sandbox, screen).await;
        }
        let (width, height) = screen.map_or((0, 0), |s| (s.width, s.height));
        return Ok(DesktopReply {
            display: DISPLAY.into(),
            width,
            height,
            started: false,
            png_base64: None,
            image_width: 0,
            image_height: 0,
            stream_port: None,
        });
    }
    let size = match action {
        DesktopAction::Resize { width, height } => {
            let fits = (MIN_SIZE.0..=MAX_SIZE.0).contains(&width)
                && (MIN_SIZE.1..=MAX_SIZE.1).contains(&height);
            if !fits {
                return Err(ApiError::bad_request(format!(
                    "the screen may be {}×{} to {}×{}",
                    MIN_SIZE.0, MIN_SIZE.1, MAX_SIZE.0, MAX_SIZE.1
                )));
            }
            Some((width, height))
        }
        _ => None,
    };
    let (mut screen, started) = ensure(registry, sandbox, size).await?;
    if action == DesktopAction::Stream {
        screen.stream = Some(stream(registry, sandbox, &screen).await?);
        screens()
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(sandbox.id.clone(), screen);
    }
    if let Some(args) = input(&screen, &action)? {
        run(registry, sandbox, args).await?;
        if !matches!(action, DesktopAction::Wait { .. }) {
            // Let the application draw what the input changed.
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    let (png, image_width, image_height) = screenshot(registry, sandbox, &screen).await?;
    Ok(DesktopReply {
        display: DISPLAY.into(),
        width: screen.width,
        height: screen.height,
        started,
        png_base64: Some(base64::engine::general_purpose::STANDARD.encode(png)),
        image_width,
        image_height,
        stream_port: screen
            .stream
            .filter(|(vnc, web)| running(sandbox, *vnc) && running(sandbox, *web))
            .map(|_| STREAM_PORT),
    })
}

/// Starts the live view — a view-only VNC server of the display on loopback and noVNC's page
/// with its WebSocket bridge — unless it runs; its processes.
async fn stream(
    registry: &Registry,
    sandbox: &Arc<Sandbox>,
    screen: &Screen,
) -> Result<(u64, u64)> {
    if let Some((vnc, web)) = screen.stream {
        if running(sandbox, vnc) && running(sandbox, web) {
            return Ok((vnc, web));
        }
        let _ = processes::kill(sandbox, vnc).await;
        let _ = processes::kill(sandbox, web).await;
    }
    let start = |command: String| StartProcess {
        command,
        argv: None,
        cwd: None,
        env: env(),
        timeout_ms: None,
        key: None,
    };
    let vnc = processes::start(
        registry,
        sandbox,
        &start(format!(
            "exec x11vnc -display {DISPLAY} -rfbport {VNC_PORT} -localhost -shared -forever \
             -viewonly -nopw -quiet -noxdamage"
        )),
    )
    .await?;
    let web = processes::start(
        registry,
        sandbox,
        &start(format!(
            "exec websockify --web /usr/share/novnc {STREAM_PORT} 127.0.0.1:{VNC_PORT}"
        )),
    )
    .await?;
    for _ in 0..100 {
        let listening = crate::ports::list(registry, sandbox)
            .await
            .unwrap_or_default();
        let up = |port| listening.iter().any(|p| p.port == port);
        if up(VNC_PORT) && up(STREAM_PORT) {
            return Ok((vnc.id, web.id));
        }
        if !running(sandbox, vnc.id) || !running(sandbox, web.id) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let _ = processes::kill(sandbox, vnc.id).await;
    let _ = processes::kill(sandbox, web.id).await;
    Err(ApiError::unavailable(
        "the live view did not start (are x11vnc, websockify and noVNC installed where the \
         sandbox runs?)",
    ))
}
