//! `sandbox_computer`: a sandbox's desktop as a tool — screenshots and mouse and keyboard
//! input, each answered with the screen as an MCP image.

use super::access::{annotations, not_found_hint, sandbox};
use super::{Ctx, ToolHandler};
use crate::error::{Error, Result};
use crate::sandbox::api::Desktop;
use handoff_wire::desktop::{self as desktop, DesktopAction, MouseButton, ScrollDirection};
use rmcp::model::{ContentBlock, ToolAnnotations};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub struct Computer;

#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    Up,
    Down,
    Left,
    Right,
}

#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ComputerAction {
    Screenshot,
    MouseMove,
    Click,
    DoubleClick,
    RightClick,
    MiddleClick,
    Drag,
    Scroll,
    Key,
    Type,
    Wait,
    Resize,
    Stream,
    Stop,
}

/// Use a sandbox's desktop (an X display, 1280×800 unless resized, started on first use and
/// stopped with the sandbox): take a screenshot, move, click (double, right, middle), drag,
/// scroll, press keys, type text, wait (at most 10 s), resize the screen (its windows close),
/// get a live view (`stream`: a signed, expiring link to a view-only noVNC page) or stop it. Every action but stop answers with a fresh screenshot (PNG, halved while larger
/// than 1 MB). Coordinates are pixels from the top left and must be on the screen. Start
/// programs on it with sandbox_exec and DISPLAY=:99, in the background (e.g.
/// `DISPLAY=:99 xterm &`).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ComputerParams {
    /// The sandboxId returned by sandbox_create.
    pub sandbox_id: String,
    /// What to do.
    pub action: ComputerAction,
    /// For mouse_move, the clicks, drag (where it starts) and scroll.
    pub x: Option<u32>,
    /// For mouse_move, the clicks, drag (where it starts) and scroll.
    pub y: Option<u32>,
    /// For drag: where it ends.
    pub to_x: Option<u32>,
    /// For drag: where it ends.
    pub to_y: Option<u32>,
    /// For type: the text (at most 2000 characters; a newline presses Return).
    pub text: Option<String>,
    /// For key: key names such as Return, ctrl+c, alt+Tab, space-separated to press in turn.
    pub keys: Option<String>,
    /// For scroll: up, down, left or right.
    pub direction: Option<Direction>,
    /// For scroll: how many steps (1 to 20, default 3).
    pub amount: Option<u32>,
    /// For wait: milliseconds (at most 10000, default 1000).
    pub ms: Option<u64>,
    /// For resize: the new width (320 to 1920).
    pub width: Option<u32>,
    /// For resize: the new height (240 to 1200).
    pub height: Option<u32>,
    /// For stream: how long the live view's link is valid, 60 to 604800 seconds (default 3600).
    pub expires_in_seconds: Option<u32>,
}

#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ComputerView {
    pub sandbox_id: String,
    /// The display programs use (`DISPLAY=:99`).
    pub display: String,
    /// The screen's size (0 after stop).
    pub width: u32,
    pub height: u32,
    /// Whether this call started the desktop.
    pub started: bool,
    /// The screenshot's size (smaller than the screen when it was scaled down); the image
    /// itself is the call's image content.
    pub image_width: u32,
    pub image_height: u32,
    /// For stream: a signed, expiring link to a live, view-only picture of the desktop
    /// (noVNC on the sandbox's preview origin).
    pub stream_url: Option<String>,
    pub stream_expires_at: Option<String>,
    #[serde(skip)]
    #[schemars(skip)]
    pub png_base64: Option<String>,
}

fn point(p: &ComputerParams) -> Result<(u32, u32)> {
    match (p.x, p.y) {
        (Some(x), Some(y)) => Ok((x, y)),
        _ => Err(Error::invalid("this action needs `x` and `y`")),
    }
}

fn action(p: &ComputerParams) -> Result<DesktopAction> {
    let click = |button, count| -> Result<DesktopAction> {
        let (x, y) = point(p)?;
        Ok(DesktopAction::Click {
            x,
            y,
            button,
            count,
        })
    };
    Ok(match p.action {
        ComputerAction::Screenshot => DesktopAction::Screenshot,
        ComputerAction::Stop => DesktopAction::Stop,
        ComputerAction::Stream => DesktopAction::Stream,
        ComputerAction::MouseMove => {
            let (x, y) = point(p)?;
            DesktopAction::MouseMove { x, y }
        }
        ComputerAction::Click => click(MouseButton::Left, 1)?,
        ComputerAction::DoubleClick => click(MouseButton::Left, 2)?,
        ComputerAction::RightClick => click(MouseButton::Right, 1)?,
        ComputerAction::MiddleClick => click(MouseButton::Middle, 1)?,
        ComputerAction::Drag => {
            let (x, y) = point(p)?;
            let (Some(to_x), Some(to_y)) = (p.to_x, p.to_y) else {
                return Err(Error::invalid("drag needs `toX` and `toY`"));
            };
            DesktopAction::Drag { x, y, to_x, to_y }
        }
        ComputerAction::Scroll => {
            let (x, y) = point(p)?;
            let amount = p.amount.unwrap_or(3);
            if !(1..=20).contains(&amount) {
                return Err(Error::invalid("`amount` must be 1 to 20"));
            }
            DesktopAction::Scroll {
                x,
                y,
                direction: match p.direction.unwrap_or(Direction::Down) {
                    Direction::Up => ScrollDirection::Up,
                    Direction::Down => ScrollDirection::Down,
                    Direction::Left => ScrollDirection::Left,
                    Direction::Right => ScrollDirection::Right,
                },
                amount,
            }
        }
        ComputerAction::Key => DesktopAction::Key {
            keys: p
                .keys
                .clone()
                .ok_or_else(|| Error::invalid("key needs `keys`, e.g. \"ctrl+c\""))?,
        },
        ComputerAction::Type => {
            let text = p.text.clone().unwrap_or_default();
            if text.is_empty() || text.chars().count() > desktop::TYPE_MAX_CHARS {
                return Err(Error::invalid(format!(
                    "type needs `text` of 1 to {} characters",
                    desktop::TYPE_MAX_CHARS
                )));
            }
            DesktopAction::Type { text }
        }
        ComputerAction::Wait => {
            let ms = p.ms.unwrap_or(1000);
            if ms > desktop::WAIT_MAX_MS {
                return Err(Error::invalid(format!(
                    "`ms` is at most {}",
                    desktop::WAIT_MAX_MS
                )));
            }
            DesktopAction::Wait { ms }
        }
        ComputerAction::Resize => match (p.width, p.height) {
            (Some(width), Some(height)) => DesktopAction::Resize { width, height },
            _ => return Err(Error::invalid("resize needs `width` and `height`")),
        },
    })
}

impl ToolHandler for Computer {
    const NAME: &'static str = "sandbox_computer";
    const TITLE: &'static str = "Use a sandbox's desktop";
    type Params = ComputerParams;
    type Output = ComputerView;

    fn annotations() -> ToolAnnotations {
        annotations(false, false, false, false)
    }

    async fn run(ctx: &Ctx<'_>, p: ComputerParams) -> Result<ComputerView> {
        let action = action(&p)?;
        let ttl = super::sandbox_params::preview_ttl(p.expires_in_seconds)?;
        let client = sandbox(ctx, &p.sandbox_id).await?;
        let reply = client
            .call(Desktop {
                action: serde_json::to_value(&action)?,
            })
            .await
            .map_err(not_found_hint)?;
        let expires_at = crate::time::now_ms() / 1000 + i64::from(ttl);
        let stream_url = match (p.action, reply.stream_port) {
            (ComputerAction::Stream, Some(port)) => Some(format!(
                "{}vnc.html?autoconnect=1&view_only=1&resize=scale&path=websockify",
                crate::links::preview_url(ctx.env, &p.sandbox_id, port, expires_at)?
            )),
            _ => None,
        };
        Ok(ComputerView {
            stream_expires_at: stream_url
                .as_ref()
                .map(|_| crate::time::rfc3339(expires_at * 1000)),
            stream_url,
            sandbox_id: p.sandbox_id,
            display: reply.display,
            width: reply.width,
            height: reply.height,
            started: reply.started,
            image_width: reply.image_width,
            image_height: reply.image_height,
            png_base64: reply.png_base64,
        })
    }

    fn summary(out: &ComputerView) -> String {
        match &out.png_base64 {
            Some(_) => format!(
                "The {}×{} screen of sandbox {} (display {}){}.",
                out.width,
                out.height,
                out.sandbox_id,
                out.display,
                if out.started { ", just started" } else { "" }
            ),
            None => format!("The desktop of sandbox {} is stopped.", out.sandbox_id),
        }
    }

    fn extra_content(out: &ComputerView) -> Vec<ContentBlock> {
        out.png_base64
            .iter()
            .map(|png| ContentBlock::image(png.clone(), "image/png"))
            .collect()
    }
}
