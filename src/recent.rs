//! Facts this isolate learned from a Durable Object a moment ago and may trust for a few
//! seconds instead of asking again: that an MCP session is live, that an OAuth access token is
//! valid. Each entry expires after the cache's time to live; whoever learns the fact is no longer
//! true (a session ended here, a token refused) forgets it at once. Other isolates learn of a
//! revocation when their entry expires, so the time to live is how prompt revocation is.

use std::cell::RefCell;
use std::collections::BTreeMap;

pub struct Recent<V> {
    entries: RefCell<BTreeMap<String, (i64, V)>>,
    ttl_ms: i64,
    max: usize,
}

impl<V: Clone> Recent<V> {
    /// A cache whose entries are trusted for `ttl_ms`, holding at most `max` of them.
    pub const fn new(ttl_ms: i64, max: usize) -> Recent<V> {
        Recent {
            entries: RefCell::new(BTreeMap::new()),
            ttl_ms,
            max,
        }
    }

    /// The value learned under `key` within the time to live, if any.
    pub fn get(&self, key: &str, now: i64) -> Option<V> {
        let entries = self.entries.borrow();
        let (at, value) = entries.get(key)?;
        (now - at < self.ttl_ms && now >= *at).then(|| value.clone())
    }

    /// Remembers `value` under `key` as learned at `now`.
    pub fn put(&self, key: String, value: V, now: i64) {
        let mut entries = self.entries.borrow_mut();
        if entries.len() >= self.max && !entries.contains_key(&key) {
            let ttl = self.ttl_ms;
            entries.retain(|_, (at, _)| now - *at < ttl);
            if entries.len() >= self.max {
                // Still full of live entries: start over rather than grow.
                entries.clear();
            }
        }
        entries.insert(key, (now, value));
    }

    pub fn forget(&self, key: &str) {
        self.entries.borrow_mut().remove(key);
    }

    /// Forgets everything (when what was learned may no longer hold for entries it cannot name).
    pub fn clear(&self) {
        self.entries.borrow_mut().clear();
    }
}

#[cfg(test)]
mod tests {
    use super::Recent;

    #[test]
    fn entries_expire_are_forgotten_and_stay_bounded() {
        let cache: Recent<u32> = Recent::new(1_000, 3);
        cache.put("a".into(), 1, 10_000);
        assert_eq!(cache.get("a", 10_999), Some(1));
        assert_eq!(cache.get("a", 11_000), None, "expired");
        assert_eq!(
            cache.get("a", 9_000),
            None,
            "a clock that went back trusts nothing"
        );
        cache.put("a".into(), 2, 20_000);
        cache.forget("a");
        assert_eq!(cache.get("a", 20_001), None);
        for (i, key) in ["b", "c", "d", "e"].into_iter().enumerate() {
            cache.put(key.into(), i as u32, 30_000);
        }
        assert!(cache.entries.borrow().len() <= 3);
        assert_eq!(cache.get("e", 30_001), Some(3));
    }
}
