//! /proc/kallsyms: the kernel's symbols, to name an address the way `%pS` does
//! (`udp_queue_rcv_one_skb+0x1a4`). Only code symbols are kept. A reader without
//! CAP_SYSLOG (or under kptr_restrict=2) sees every address as 0: [`Symbols::hidden`].

use crate::procfs::ParseError;

const FILE: &str = "/proc/kallsyms";

/// One code symbol: its address and where its name and module are in the text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Symbol {
    addr: u64,
    name: (u32, u32),
    /// Empty for a symbol of the kernel itself.
    module: (u32, u32),
}

/// Code symbols sorted by address. The file's text is kept and symbols point into it, so
/// a host's 100,000-odd symbols cost no allocation each.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Symbols {
    text: String,
    syms: Vec<Symbol>,
    /// True when the file listed symbols but every address was 0 (hidden from this reader).
    pub hidden: bool,
}

/// An address named as `function+0xoffset`, with its module.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Located {
    pub function: String,
    pub offset: u64,
    pub module: Option<String>,
}

impl std::fmt::Display for Located {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}+{:#x}", self.function, self.offset)?;
        if let Some(m) = &self.module {
            write!(f, " [{m}]")?;
        }
        Ok(())
    }
}

impl Symbols {
    /// The symbol an address falls in: the last one at or below it.
    pub fn locate(&self, addr: u64) -> Option<Located> {
        if addr == 0 {
            return None;
        }
        let i = self.syms.partition_point(|s| s.addr <= addr);
        let s = self.syms.get(i.checked_sub(1)?)?;
        let at = |(o, l): (u32, u32)| &self.text[o as usize..(o + l) as usize];
        Some(Located {
            function: at(s.name).to_string(),
            offset: addr - s.addr,
            module: (s.module.1 > 0).then(|| at(s.module).to_string()),
        })
    }

    /// How many code symbols were read.
    pub fn len(&self) -> usize {
        self.syms.len()
    }

    /// True when no symbol was read.
    pub fn is_empty(&self) -> bool {
        self.syms.is_empty()
    }
}

/// Parses /proc/kallsyms (`ffffffff820a64d0 t udp_queue_rcv_one_skb\t[module]`).
pub fn parse(text: &str) -> Result<Symbols, ParseError> {
    let mut syms = Vec::new();
    let mut listed = 0usize;
    let base = text.as_ptr() as usize;
    let span = |s: &str| ((s.as_ptr() as usize - base) as u32, s.len() as u32);
    for (i, line) in text.lines().enumerate() {
        let mut f = line.split_whitespace();
        let (Some(addr), Some(kind), Some(name)) = (f.next(), f.next(), f.next()) else {
            continue;
        };
        if !matches!(kind, "t" | "T" | "w" | "W") {
            continue;
        }
        listed += 1;
        let addr = crate::procfs::hex(FILE, i + 1, "address", addr)?;
        if addr == 0 {
            continue;
        }
        let module = f
            .next()
            .and_then(|m| m.strip_prefix('[')?.strip_suffix(']'))
            .map_or((0, 0), span);
        syms.push(Symbol {
            addr,
            name: span(name),
            module,
        });
    }
    syms.sort_by_key(|s| s.addr);
    Ok(Symbols {
        hidden: listed > 0 && syms.is_empty(),
        text: text.to_string(),
        syms,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hidden_addresses_are_said() {
        let s = parse("0000000000000000 T _text\n0000000000000000 t foo\n").unwrap();
        assert!(s.hidden && s.is_empty());
        assert!(parse("zz T x\n").is_err());
        assert_eq!(s.locate(5), None);
    }
}
