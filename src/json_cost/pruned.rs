//! Pruning JSON text as it streams in: the parts a skeleton names are written out as they are
//! read and every other part is checked and dropped, so an answer far larger than what is read
//! of it (an agent's whole conversation, when only roles, times and titles are followed) costs
//! the memory of what is kept, never of the whole. The grammar is checked throughout; the text
//! written is JSON whenever the text read is, and parsing it with [`super::kept::parse`] gives
//! what parsing the whole would have.
//!
//! A skeleton is the JSON form of a [`super::kept::Keep`]: `null` keeps scalars (a container
//! there becomes `null`), an object its named keys each by its own skeleton, an array of one
//! skeleton each element by it, and `true` the value whole, as it is written.

use number::Num;
use serde_json::Value;
use std::fmt;

mod number;

/// The deepest nesting read, kept or not (each level costs a few bytes of the pruner's stack).
pub const MAX_DEPTH: usize = 10_000;
/// Keys longer than this (as written, escapes and all) are no name a skeleton holds.
const KEY_MAX: usize = 1024;

/// Why text could not be pruned.
#[derive(Debug, PartialEq)]
pub enum Pruned {
    /// What is kept would be more than `max` bytes.
    TooLarge { max: usize },
    /// The text is not JSON (or nests deeper than [`MAX_DEPTH`]), at byte `at`.
    Invalid { at: u64, what: &'static str },
    /// The skeleton is not one.
    Skeleton(String),
}

impl fmt::Display for Pruned {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self {
            Pruned::TooLarge { max } => write!(f, "what is kept of it is over {max} bytes"),
            Pruned::Invalid { at, what } => write!(f, "it is not JSON: {what} at byte {at}"),
            Pruned::Skeleton(e) => write!(f, "the skeleton to keep is not one: {e}"),
        }
    }
}

/// Checks that `skeleton` is one (see the module's documentation).
pub fn check(skeleton: &Value) -> Result<(), Pruned> {
    fn walk(skeleton: &Value, depth: usize) -> Result<(), String> {
        if depth > 64 {
            return Err("it nests deeper than 64".into());
        }
        match skeleton {
            Value::Null | Value::Bool(true) => Ok(()),
            Value::Array(each) if each.len() == 1 => walk(&each[0], depth + 1),
            Value::Array(_) => Err("an array must hold one skeleton, for every element".into()),
            Value::Object(fields) => fields.values().try_for_each(|v| walk(v, depth + 1)),
            other => Err(format!(
                "{other} is neither null, true, an object nor an array"
            )),
        }
    }
    walk(skeleton, 0).map_err(Pruned::Skeleton)
}

/// Prunes JSON text fed to it in pieces of any size.
pub struct Pruner<'s> {
    root: &'s Value,
    stack: Vec<Frame<'s>>,
    expect: Expect,
    token: Token,
    /// Whether the token being read is written out (a key: kept aside to be looked up).
    copy: bool,
    key: Vec<u8>,
    /// Whether the key being read is of an object kept whole (written as it is read).
    whole_key: bool,
    out: Vec<u8>,
    max: usize,
    /// Bytes fed before the current piece.
    seen: u64,
}

#[derive(Clone, Copy)]
struct Frame<'s> {
    object: bool,
    /// The container's skeleton when it is written out; `None` when it is dropped.
    keep: Option<&'s Value>,
    /// Whether an element or entry is written (a comma goes before the next).
    written: bool,
    /// In a written object, the skeleton of the value after the current key (`None`: dropped).
    child: Option<&'s Value>,
}

#[derive(Clone, Copy, PartialEq)]
enum Expect {
    Value,
    ValueOrEnd,
    KeyOrEnd,
    Key,
    Colon,
    CommaOrEnd,
    Nothing,
}

#[derive(Clone, Copy)]
enum Token {
    None,
    Str { key: bool, escape: Escape },
    Num(Num),
    Lit { word: &'static [u8], at: usize },
}

#[derive(Clone, Copy)]
enum Escape {
    No,
    Backslash,
    /// Hex digits of a `\u` escape still to come.
    Hex(u8),
}

impl<'s> Pruner<'s> {
    /// A pruner keeping what `skeleton` names, refusing once that is over `max` bytes.
    pub fn new(skeleton: &'s Value, max: usize) -> Result<Self, Pruned> {
        check(skeleton)?;
        Ok(Pruner {
            root: skeleton,
            stack: Vec::new(),
            expect: Expect::Value,
            token: Token::None,
            copy: false,
            key: Vec::new(),
            whole_key: false,
            out: Vec::new(),
            max,
            seen: 0,
        })
    }

    /// Reads the next piece of the text.
    pub fn feed(&mut self, piece: &[u8]) -> Result<(), Pruned> {
        let mut i = 0;
        while i < piece.len() {
            i = self.step(piece, i)?;
        }
        self.seen += piece.len() as u64;
        Ok(())
    }

    /// The kept text, once the whole has been fed.
    pub fn finish(mut self) -> Result<Vec<u8>, Pruned> {
        if let Token::Num(num) = self.token {
            self.end_number(num, 0)?;
        }
        match (self.token, self.expect) {
            (Token::None, Expect::Nothing) => Ok(self.out),
            _ => Err(self.invalid(0, "the text ends before its value does")),
        }
    }

    /// Reads on from `piece[i]`; where to go on from.
    fn step(&mut self, piece: &[u8], i: usize) -> Result<usize, Pruned> {
        let b = piece[i];
        match self.token {
            Token::Str {
                key,
                escape: Escape::No,
            } => return self.string(piece, i, key),
            Token::Str {
                key,
                escape: Escape::Backslash,
            } => {
                let escape = match b {
                    b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => Escape::No,
                    b'u' => Escape::Hex(4),
                    _ => return Err(self.invalid(i, "an unknown escape in a string")),
                };
                self.token = Token::Str { key, escape };
                self.take(key, &[b])?;
            }
            Token::Str {
                key,
                escape: Escape::Hex(left),
            } => {
                if !b.is_ascii_hexdigit() {
                    return Err(self.invalid(i, "a \\u escape without four hex digits"));
                }
                let escape = if left == 1 {
                    Escape::No
                } else {
                    Escape::Hex(left - 1)
                };
                self.token = Token::Str { key, escape };
                self.take(key, &[b])?;
            }
            Token::Num(num) => match num.next(b) {
                Some(next) => {
                    self.token = Token::Num(next);
                    self.take(false, &[b])?;
                }
                // The byte after the number is read as what follows it.
                None => return self.end_number(num, i).map(|()| i),
            },
            Token::Lit { word, at } => {
                if b != word[at] {
                    return Err(self.invalid(i, "an unknown word (not true, false or null)"));
                }
                self.take(false, &[b])?;
                self.token = Token::Lit { word, at: at + 1 };
                if at + 1 == word.len() {
                    self.token = Token::None;
                    self.value_done();
                }
            }
            Token::None => self.between(b, i)?,
        }
        Ok(i + 1)
    }

    /// Reads a string's plain bytes in one stretch, up to its end, an escape or a piece's end.
    fn string(&mut self, piece: &[u8], i: usize, key: bool) -> Result<usize, Pruned> {
        let rest = &piece[i..];
        let stop = rest
            .iter()
            .position(|&b| b == b'"' || b == b'\\' || b < 0x20);
        let Some(n) = stop else {
            self.take(key, rest)?;
            return Ok(piece.len());
        };
        self.take(key, &rest[..n])?;
        match rest[n] {
            b'"' => {
                self.token = Token::None;
                if key {
                    self.key_done(i + n)?;
                } else {
                    self.take(false, b"\"")?;
                    self.value_done();
                }
            }
            b'\\' => {
                self.token = Token::Str {
                    key,
                    escape: Escape::Backslash,
                };
                self.take(key, b"\\")?;
            }
            _ => return Err(self.invalid(i + n, "a control character in a string")),
        }
        Ok(i + n + 1)
    }

    /// A byte between tokens.
    fn between(&mut self, b: u8, i: usize) -> Result<(), Pruned> {
        if matches!(b, b' ' | b'\n' | b'\r' | b'\t') {
            return Ok(());
        }
        match (self.expect, b) {
            (Expect::ValueOrEnd, b']') | (Expect::KeyOrEnd, b'}') => self.close(b, i),
            (Expect::Value | Expect::ValueOrEnd, _) => self.start_value(b, i),
            (Expect::KeyOrEnd | Expect::Key, b'"') => {
                self.token = Token::Str {
                    key: true,
                    escape: Escape::No,
                };
                self.key.clear();
                let keep = self.stack.last().and_then(|f| f.keep);
                self.copy = keep.is_some();
                self.whole_key = keep.is_some_and(whole);
                match self.stack.last_mut() {
                    Some(frame) if self.whole_key => {
                        let comma = std::mem::replace(&mut frame.written, true);
                        self.write(if comma { b",\"" } else { b"\"" })
                    }
                    _ => Ok(()),
                }
            }
            (Expect::Colon, b':') => {
                self.expect = Expect::Value;
                Ok(())
            }
            (Expect::CommaOrEnd, b',') => {
                let object = self.stack.last().is_some_and(|f| f.object);
                self.expect = if object { Expect::Key } else { Expect::Value };
                Ok(())
            }
            (Expect::CommaOrEnd, b']' | b'}') => self.close(b, i),
            (Expect::Nothing, _) => Err(self.invalid(i, "text after the value")),
            (Expect::KeyOrEnd | Expect::Key, _) => Err(self.invalid(i, "expected a key")),
            (Expect::Colon, _) => Err(self.invalid(i, "expected ':'")),
            (Expect::CommaOrEnd, _) => Err(self.invalid(i, "expected ',' or the container's end")),
        }
    }

    /// The skeleton of the value starting here, `None` when it is dropped.
    fn value_keep(&self) -> Option<&'s Value> {
        let Some(frame) = self.stack.last() else {
            return Some(self.root);
        };
        match (frame.keep?, frame.object) {
            (_, true) => frame.child,
            (keep, false) if whole(keep) => Some(keep),
            (keep, false) => keep.as_array().and_then(|each| each.first()),
        }
    }

    fn start_value(&mut self, b: u8, i: usize) -> Result<(), Pruned> {
        let keep = self.value_keep();
        if let Some(frame) = self.stack.last_mut() {
            if keep.is_some() && !frame.object {
                let comma = std::mem::replace(&mut frame.written, true);
                if comma {
                    self.write(b",")?;
                }
            }
        }
        self.copy = keep.is_some();
        match b {
            b'{' | b'[' => {
                if self.stack.len() >= MAX_DEPTH {
                    return Err(self.invalid(i, "nesting deeper than the pruner reads"));
                }
                let object = b == b'{';
                let kept =
                    keep.filter(|k| whole(k) || if object { k.is_object() } else { k.is_array() });
                match (keep, kept) {
                    (Some(_), Some(_)) => self.write(&[b])?,
                    (Some(_), None) => self.write(b"null")?,
                    _ => {}
                }
                self.stack.push(Frame {
                    object,
                    keep: kept,
                    written: false,
                    child: None,
                });
                self.expect = if object {
                    Expect::KeyOrEnd
                } else {
                    Expect::ValueOrEnd
                };
                return Ok(());
            }
            b'"' => {
                self.token = Token::Str {
                    key: false,
                    escape: Escape::No,
                }
            }
            b'-' => self.token = Token::Num(Num::Minus),
            b'0' => self.token = Token::Num(Num::Zero),
            b'1'..=b'9' => self.token = Token::Num(Num::Int),
            b't' | b'f' | b'n' => {
                let word: &'static [u8] = match b {
                    b't' => b"true",
                    b'f' => b"false",
                    _ => b"null",
                };
                self.token = Token::Lit { word, at: 1 };
            }
            _ => return Err(self.invalid(i, "expected a value")),
        }
        self.take(false, &[b])
    }

    fn close(&mut self, b: u8, i: usize) -> Result<(), Pruned> {
        let Some(frame) = self.stack.pop() else {
            return Err(self.invalid(i, "a container's end with none open"));
        };
        if frame.object != (b == b'}') {
            return Err(self.invalid(i, "a container closed by the other kind's end"));
        }
        if frame.keep.is_some() {
            self.write(&[b])?;
        }
        self.value_done();
        Ok(())
    }

    fn end_number(&mut self, num: Num, i: usize) -> Result<(), Pruned> {
        if !num.complete() {
            return Err(self.invalid(i, "a number without its digits"));
        }
        self.token = Token::None;
        self.value_done();
        Ok(())
    }

    fn value_done(&mut self) {
        self.expect = match self.stack.is_empty() {
            true => Expect::Nothing,
            false => Expect::CommaOrEnd,
        };
    }

    /// A key read whole: looked up in its object's skeleton, and written with its colon when
    /// the skeleton names it.
    fn key_done(&mut self, i: usize) -> Result<(), Pruned> {
        self.expect = Expect::Colon;
        let Some(frame) = self.stack.last().copied() else {
            return Err(self.invalid(i, "a key outside an object"));
        };
        if self.whole_key {
            if let Some(top) = self.stack.last_mut() {
                top.child = frame.keep;
            }
            return self.write(b"\":");
        }
        let Some(fields) = frame.keep.and_then(Value::as_object) else {
            return Ok(());
        };
        let child = match self.key.len() > KEY_MAX {
            true => None,
            false => match self.key.contains(&b'\\') {
                false => std::str::from_utf8(&self.key)
                    .ok()
                    .and_then(|k| fields.get(k)),
                true => {
                    let quoted = [&b"\""[..], &self.key, b"\""].concat();
                    let name: String = serde_json::from_slice(&quoted)
                        .map_err(|_| self.invalid(i, "a key that is not a string"))?;
                    fields.get(&name)
                }
            },
        };
        if child.is_some() {
            let comma = if frame.written { &b","[..] } else { b"" };
            let key = std::mem::take(&mut self.key);
            let written = self.write(&[comma, b"\"", &key, b"\":"].concat());
            self.key = key;
            written?;
        }
        if let Some(top) = self.stack.last_mut() {
            top.child = child;
            top.written |= child.is_some();
        }
        Ok(())
    }

    /// Bytes of the token being read: written out, or kept aside when they are a key's.
    fn take(&mut self, key: bool, bytes: &[u8]) -> Result<(), Pruned> {
        match (self.copy, key) {
            (false, _) => Ok(()),
            (true, true) if self.whole_key => self.write(bytes),
            (true, true) => {
                if self.key.len() <= KEY_MAX {
                    self.key
                        .extend_from_slice(&bytes[..bytes.len().min(KEY_MAX + 1)]);
                }
                Ok(())
            }
            (true, false) => self.write(bytes),
        }
    }

    fn write(&mut self, bytes: &[u8]) -> Result<(), Pruned> {
        if self.out.len() + bytes.len() > self.max {
            return Err(Pruned::TooLarge { max: self.max });
        }
        self.out.extend_from_slice(bytes);
        Ok(())
    }

    fn invalid(&self, i: usize, what: &'static str) -> Pruned {
        Pruned::Invalid {
            at: self.seen + i as u64,
            what,
        }
    }
}

/// Whether `skeleton` keeps its value whole.
fn whole(skeleton: &Value) -> bool {
    *skeleton == Value::Bool(true)
}

#[cfg(test)]
pub(crate) mod tests;
