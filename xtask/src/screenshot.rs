//! `cargo xtask screenshot URL [--out FILE] [--width W] [--height H] [--dark]`: renders a page (a
//! run page's signed link, say) in headless Chromium at phone size — 390 × 844 CSS pixels at 2×,
//! by default; `--dark` as a browser that prefers dark — and writes a PNG, so anyone can look at
//! what users see.

use crate::setup;
use std::path::PathBuf;
use std::process::Command;

const CHROMIUM: &str = "/usr/bin/chromium";

pub fn run(args: &[String]) -> crate::Result {
    let mut url = None;
    let (mut out, mut width, mut height) = (PathBuf::from("screenshot.png"), 390u32, 844u32);
    let mut dark = false;
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        let mut value = || {
            rest.next()
                .cloned()
                .ok_or_else(|| format!("{arg} needs a value"))
        };
        match arg.as_str() {
            "--out" => out = PathBuf::from(value()?),
            "--width" => width = number(&value()?)?,
            "--height" => height = number(&value()?)?,
            "--dark" => dark = true,
            other if other.starts_with("http://") || other.starts_with("https://") => {
                url = Some(other.to_string())
            }
            other => return Err(format!("unknown argument {other:?}; usage: cargo xtask screenshot URL [--out FILE] [--width W] [--height H] [--dark]")),
        }
    }
    let url = url.ok_or(
        "usage: cargo xtask screenshot URL [--out FILE] [--width W] [--height H] [--dark]",
    )?;
    setup::ensure_debian(&[setup::CHROMIUM])?;
    let profile = std::env::temp_dir().join(format!("handoff-screenshot-{}", std::process::id()));
    let out = std::env::current_dir()
        .map_err(|e| e.to_string())?
        .join(out);
    let mut command = Command::new(CHROMIUM);
    command
        .args([
            "--headless=new",
            "--disable-gpu",
            "--hide-scrollbars",
            "--no-first-run",
            "--force-device-scale-factor=2",
            // Enough for the page to load; a page that streams updates never "finishes".
            "--virtual-time-budget=4000",
        ])
        .arg(format!("--window-size={width},{height}"))
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(format!("--screenshot={}", out.display()));
    if dark {
        command.arg("--blink-settings=preferredColorScheme=0");
    }
    if setup::is_root() {
        // Chromium's own sandbox cannot start as root.
        command.arg("--no-sandbox");
    }
    command.arg(&url);
    let result = crate::proc::run(&mut command);
    let _ = std::fs::remove_dir_all(&profile);
    result?;
    println!("xtask: wrote {} ({width} × {height} at 2×)", out.display());
    Ok(())
}

fn number(text: &str) -> crate::Result<u32> {
    text.parse::<u32>()
        .ok()
        .filter(|n| (100..=4000).contains(n))
        .ok_or_else(|| format!("{text:?} is not a size from 100 to 4000"))
}
