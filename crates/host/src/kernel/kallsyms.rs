//! /proc/kallsyms: the kernel's symbols, to name an address the way `%pS` does
//! (`udp_queue_rcv_one_skb+0x1a4`). Only code symbols are kept. A reader without
//! CAP_SYSLOG (or under kptr_restrict=2) sees every address as 0: [`Symbols::hidden`].

use crate::procfs::ParseError;

const FILE: &str = "/proc/kallsyms";

/// One code symbol.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Symbol {
    pub addr: u64,
    pub name: String,
    /// The module, for symbols of a loaded module.
    pub module: Option<String>,
}

/// Code symbols sorted by address.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Symbols {
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
        Some(Located {
            function: s.name.clone(),
            offset: addr - s.addr,
            module: s.module.clone(),
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
            .map(str::to_string);
        syms.push(Symbol {
            addr,
            name: name.to_string(),
            module,
        });
    }
    syms.sort_by_key(|s| s.addr);
    Ok(Symbols {
        hidden: listed > 0 && syms.is_empty(),
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
