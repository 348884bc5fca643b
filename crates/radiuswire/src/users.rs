//! The users file of FreeRADIUS's `files` module:
//!
//! ```text
//! alice   Cleartext-Password := "secret"
//!         Reply-Message = "Hello",
//!         Session-Timeout = 3600
//! DEFAULT Service-Type == Framed-User, Cleartext-Password := "x"
//!         Framed-Protocol = PPP, Fall-Through = Yes
//! ```
//!
//! An entry is a name (or `DEFAULT`) with check items on its first line, and reply
//! items on the indented lines after it, separated by commas. Check items understood:
//! `Cleartext-Password :=`, `Auth-Type := Accept|Reject`, and comparisons with a
//! request attribute (`==  !=  >  >=  <  <=  =*  !*`). Reply items: any dictionary
//! attribute or raw attribute with `=`, `:=` or `+=`, and `Fall-Through`. Everything else
//! (regular expressions, `%{...}` expansions, back-quoted commands, other control
//! attributes) is refused with its line, never half-done.

use crate::dict::{self, Kind, Target, Text};
use crate::lex::{tokens, Token};
use crate::packet::attr;
use std::path::Path;

/// Who an entry is for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Name {
    User(Vec<u8>),
    Default,
}

/// `Auth-Type := ...`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthType {
    Accept,
    Reject,
}

/// A comparison of a check item with the request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CmpOp {
    Eq,
    Ne,
    Gt,
    Ge,
    Lt,
    Le,
    /// `=*`: the request has the attribute.
    Present,
    /// `!*`: it has not.
    Absent,
}

/// How a reply item joins the reply (FreeRADIUS's pair move).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SetOp {
    /// `=`: added unless an earlier entry already put this attribute in the reply.
    Add,
    /// `:=`: replaces what earlier entries put there.
    Set,
    /// `+=`: always added.
    Append,
}

/// A check item compared with the request's first attribute of that type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Compare {
    pub attr: u8,
    pub op: CmpOp,
    pub value: Vec<u8>,
    /// Compared as a number (integer and date attributes) rather than as bytes.
    pub numeric: bool,
}

/// A reply item, its value already in wire form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplyItem {
    pub typ: u8,
    pub op: SetOp,
    pub value: Vec<u8>,
}

/// One entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub name: Name,
    /// Where it starts, as "path:line".
    pub at: String,
    pub password: Option<Vec<u8>>,
    pub auth_type: Option<AuthType>,
    pub compares: Vec<Compare>,
    pub reply: Vec<ReplyItem>,
    pub fall_through: bool,
}

/// A parsed users file, entries in file order (`$INCLUDE`d files in place).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UsersFile {
    pub entries: Vec<Entry>,
}

/// `$INCLUDE` nesting beyond this is refused (a file including itself).
const MAX_INCLUDE_DEPTH: usize = 8;

/// Reads a users file and the files it `$INCLUDE`s (paths relative to the including
/// file's directory).
pub fn load(path: &Path) -> Result<UsersFile, String> {
    let mut out = UsersFile::default();
    load_into(path, 0, &mut out)?;
    Ok(out)
}

fn load_into(path: &Path, depth: usize, out: &mut UsersFile) -> Result<(), String> {
    let text = crate::read_text(path)?;
    let dir = path.parent().unwrap_or(Path::new("."));
    parse_into(&text, &path.display().to_string(), out, &mut |inc, at| {
        if depth + 1 > MAX_INCLUDE_DEPTH {
            return Err(format!(
                "{at}: $INCLUDE nested more than {MAX_INCLUDE_DEPTH} deep"
            ));
        }
        let p = dir.join(inc);
        let mut sub = UsersFile::default();
        load_into(&p, depth + 1, &mut sub)?;
        Ok(sub.entries)
    })
}

/// Parses users file text; `path` names it in errors. `$INCLUDE` is refused (use
/// [`load`]).
pub fn parse(text: &str, path: &str) -> Result<UsersFile, String> {
    let mut out = UsersFile::default();
    parse_into(text, path, &mut out, &mut |_, at| {
        Err(format!(
            "{at}: $INCLUDE needs the file's directory; load it from a path"
        ))
    })?;
    Ok(out)
}

type Include<'a> = dyn FnMut(&str, &str) -> Result<Vec<Entry>, String> + 'a;

fn parse_into(
    text: &str,
    path: &str,
    out: &mut UsersFile,
    include: &mut Include<'_>,
) -> Result<(), String> {
    let mut current: Option<Entry> = None;
    // The last line of the current entry ended with a comma (or was its first line).
    let mut more = false;
    for (i, line) in text.lines().enumerate() {
        let at = format!("{path}:{}", i + 1);
        let err = |m: String| format!("{at}: {m}");
        let toks = tokens(line).map_err(err)?;
        if toks.is_empty() {
            continue;
        }
        let indented = line.starts_with([' ', '\t']);
        if indented {
            let Some(e) = current.as_mut() else {
                return Err(err(
                    "reply items before any entry (an entry starts in the first column)".into(),
                ));
            };
            if !more {
                return Err(err(format!(
                    "entry of {}: the line before ended without a comma, so this line belongs to no entry",
                    name_text(&e.name)
                )));
            }
            more =
                items(&toks, &mut |name, op, value| reply_item(e, name, op, value)).map_err(err)?;
            continue;
        }
        out.entries.extend(current.take());
        if let Token::Word(w) = &toks[0] {
            if w.eq_ignore_ascii_case("$INCLUDE") || w.eq_ignore_ascii_case("$-INCLUDE") {
                let file = match toks.get(1) {
                    Some(Token::Word(f)) => f.to_string(),
                    Some(Token::Quoted(f, _)) => f.clone(),
                    _ => return Err(err("$INCLUDE needs a file name".into())),
                };
                out.entries.extend(include(&file, &at)?);
                more = false;
                continue;
            }
        }
        let name = match &toks[0] {
            Token::Word(w) if *w == "DEFAULT" => Name::Default,
            Token::Word(w) => Name::User(w.as_bytes().to_vec()),
            Token::Quoted(q, '`') => {
                return Err(err(format!("`{q}`: back-quoted commands are not run")))
            }
            Token::Quoted(q, _) => Name::User(q.as_bytes().to_vec()),
            _ => return Err(err("an entry starts with a user name or DEFAULT".into())),
        };
        let mut e = Entry {
            name,
            at: at.clone(),
            password: None,
            auth_type: None,
            compares: Vec::new(),
            reply: Vec::new(),
            fall_through: false,
        };
        if items(&toks[1..], &mut |name, op, value| {
            check_item(&mut e, name, op, value)
        })
        .map_err(err)?
        {
            return Err(err(
                "check items end with a comma; reply items go on the next, indented lines".into(),
            ));
        }
        current = Some(e);
        more = true;
    }
    out.entries.extend(current);
    Ok(())
}

fn name_text(n: &Name) -> String {
    match n {
        Name::User(u) => String::from_utf8_lossy(u).into_owned(),
        Name::Default => "DEFAULT".into(),
    }
}

/// Reads `NAME OP VALUE [, NAME OP VALUE ...] [,]`, handing each to `f`; returns whether
/// the list ended with a comma.
fn items(
    toks: &[Token<'_>],
    f: &mut dyn FnMut(&str, &'static str, Text<'_>) -> Result<(), String>,
) -> Result<bool, String> {
    let mut i = 0;
    while i < toks.len() {
        let name = match &toks[i] {
            Token::Word(w) => *w,
            t => return Err(format!("expected an attribute name, got {t:?}")),
        };
        let Some(Token::Op(op)) = toks.get(i + 1) else {
            return Err(format!("{name}: expected an operator such as = or :="));
        };
        let value = match toks.get(i + 2) {
            Some(Token::Word(w)) => Text::Bare(w),
            Some(Token::Quoted(q, '"')) if q.contains("%{") => {
                return Err(format!("{name}: \"{q}\": %{{...}} expansions are not supported; write the value (single quotes keep it literal)"))
            }
            Some(Token::Quoted(q, '`')) => return Err(format!("{name}: `{q}`: back-quoted commands are not run")),
            Some(Token::Quoted(q, _)) => Text::Quoted(q.clone()),
            _ => return Err(format!("{name} {op}: no value")),
        };
        f(name, op, value)?;
        match toks.get(i + 3) {
            None => return Ok(false),
            Some(Token::Comma) if i + 4 == toks.len() => return Ok(true),
            Some(Token::Comma) => i += 4,
            Some(t) => {
                return Err(format!(
                    "{name}: expected a comma or the end of the line, got {t:?}"
                ))
            }
        }
    }
    Ok(false)
}

fn check_item(e: &mut Entry, name: &str, op: &str, value: Text<'_>) -> Result<(), String> {
    let set = matches!(op, ":=" | "=");
    if name.eq_ignore_ascii_case("Cleartext-Password") {
        if !set {
            return Err(format!(
                "Cleartext-Password {op}: write Cleartext-Password := \"...\""
            ));
        }
        e.password = Some(value.as_str().as_bytes().to_vec());
        return Ok(());
    }
    if name.eq_ignore_ascii_case("Auth-Type") {
        e.auth_type = Some(match (set, value.as_str()) {
            (true, v) if v.eq_ignore_ascii_case("Accept") => AuthType::Accept,
            (true, v) if v.eq_ignore_ascii_case("Reject") => AuthType::Reject,
            _ => {
                return Err(format!(
                    "Auth-Type {op} {}: only Auth-Type := Accept or Reject is supported",
                    value.as_str()
                ))
            }
        });
        return Ok(());
    }
    if name.eq_ignore_ascii_case("User-Password") {
        return Err(
            "User-Password as a check item is the old form; write Cleartext-Password := \"...\""
                .into(),
        );
    }
    let op = match op {
        "==" => CmpOp::Eq,
        "!=" => CmpOp::Ne,
        ">" => CmpOp::Gt,
        ">=" => CmpOp::Ge,
        "<" => CmpOp::Lt,
        "<=" => CmpOp::Le,
        "=*" => CmpOp::Present,
        "!*" => CmpOp::Absent,
        "=~" | "!~" => return Err(format!("{name} {op}: regular expressions are not supported")),
        _ => {
            return Err(format!(
                "{name} {op}: check items other than Cleartext-Password and Auth-Type must compare (==, !=, <, <=, >, >=, =*, !*)"
            ))
        }
    };
    let target = dict::resolve(name)?;
    let (typ, numeric) = match target {
        Target::Known(a, _) => (a.number, matches!(a.kind, Kind::Integer | Kind::Date)),
        Target::Raw(n) => (n, false),
        Target::Vendor(..) => return Err(format!("{name}: vendor attributes cannot be compared")),
    };
    if typ == attr::USER_PASSWORD || typ == attr::MESSAGE_AUTHENTICATOR {
        return Err(format!("{name} cannot be compared"));
    }
    let value = match op {
        CmpOp::Present | CmpOp::Absent => Vec::new(),
        _ => dict::encode(target, &value)?,
    };
    e.compares.push(Compare {
        attr: typ,
        op,
        value,
        numeric,
    });
    Ok(())
}

fn reply_item(e: &mut Entry, name: &str, op: &str, value: Text<'_>) -> Result<(), String> {
    let op = match op {
        "=" => SetOp::Add,
        ":=" => SetOp::Set,
        "+=" => SetOp::Append,
        _ => return Err(format!("{name} {op}: reply items take =, := or +=")),
    };
    if name.eq_ignore_ascii_case("Fall-Through") {
        e.fall_through = match value.as_str() {
            v if v.eq_ignore_ascii_case("Yes") || v == "1" => true,
            v if v.eq_ignore_ascii_case("No") || v == "0" => false,
            v => return Err(format!("Fall-Through = {v}: Yes or No")),
        };
        return Ok(());
    }
    let target = dict::resolve(name)?;
    let typ = match target {
        Target::Known(a, _) if a.encrypted => {
            return Err(format!(
                "{name}: encrypted attributes are not supported in replies"
            ))
        }
        Target::Known(a, _) if a.number == attr::MESSAGE_AUTHENTICATOR => {
            return Err("Message-Authenticator is computed by the server, not set".into())
        }
        Target::Known(a, _) => a.number,
        Target::Raw(n) => n,
        Target::Vendor(..) => attr::VENDOR_SPECIFIC,
    };
    let value = dict::encode(target, &value)?;
    e.reply.push(ReplyItem { typ, op, value });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const USERS: &str = r#"# A users file as FreeRADIUS reads it.
alice Cleartext-Password := "alicepw"
      Reply-Message = "Hello",
      Framed-IP-Address = 10.0.0.1,
      Session-Timeout = 3600

bob   Cleartext-Password := "bobpw", Auth-Type := Reject
      Reply-Message = 'go away'
"john doe" Cleartext-Password := "jd"
carol Cleartext-Password := "carolpw"
      Attr-26.9.1 = 0x666f6f3d626172,
      Attr-26 = 0x000000090109666f6f3d626172
DEFAULT Service-Type == Framed-User, Cleartext-Password := "fpw"
      Framed-Protocol = PPP, Fall-Through = Yes
DEFAULT NAS-Port >= 10
      Class := 0x0102
"#;

    #[test]
    fn entries_checks_and_replies() {
        let f = parse(USERS, "users").unwrap();
        assert_eq!(f.entries.len(), 6);
        let a = &f.entries[0];
        assert_eq!(a.name, Name::User(b"alice".to_vec()));
        assert_eq!(a.at, "users:2");
        assert_eq!(a.password.as_deref(), Some(&b"alicepw"[..]));
        assert_eq!(
            a.reply,
            vec![
                ReplyItem {
                    typ: 18,
                    op: SetOp::Add,
                    value: b"Hello".to_vec()
                },
                ReplyItem {
                    typ: 8,
                    op: SetOp::Add,
                    value: vec![10, 0, 0, 1]
                },
                ReplyItem {
                    typ: 27,
                    op: SetOp::Add,
                    value: 3600u32.to_be_bytes().to_vec()
                },
            ]
        );
        assert_eq!(f.entries[1].auth_type, Some(AuthType::Reject));
        assert_eq!(f.entries[1].reply[0].value, b"go away");
        assert_eq!(f.entries[2].name, Name::User(b"john doe".to_vec()));
        assert!(f.entries[2].reply.is_empty());
        assert_eq!(f.entries[3].reply[0].typ, 26);
        assert_eq!(f.entries[3].reply[0].value, f.entries[3].reply[1].value);
        let d = &f.entries[4];
        assert_eq!(d.name, Name::Default);
        assert!(d.fall_through);
        assert_eq!(
            d.compares,
            vec![Compare {
                attr: 6,
                op: CmpOp::Eq,
                value: vec![0, 0, 0, 2],
                numeric: true
            }]
        );
        assert_eq!(f.entries[5].compares[0].op, CmpOp::Ge);
        assert_eq!(f.entries[5].reply[0].op, SetOp::Set);
    }

    #[test]
    fn refusals_name_the_line() {
        let e = |t: &str| parse(t, "u").unwrap_err();
        assert!(e(
            "a Cleartext-Password := \"x\"\n  Reply-Message = \"a\"\n  Session-Timeout = 1\n"
        )
        .starts_with("u:3: entry of a: the line before ended without a comma"));
        assert!(
            e("a Cleartext-Password := \"x\"\n  Reply-Message = \"%{User-Name}\"\n")
                .contains("expansions")
        );
        assert!(e("a User-Name =~ \"^a\"\n").contains("regular expressions"));
        assert!(e("a Simultaneous-Use := 1\n").starts_with("u:1: Simultaneous-Use :="));
        assert!(e("a Cleartext-Password := \"x\"\n  Bogus-Attr = 1\n")
            .contains("unknown attribute 'Bogus-Attr'"));
        assert!(e("a Auth-Type := PAM\n").contains("Accept or Reject"));
        assert!(e("  Reply-Message = \"x\"\n").contains("before any entry"));
        assert!(e("a Cleartext-Password := \"x\",\n").contains("check items end with a comma"));
        assert!(
            e("a Cleartext-Password := \"x\"\n  Tunnel-Password = \"t\"\n").contains("encrypted")
        );
        assert!(e("a Cleartext-Password := `/bin/true`\n").contains("back-quoted"));
        assert!(e("$INCLUDE other\n").contains("$INCLUDE"));
    }

    #[test]
    fn includes_relative_to_the_file() {
        let dir = std::env::temp_dir().join(format!("fh-users-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("sub")).unwrap();
        std::fs::write(
            dir.join("users"),
            "a Cleartext-Password := \"1\"\n$INCLUDE sub/more\nc Auth-Type := Accept\n",
        )
        .unwrap();
        std::fs::write(dir.join("sub/more"), "b Cleartext-Password := \"2\"\n").unwrap();
        std::fs::write(dir.join("loop"), "$INCLUDE loop\n").unwrap();
        let f = load(&dir.join("users")).unwrap();
        let names: Vec<_> = f.entries.iter().map(|e| name_text(&e.name)).collect();
        assert_eq!(names, ["a", "b", "c"]);
        assert!(load(&dir.join("loop"))
            .unwrap_err()
            .contains("nested more than 8"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
