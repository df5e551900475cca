//! Reading a variable or secret from the runtime, once per isolate.

use std::cell::RefCell;
use std::collections::HashMap;
use worker::Env;

thread_local! {
    /// Every variable read so far, for the life of the isolate. A deployment's variables and
    /// secrets never change under a running isolate (a new version, or a changed secret,
    /// starts new ones), and each read from the runtime crosses into JavaScript: several per
    /// request, 3 % of the isolate's CPU on `opencode_get_result` (`cargo xtask bench profile`).
    static READ: RefCell<HashMap<String, Option<String>>> = RefCell::new(HashMap::new());
}

/// Reads one variable or secret; unset and empty are the same.
pub fn get(env: &Env, name: &str) -> Option<String> {
    if let Some(known) = READ.with(|read| read.borrow().get(name).cloned()) {
        return known;
    }
    let value = env
        .var(name)
        .ok()
        .map(|v| v.to_string().trim().to_string())
        .filter(|v| !v.is_empty());
    READ.with(|read| read.borrow_mut().insert(name.to_string(), value.clone()));
    value
}
