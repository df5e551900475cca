//! Capping a stream of output: the daemon for exec results, the Worker for streamed ones.

/// Keeps the first and last `cap / 2` bytes of a stream and counts what was dropped between.
pub struct HeadTail {
    cap: usize,
    head: Vec<u8>,
    tail: std::collections::VecDeque<u8>,
    dropped: u64,
}

impl HeadTail {
    pub fn new(cap: usize) -> Self {
        Self {
            cap,
            head: Vec::new(),
            tail: std::collections::VecDeque::new(),
            dropped: 0,
        }
    }

    pub fn push(&mut self, mut bytes: &[u8]) {
        let half = self.cap / 2;
        if self.head.len() < half {
            let take = (half - self.head.len()).min(bytes.len());
            self.head.extend_from_slice(&bytes[..take]);
            bytes = &bytes[take..];
        }
        for &b in bytes {
            if self.tail.len() == self.cap - half {
                self.tail.pop_front();
                self.dropped += 1;
            }
            self.tail.push_back(b);
        }
    }

    pub fn truncated(&self) -> bool {
        self.dropped > 0
    }

    /// The kept text, with a marker where bytes were left out.
    pub fn finish(self) -> String {
        let mut out = String::from_utf8_lossy(&self.head).into_owned();
        if self.dropped > 0 {
            out.push_str(&format!("\n[… {} bytes omitted …]\n", self.dropped));
        }
        let tail: Vec<u8> = self.tail.into_iter().collect();
        out.push_str(&String::from_utf8_lossy(&tail));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn head_and_tail_are_kept_with_a_marker() {
        let mut h = HeadTail::new(10);
        h.push(b"0123456789abcdefghij");
        assert!(h.truncated());
        let text = h.finish();
        assert!(text.starts_with("01234"), "{text}");
        assert!(text.ends_with("fghij"), "{text}");
        assert!(text.contains("10 bytes omitted"), "{text}");
        let mut small = HeadTail::new(10);
        small.push(b"abc");
        small.push(b"def");
        assert!(!small.truncated());
        assert_eq!(small.finish(), "abcdef");
    }
}
