//! A sandbox's desktop (`POST /v1/sandboxes/{id}/desktop`): an X display started on demand, its
//! screen as PNG, and mouse and keyboard input.

use serde::{Deserialize, Serialize};

/// The display the desktop runs on, inside the sandbox (start GUI programs with it).
pub const DISPLAY: &str = ":99";
/// The screen's size when nothing else is asked.
pub const DEFAULT_SIZE: (u32, u32) = (1280, 800);
/// The largest and smallest screen.
pub const MAX_SIZE: (u32, u32) = (1920, 1200);
pub const MIN_SIZE: (u32, u32) = (320, 240);
/// The largest screenshot sent (PNG bytes); a bigger one is sent at half size (or less).
pub const SCREENSHOT_CAP: usize = 1024 * 1024;
/// The longest wait.
pub const WAIT_MAX_MS: u64 = 10_000;
/// The longest text typed at once.
pub const TYPE_MAX_CHARS: usize = 2000;
/// Where the live view's VNC server listens inside the sandbox (loopback only).
pub const VNC_PORT: u16 = 5909;
/// Where the live view (noVNC's page and its WebSocket) is served inside the sandbox.
pub const STREAM_PORT: u16 = 6089;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MouseButton {
    Left,
    Middle,
    Right,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ScrollDirection {
    Up,
    Down,
    Left,
    Right,
}

/// What to do on the desktop. Every action starts the desktop if it is not running; every one
/// but `stop` answers with a screenshot taken after it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum DesktopAction {
    Screenshot,
    MouseMove {
        x: u32,
        y: u32,
    },
    Click {
        x: u32,
        y: u32,
        button: MouseButton,
        count: u32,
    },
    Drag {
        x: u32,
        y: u32,
        to_x: u32,
        to_y: u32,
    },
    Scroll {
        x: u32,
        y: u32,
        direction: ScrollDirection,
        amount: u32,
    },
    /// Keys in xdotool's names, e.g. `ctrl+c`, `Return`, `alt+Tab` (space-separated to press
    /// several in turn).
    Key {
        keys: String,
    },
    Type {
        text: String,
    },
    Wait {
        ms: u64,
    },
    /// A new screen size: the desktop starts again (its windows close).
    Resize {
        width: u32,
        height: u32,
    },
    /// Starts the live view (view only) on `STREAM_PORT`, if it is not running.
    Stream,
    Stop,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DesktopReply {
    pub display: String,
    pub width: u32,
    pub height: u32,
    /// Whether this action started the desktop.
    pub started: bool,
    /// The screen after the action (base64 PNG), unless the action was `stop`.
    pub png_base64: Option<String>,
    /// The screenshot's own size (smaller than the screen when it was scaled down to fit).
    pub image_width: u32,
    pub image_height: u32,
    /// The port serving the live view, once `stream` started it.
    #[serde(default)]
    pub stream_port: Option<u16>,
}
