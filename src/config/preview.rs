//! The preview base (`HANDOFF_PREVIEW_URL`): the origin under which every preview gets one of
//! its own.

use super::{get, PREVIEW_URL};
use worker::Env;

/// The preview base: scheme and `host[:port]` under which every preview gets its own origin.
#[derive(Clone)]
pub struct PreviewBase {
    pub scheme: String,
    /// Lower case, without the port.
    pub host: String,
    /// `:port`, or empty.
    pub port: String,
}

/// Parsed once per isolate, like the variable it comes from (`read::get`): every request asks
/// (is it for a preview origin?).
pub fn preview_base(env: &Env) -> Option<PreviewBase> {
    thread_local! {
        static PARSED: std::cell::OnceCell<Option<PreviewBase>> = const { std::cell::OnceCell::new() };
    }
    PARSED.with(|parsed| parsed.get_or_init(|| parse_preview_base(env)).clone())
}

fn parse_preview_base(env: &Env) -> Option<PreviewBase> {
    let raw = get(env, PREVIEW_URL)?;
    let url = worker::Url::parse(raw.trim()).ok()?;
    if !matches!(url.scheme(), "http" | "https") || url.path().len() > 1 {
        return None;
    }
    Some(PreviewBase {
        scheme: url.scheme().to_string(),
        host: url.host_str()?.to_ascii_lowercase(),
        port: url.port().map(|p| format!(":{p}")).unwrap_or_default(),
    })
}
