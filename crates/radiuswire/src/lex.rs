//! Tokens of FreeRADIUS's configuration and users files, one line at a time: bare
//! words, quoted strings with their escapes undone, operators, commas and braces; a
//! `#` outside quotes starts a comment.

/// One token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Token<'a> {
    Word(&'a str),
    /// A quoted string, unescaped, with its quote character.
    Quoted(String, char),
    Op(&'static str),
    Comma,
    Open,
    Close,
}

/// The operators, longest first so that `:=` is not read as `:` and `=`.
const OPS: [&str; 14] = [
    ":=", "==", "+=", "-=", "!=", ">=", "<=", "=~", "!~", "=*", "!*", "=", ">", "<",
];

/// The tokens of `line`, or what is wrong with it.
pub fn tokens(line: &str) -> Result<Vec<Token<'_>>, String> {
    let b = line.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c.is_ascii_whitespace() {
            i += 1;
            continue;
        }
        match c {
            b'#' => break,
            b',' => {
                out.push(Token::Comma);
                i += 1;
            }
            b'{' => {
                out.push(Token::Open);
                i += 1;
            }
            b'}' => {
                out.push(Token::Close);
                i += 1;
            }
            b'"' | b'\'' | b'`' => {
                let (s, end) = quoted(line, i)?;
                out.push(Token::Quoted(s, c as char));
                i = end;
            }
            _ => {
                if let Some(op) = OPS.iter().find(|o| line[i..].starts_with(**o)) {
                    out.push(Token::Op(op));
                    i += op.len();
                    continue;
                }
                let start = i;
                while i < b.len() && !ends_word(line, i) {
                    i += 1;
                }
                if i == start {
                    // A character that ends a word but starts no operator (a lone `!`):
                    // nothing would ever consume it.
                    return Err(format!(
                        "unexpected '{}' (not an operator; quote the value)",
                        c as char
                    ));
                }
                out.push(Token::Word(&line[start..i]));
            }
        }
    }
    Ok(out)
}

fn ends_word(line: &str, i: usize) -> bool {
    let b = line.as_bytes();
    match b[i] {
        c if c.is_ascii_whitespace() => true,
        b',' | b'#' | b'"' | b'\'' | b'`' | b'{' | b'}' | b'=' | b'!' | b'<' | b'>' => true,
        b':' => b.get(i + 1) == Some(&b'='),
        b'+' | b'-' => b.get(i + 1) == Some(&b'='),
        _ => false,
    }
}

/// The string quoted at `start` and the index past its closing quote. Double quotes
/// take `\\ \" \' \n \r \t` and three-digit octal escapes; single and back quotes take
/// only an escaped quote or backslash.
fn quoted(line: &str, start: usize) -> Result<(String, usize), String> {
    let q = line.as_bytes()[start];
    let mut out: Vec<u8> = Vec::new();
    let b = line.as_bytes();
    let mut i = start + 1;
    while i < b.len() {
        let c = b[i];
        if c == q {
            let s = String::from_utf8(out).map_err(|_| "a quoted string is not UTF-8")?;
            return Ok((s, i + 1));
        }
        if c == b'\\' && i + 1 < b.len() {
            let n = b[i + 1];
            i += 2;
            match (q, n) {
                (_, b'\\') => out.push(b'\\'),
                (_, x) if x == q => out.push(x),
                (b'"', b'n') => out.push(b'\n'),
                (b'"', b'r') => out.push(b'\r'),
                (b'"', b't') => out.push(b'\t'),
                (b'"', b'0'..=b'7')
                    if i + 1 < b.len()
                        && (b'0'..=b'7').contains(&b[i])
                        && (b'0'..=b'7').contains(&b[i + 1]) =>
                {
                    let v = (n - b'0') as u32 * 64
                        + (b[i] - b'0') as u32 * 8
                        + (b[i + 1] - b'0') as u32;
                    if v > 255 {
                        return Err(format!(
                            "octal escape \\{} is above \\377",
                            &line[i - 1..i + 2]
                        ));
                    }
                    out.push(v as u8);
                    i += 2;
                }
                (_, x) => {
                    out.push(b'\\');
                    out.push(x);
                }
            }
            continue;
        }
        out.push(c);
        i += 1;
    }
    Err(format!("a string opened with {} is not closed", q as char))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_strings_operators_and_comments() {
        let t =
            tokens(r#"alice  Cleartext-Password:="a \"b\"\n", Auth-Type := Reject # no"#).unwrap();
        assert_eq!(
            t,
            vec![
                Token::Word("alice"),
                Token::Word("Cleartext-Password"),
                Token::Op(":="),
                Token::Quoted("a \"b\"\n".into(), '"'),
                Token::Comma,
                Token::Word("Auth-Type"),
                Token::Op(":="),
                Token::Word("Reject"),
            ]
        );
        assert_eq!(
            tokens("client x { ipv6addr = ::1/128 }").unwrap(),
            vec![
                Token::Word("client"),
                Token::Word("x"),
                Token::Open,
                Token::Word("ipv6addr"),
                Token::Op("="),
                Token::Word("::1/128"),
                Token::Close,
            ]
        );
        assert_eq!(
            tokens("Tunnel-Type:1 = VLAN").unwrap()[0],
            Token::Word("Tunnel-Type:1")
        );
        assert_eq!(
            tokens(r#""\101\\""#).unwrap(),
            vec![Token::Quoted("A\\".into(), '"')]
        );
        assert_eq!(tokens("a 'it''s'").unwrap().len(), 3);
        assert!(tokens("\"open").is_err());
        assert!(tokens("\"\\777\"").is_err());
    }

    /// Found by the radius_files fuzz target: a `!` that starts no operator was an empty
    /// word that never advanced, pushed until memory ran out (a users or clients file
    /// with `Reply-Message = hi!` hung loading and SIGHUP).
    #[test]
    fn a_lone_bang_is_an_error_not_an_endless_loop() {
        for line in ["x = 1!", "a ! b", "!", "Reply-Message = hi!"] {
            let e = tokens(line).unwrap_err();
            assert!(e.contains("unexpected '!'"), "{line}: {e}");
        }
        assert_eq!(tokens("a != b").unwrap()[1], Token::Op("!="));
        assert_eq!(tokens("a !* ANY").unwrap()[1], Token::Op("!*"));
    }
}
