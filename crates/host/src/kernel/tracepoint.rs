//! A tracepoint's `format` file: the record's fields (name, offset, size) and the names the
//! kernel prints for a field's values (`__print_symbolic(REC->reason, { 2, "NOT_SPECIFIED" },
//! ...)`). Drop reasons are read from here, so a kernel that adds one needs no code change.

use crate::procfs::ParseError;
use std::collections::BTreeMap;

const FILE: &str = "tracepoint format";

/// One field of the record.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct FieldDef {
    /// The C declaration without the name, e.g. `void *` or `enum skb_drop_reason`.
    pub ty: String,
    pub name: String,
    pub offset: u16,
    pub size: u16,
    pub signed: bool,
}

/// A parsed `format` file.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Format {
    pub name: String,
    /// The `ID:` line (the perf_event config), when present.
    pub id: Option<u64>,
    pub fields: Vec<FieldDef>,
    /// Per field, the value -> name table of its `__print_symbolic`.
    pub symbols: BTreeMap<String, BTreeMap<i64, String>>,
}

impl Format {
    /// The field called `name`.
    pub fn field(&self, name: &str) -> Option<&FieldDef> {
        self.fields.iter().find(|f| f.name == name)
    }

    /// The kernel's name for `value` of field `field`, if its print format has one.
    pub fn symbol(&self, field: &str, value: i64) -> Option<&str> {
        self.symbols.get(field)?.get(&value).map(String::as_str)
    }
}

/// Parses a tracepoint `format` file.
pub fn parse(text: &str) -> Result<Format, ParseError> {
    let mut f = Format::default();
    for (i, line) in text.lines().enumerate() {
        let lineno = i + 1;
        let t = line.trim();
        if let Some(n) = t.strip_prefix("name:") {
            f.name = n.trim().to_string();
        } else if let Some(n) = t.strip_prefix("ID:") {
            f.id = Some(crate::procfs::dec(FILE, lineno, "ID", n.trim())?);
        } else if t.starts_with("field:") {
            f.fields.push(field(t, lineno)?);
        } else if let Some(p) = t.strip_prefix("print fmt:") {
            f.symbols = symbolic(p);
        }
    }
    if f.fields.is_empty() {
        return Err(ParseError::missing(FILE, "no field: lines"));
    }
    Ok(f)
}

/// `field:void * skbaddr; offset:8; size:8; signed:0;`
fn field(line: &str, lineno: usize) -> Result<FieldDef, ParseError> {
    let mut decl = None;
    let mut offset = None;
    let mut size = None;
    let mut signed = false;
    for part in line.split(';').map(str::trim).filter(|p| !p.is_empty()) {
        let Some((k, v)) = part.split_once(':') else {
            continue;
        };
        match k.trim() {
            "field" => decl = Some(v.trim()),
            "offset" => offset = v.trim().parse().ok(),
            "size" => size = v.trim().parse().ok(),
            "signed" => signed = v.trim() == "1",
            _ => {}
        }
    }
    let (Some(decl), Some(offset), Some(size)) = (decl, offset, size) else {
        return Err(ParseError::line(
            FILE,
            lineno,
            "a field needs field:, offset: and size:",
        ));
    };
    // The name is the last identifier, before any array brackets: `char name[16]`.
    let bare = decl.split('[').next().unwrap_or(decl).trim_end();
    let split = bare
        .char_indices()
        .rev()
        .find(|&(_, c)| !(c.is_ascii_alphanumeric() || c == '_'))
        .map_or(0, |(p, c)| p + c.len_utf8());
    let name = &bare[split..];
    if name.is_empty() || bare[..split].trim().is_empty() {
        return Err(ParseError::line(
            FILE,
            lineno,
            format!("no type and name in {decl:?}"),
        ));
    }
    Ok(FieldDef {
        ty: bare[..split].trim().to_string(),
        name: name.to_string(),
        offset,
        size,
        signed,
    })
}

/// Every `__print_symbolic(REC->field, { v, "NAME" }, ...)` of a print format.
fn symbolic(p: &str) -> BTreeMap<String, BTreeMap<i64, String>> {
    let mut out = BTreeMap::new();
    let mut rest = p;
    while let Some(at) = rest.find("__print_symbolic(REC->") {
        rest = &rest[at + "__print_symbolic(REC->".len()..];
        let Some(comma) = rest.find(',') else { break };
        let field = rest[..comma].trim().to_string();
        rest = &rest[comma..];
        let mut table = BTreeMap::new();
        // Pairs follow until the call's closing parenthesis.
        loop {
            let t = rest.trim_start_matches(|c: char| c == ',' || c.is_whitespace());
            let Some(body) = t.strip_prefix('{') else {
                rest = t;
                break;
            };
            let Some(end) = body.find('}') else {
                rest = "";
                break;
            };
            let pair = &body[..end];
            rest = &body[end + 1..];
            let Some((v, name)) = pair.split_once(',') else {
                continue;
            };
            let name = name.trim();
            let (Ok(v), Some(name)) = (
                v.trim().parse::<i64>(),
                name.strip_prefix('"').and_then(|n| n.strip_suffix('"')),
            ) else {
                continue;
            };
            table.insert(v, name.to_string());
        }
        out.insert(field, table);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_and_symbols() {
        let t = "name: x\nID: 7\nformat:\n\tfield:char name[16];\toffset:8;\tsize:16;\tsigned:0;\n\tfield:int v;\toffset:24;\tsize:4;\tsigned:1;\n\nprint fmt: \"%s\", __print_symbolic(REC->v, { 0, \"A\" }, { -1, ((void *)0) }, { 2, \"B\" }), REC->name\n";
        let f = parse(t).unwrap();
        assert_eq!(f.id, Some(7));
        assert_eq!(f.field("name").unwrap().size, 16);
        assert_eq!(f.field("name").unwrap().ty, "char");
        assert!(f.field("v").unwrap().signed);
        assert_eq!(f.symbol("v", 2), Some("B"));
        assert_eq!(f.symbol("v", -1), None);
        assert!(parse("name: x\n").is_err());
        assert!(parse("field:int;\toffset:1;\tsize:4;\n").is_err());
    }

    /// Found by reading for the kernel_text fuzz target: a declaration ending in a
    /// non-ASCII character was cut inside it (a panic on a byte index not at a char
    /// boundary) instead of being refused.
    #[test]
    fn a_declaration_with_a_non_ascii_character_is_an_error_not_a_panic() {
        for decl in ["int é", "int \u{e9}x", "é x", "char n\u{e9}[16]"] {
            let t = format!("field:{decl};\toffset:8;\tsize:4;\tsigned:0;\n");
            let _ = parse(&t);
        }
        assert!(parse("field:int é;\toffset:8;\tsize:4;\n").is_err());
        let f = parse("field:unsigned éint v;\toffset:8;\tsize:4;\n").unwrap();
        assert_eq!(
            (f.fields[0].ty.as_str(), f.fields[0].name.as_str()),
            ("unsigned éint", "v")
        );
    }
}
