//! What the Worker's wasm is made of: its size gzipped (the figure the target is about), code
//! and data each gzipped alone, and the code's functions summed by the crate they come from, by
//! handoff's own module, and by generic function compiled more than once (named from the copy
//! the build keeps with its function names, `build/index_bg.named.wasm`; stripping the names
//! keeps every function's index).

use crate::stats::verdict;
use handoff_tests::root;
use std::collections::BTreeMap;
use std::io::Write;

pub fn report() {
    let wasm = root().join("build/index_bg.wasm");
    let bytes = std::fs::read(&wasm).expect("build/index_bg.wasm (run cargo xtask build)");
    let gzipped = gzip(&bytes).len();
    println!("== Bundle ==");
    println!(
        "wasm: {:.2} MB raw, {:.0} KB gzip -9 (target <= 450 KB gzip) {}",
        bytes.len() as f64 / 1e6,
        gzipped as f64 / 1e3,
        verdict(gzipped as f64 <= 450e3)
    );
    let Some(module) = Module::parse(&bytes) else {
        println!("(the wasm's sections could not be read)");
        return;
    };
    let kb = |n: usize| n as f64 / 1e3;
    println!(
        "code {:.0} KB raw, {:.0} KB gzip alone; data {:.0} KB raw, {:.0} KB gzip alone",
        kb(module.code.len()),
        kb(gzip(&module.code).len()),
        kb(module.data.len()),
        kb(gzip(&module.data).len())
    );
    let named = std::fs::read(root().join("build/index_bg.named.wasm")).unwrap_or_default();
    let Some(named) = Module::parse(&named) else {
        return;
    };
    let functions: Vec<(Option<&str>, usize)> = named
        .bodies
        .iter()
        .enumerate()
        .map(|(index, size)| {
            let name = named.names.get(&(named.imported + index as u32));
            (name.map(String::as_str), *size)
        })
        .collect();
    let mut by_crate: BTreeMap<String, usize> = BTreeMap::new();
    let mut by_module: BTreeMap<String, usize> = BTreeMap::new();
    let mut by_generic: BTreeMap<String, (usize, usize, usize)> = BTreeMap::new();
    for &(name, size) in &functions {
        *by_crate.entry(crate_of(name)).or_default() += size;
        if let Some(module) = name.and_then(handoff_module) {
            *by_module.entry(module).or_default() += size;
        }
        if let Some(generic) = name.map(without_hash) {
            let (copies, total, largest) = by_generic.entry(generic.to_string()).or_default();
            *copies += 1;
            *total += size;
            *largest = (*largest).max(size);
        }
    }
    let top = |sizes: BTreeMap<String, usize>| {
        let mut ranked: Vec<_> = sizes.into_iter().collect();
        ranked.sort_by_key(|entry| std::cmp::Reverse(entry.1));
        ranked
            .iter()
            .take(16)
            .map(|(what, size)| format!("{what} {:.0}", kb(*size)))
            .collect::<Vec<_>>()
            .join(", ")
    };
    println!(
        "code by crate, KB raw (js_sys holds the async exports' futures): {}",
        top(by_crate)
    );
    println!("handoff's own code by module, KB raw: {}", top(by_module));
    // A generic function compiled for several types: every copy but the largest bounds what one
    // shared body could save. Mostly these copies are not duplicates: js_sys's `future_to_promise`
    // copies hold each exported object's own handlers, serde's each type's own fields.
    let mut copies: Vec<_> = by_generic
        .into_iter()
        .filter(|(_, (copies, _, _))| *copies > 1)
        .map(|(name, (copies, total, largest))| (name, copies, total - largest))
        .collect();
    copies.sort_by_key(|entry| std::cmp::Reverse(entry.2));
    let extra: usize = copies.iter().map(|entry| entry.2).sum();
    let biggest: Vec<String> = copies
        .iter()
        .take(5)
        .map(|(name, n, bytes)| format!("{} ×{n} +{:.0}", short(name), kb(*bytes)))
        .collect();
    println!(
        "generic code compiled more than once: {:.0} KB raw beyond one copy each ({:.0} % of the code); most: {}",
        kb(extra),
        100.0 * extra as f64 / module.code.len().max(1) as f64,
        biggest.join(", ")
    );
}

/// `bench bundle-split` (after `cargo xtask bench bundle-split` built the halves): the served
/// wasm beside the two halves of a split deployment — the Worker serving `/mcp`, OAuth and pages
/// with the Durable Objects in a Worker of their own — each weighed as the target weighs it.
pub fn report_split() {
    println!("== Bundle, split in two Workers (built only to be weighed) ==");
    let split = root().join("target/bundle-split");
    let wasms = [
        ("one Worker (what is served)", root().join("build")),
        ("front: /mcp, OAuth, pages, hooks", split.join("front")),
        ("objects: the Durable Objects", split.join("objects")),
        (
            "front with one tool (what it is without its tools)",
            split.join("front-one-tool"),
        ),
    ];
    for (what, dir) in wasms {
        let Ok(bytes) = std::fs::read(dir.join("index_bg.wasm")) else {
            println!(
                "{what}: no {} (run cargo xtask bench bundle-split)",
                dir.display()
            );
            continue;
        };
        let gzipped = gzip(&bytes).len();
        let module = Module::parse(&bytes).unwrap_or_default();
        let named = std::fs::read(dir.join("index_bg.named.wasm")).unwrap_or_default();
        let named = Module::parse(&named).unwrap_or_default();
        let sized = |pick: &dyn Fn(&str) -> bool| -> usize {
            named
                .bodies
                .iter()
                .enumerate()
                .filter(|(index, _)| {
                    let name = named.names.get(&(named.imported + *index as u32));
                    name.is_some_and(|n| pick(n))
                })
                .map(|(_, size)| size)
                .sum()
        };
        let serde = sized(&|n: &str| n.contains("serde"));
        let tools = sized(&|n: &str| n.starts_with("handoff::tools::call::"));
        println!(
            "{what}: {:.2} MB raw, {:.0} KB gzip -9 (target <= 450 KB gzip) {}; code {:.0} KB raw, data {:.0} KB raw; functions named for serde {:.0} KB raw ({:.0} % of the code), tools::call {:.0} KB",
            bytes.len() as f64 / 1e6,
            gzipped as f64 / 1e3,
            verdict(gzipped as f64 <= 450e3),
            module.code.len() as f64 / 1e3,
            module.data.len() as f64 / 1e3,
            serde as f64 / 1e3,
            100.0 * serde as f64 / module.code.len().max(1) as f64,
            tools as f64 / 1e3,
        );
    }
}

/// `handoff::tools` for a function of handoff's own (`handoff::tools::call::{{closure}}`,
/// `<handoff::ledger::X as serde::Deserialize>::…`), or of its wire crate (`handoff_wire::…`).
fn handoff_module(name: &str) -> Option<String> {
    let path = name.trim_start_matches('<');
    let (krate, rest) = path.split_once("::")?;
    if krate != "handoff" && krate != "handoff_wire" {
        return None;
    }
    let module = rest.split("::").next().unwrap_or(rest);
    Some(format!("{krate}::{module}"))
}

/// A function's name without the hash that tells its copies apart (`…::h0123456789abcdef`).
fn without_hash(name: &str) -> &str {
    match name.rsplit_once("::h") {
        Some((generic, hash))
            if hash.len() == 16 && hash.bytes().all(|b| b.is_ascii_hexdigit()) =>
        {
            generic
        }
        _ => name,
    }
}

/// A long function name cut to its last path segments, for one line of figures.
fn short(name: &str) -> String {
    let parts: Vec<&str> = name.split("::").collect();
    if parts.len() <= 3 {
        return name.to_string();
    }
    format!("…{}", parts[parts.len() - 3..].join("::"))
}

/// The crate a function's name starts with: `handoff::…`, `<serde_json::… as …>::…`,
/// `core[hash]::…`; wasm-bindgen's generated glue and unnamed functions apart.
fn crate_of(name: Option<&str>) -> String {
    let Some(name) = name else {
        return "(unnamed)".into();
    };
    let path = name
        .trim_start_matches('<')
        .trim_start_matches("&mut ")
        .trim_start_matches('&')
        .trim_start_matches("dyn ");
    match path.split_once("::") {
        Some((first, _)) => first.split('[').next().unwrap_or(first).to_string(),
        None if name.starts_with("__wbg") || name.contains("externref") => {
            "(wasm-bindgen glue)".into()
        }
        None => "(other)".into(),
    }
}

/// The parts of a wasm module the report needs.
#[derive(Default)]
struct Module {
    /// Functions imported (they come first in the function index space).
    imported: u32,
    /// Each defined function's body size.
    bodies: Vec<usize>,
    /// Function names, by index (the `name` section, where present).
    names: BTreeMap<u32, String>,
    code: Vec<u8>,
    data: Vec<u8>,
}

impl Module {
    fn parse(bytes: &[u8]) -> Option<Module> {
        let mut r = Reader { bytes, at: 8 };
        (bytes.get(..4)? == b"\0asm").then_some(())?;
        let mut module = Module::default();
        while r.at < bytes.len() {
            let id = r.byte()?;
            let size = r.leb()? as usize;
            let body = bytes.get(r.at..r.at + size)?;
            r.at += size;
            let mut s = Reader { bytes: body, at: 0 };
            match id {
                0 if s.name()? == "name" => module.names = names(&mut s)?,
                2 => module.imported = imported_functions(&mut s)?,
                10 => {
                    module.code = body.to_vec();
                    for _ in 0..s.leb()? {
                        let len = s.leb()? as usize;
                        module.bodies.push(len);
                        s.at += len;
                    }
                }
                11 => module.data = body.to_vec(),
                _ => {}
            }
        }
        Some(module)
    }
}

/// The function names subsection (1) of a `name` section.
fn names(s: &mut Reader) -> Option<BTreeMap<u32, String>> {
    let mut out = BTreeMap::new();
    while s.at < s.bytes.len() {
        let kind = s.byte()?;
        let len = s.leb()? as usize;
        let end = s.at + len;
        if kind == 1 {
            for _ in 0..s.leb()? {
                let index = s.leb()?;
                out.insert(index, s.name()?);
            }
        }
        s.at = end;
    }
    Some(out)
}

fn imported_functions(s: &mut Reader) -> Option<u32> {
    let mut functions = 0;
    for _ in 0..s.leb()? {
        s.name()?;
        s.name()?;
        match s.byte()? {
            0 => {
                s.leb()?;
                functions += 1;
            }
            1 => {
                s.byte()?;
                s.limits()?;
            }
            2 => s.limits()?,
            3 => s.at += 2,
            4 => {
                s.byte()?;
                s.leb()?;
            }
            _ => return None,
        }
    }
    Some(functions)
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn byte(&mut self) -> Option<u8> {
        let b = *self.bytes.get(self.at)?;
        self.at += 1;
        Some(b)
    }

    fn leb(&mut self) -> Option<u32> {
        let (mut value, mut shift) = (0u64, 0);
        loop {
            let b = self.byte()?;
            value |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return u32::try_from(value).ok();
            }
            shift += 7;
            (shift < 35).then_some(())?;
        }
    }

    fn name(&mut self) -> Option<String> {
        let len = self.leb()? as usize;
        let text = self.bytes.get(self.at..self.at + len)?;
        self.at += len;
        Some(String::from_utf8_lossy(text).into_owned())
    }

    fn limits(&mut self) -> Option<()> {
        let flags = self.byte()?;
        self.leb()?;
        if flags & 1 == 1 {
            self.leb()?;
        }
        Some(())
    }
}

/// gzip -9 of the bytes, by the system's gzip (no compression crate needed for a few numbers).
fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut child = std::process::Command::new("gzip")
        .arg("-9c")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("gzip");
    let mut stdin = child.stdin.take().expect("stdin");
    let input = bytes.to_vec();
    let writer = std::thread::spawn(move || stdin.write_all(&input));
    let out = child.wait_with_output().expect("gzip output");
    writer.join().ok();
    out.stdout
}
