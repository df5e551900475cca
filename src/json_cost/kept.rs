//! Parsing only what is read of JSON from outside: the parts a [`Keep`] names are built as a
//! `Value` and every other part is skipped as it is parsed, so an agent's messages cost what
//! the session reads of them (roles, times, tokens, texts, tool titles), not their tool
//! outputs, file contents and metadata. What is kept is reckoned as [`super::tree_bytes`]
//! reckons a tree; past the limit the parse stops, refused. Text that could keep more than the
//! limit is counted in a first parse that builds nothing, so what is refused never takes the
//! memory.

use super::{container_bytes, internal_node, Refused, ALLOC};
use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};
use std::cell::Cell;
use std::fmt;
use std::mem::size_of;

/// What of a JSON value is kept. Scalars (strings, numbers, booleans, null) are kept wherever
/// they are; a container only where a `Keep` names it, else it becomes null.
#[derive(Debug)]
pub enum Keep {
    /// Scalars only: an array or object here is skipped.
    Scalar,
    /// An object with the listed keys, each kept as its `Keep`; other keys are skipped.
    Object(&'static [(&'static str, Keep)]),
    /// An array, each element kept as the `Keep`.
    Array(&'static Keep),
}

impl Keep {
    /// The JSON form of what is kept, for the pruner (`pruned.rs`): `null` for scalars, an object of
    /// the named keys, an array of the one `Keep` for every element.
    pub fn skeleton(&self) -> Value {
        match self {
            Keep::Scalar => Value::Null,
            Keep::Object(fields) => Value::Object(
                fields
                    .iter()
                    .map(|(name, keep)| ((*name).to_string(), keep.skeleton()))
                    .collect(),
            ),
            Keep::Array(each) => Value::Array(vec![each.skeleton()]),
        }
    }
}

/// The parts of `text` that `keep` names, unless holding them would take more than `max` bytes.
pub fn parse(text: &[u8], keep: &Keep, max: usize) -> Result<Value, Refused> {
    counted(text, keep, max).0
}

/// [`parse`], and the bytes it reckoned the kept parts to take. Text that could keep more than
/// `max` is first only counted, with nothing built, so text refused never takes the memory.
pub(crate) fn counted(text: &[u8], keep: &Keep, max: usize) -> (Result<Value, Refused>, usize) {
    if text.len().saturating_mul(MOST_PER_BYTE) > max {
        let (counted, taken) = pass(text, keep, max, false);
        if counted.is_err() {
            return (counted, taken);
        }
    }
    pass(text, keep, max, true)
}

/// More than a byte of text can be reckoned to take once kept: the densest is a map of one
/// entry, `{"":0}` in 6 bytes, with its node, its key's and the array's slots for it.
const MOST_PER_BYTE: usize = (internal_node() + 2 * ALLOC + 4 * size_of::<Value>()).div_ceil(6) + 1;

/// One parse of `text`, building what `keep` names (`build`) or only counting it.
fn pass(text: &[u8], keep: &Keep, max: usize, build: bool) -> (Result<Value, Refused>, usize) {
    let count = Count {
        taken: Cell::new(0),
        max,
        build,
    };
    let mut de = serde_json::Deserializer::from_slice(text);
    let parsed = Seed {
        keep,
        count: &count,
    }
    .deserialize(&mut de)
    .and_then(|value| de.end().map(|()| value));
    let taken = count.taken.get();
    let parsed = match parsed {
        _ if count.over() => Err(Refused::TooLarge { bytes: taken, max }),
        Ok(value) => Ok(value),
        Err(e) => Err(Refused::Invalid(e)),
    };
    (parsed, taken)
}

/// The bytes the kept tree takes so far (or would, when it is only counted: `build` false,
/// every kept part null and nothing allocated, each reckoned the same or more).
struct Count {
    taken: Cell<usize>,
    max: usize,
    build: bool,
}

impl Count {
    fn over(&self) -> bool {
        self.taken.get() > self.max
    }

    fn take<E: de::Error>(&self, bytes: usize) -> Result<(), E> {
        self.taken.set(self.taken.get().saturating_add(bytes));
        if self.over() {
            return Err(E::custom("too large to hold"));
        }
        Ok(())
    }

    fn string<E: de::Error>(&self, s: &str) -> Result<Value, E> {
        self.take(s.len() + ALLOC)?;
        Ok(match self.build {
            true => Value::String(s.to_owned()),
            false => Value::Null,
        })
    }
}

#[derive(Clone, Copy)]
struct Seed<'a> {
    keep: &'a Keep,
    count: &'a Count,
}

impl<'de> DeserializeSeed<'de> for Seed<'_> {
    type Value = Value;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Seed<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(v.into())
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(v.into())
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(v.into())
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Value, E> {
        self.count.string(v)
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let Keep::Array(each) = self.keep else {
            while seq.next_element::<IgnoredAny>()?.is_some() {}
            return Ok(Value::Null);
        };
        let element = Seed {
            keep: each,
            count: self.count,
        };
        let mut items = Vec::new();
        let mut seen = 0usize;
        while let Some(item) = seq.next_element_seed(element)? {
            // The vector's slots as it grows by doubling (from 4): two per element after the
            // first four, and its allocation.
            let bytes = match seen {
                0 => 4 * size_of::<Value>() + ALLOC,
                _ => 2 * size_of::<Value>(),
            };
            seen += 1;
            self.count.take(bytes)?;
            if self.count.build {
                items.push(item);
            }
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let Keep::Object(fields) = self.keep else {
            while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
            return Ok(Value::Null);
        };
        let mut object = Map::new();
        // Entries kept, a repeated key each time (the map holds its last): what is counted
        // is the same whether the map is built or not.
        let mut entries = 0usize;
        while let Some(key) = map.next_key::<String>()? {
            match fields.iter().find(|(name, _)| *name == key) {
                Some((_, keep)) => {
                    let seed = Seed {
                        keep,
                        count: self.count,
                    };
                    let value = map.next_value_seed(seed)?;
                    self.count.take(key.len() + ALLOC)?;
                    entries += 1;
                    if self.count.build {
                        object.insert(key, value);
                    }
                }
                None => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        self.count.take(container_bytes(true, entries))?;
        Ok(Value::Object(object))
    }
}

#[cfg(test)]
pub(crate) mod tests;
