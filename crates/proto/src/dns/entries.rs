//! Where each record of a master file starts, and which of its tokens hold an empty
//! label (`bad..name`).
//!
//! The zone file scanner yields records without positions and silently cuts a name
//! at an empty label, so this light pass over the text finds both, for messages of
//! the form FILE:LINE. It follows the scanner's rules for comments, quotes, escapes
//! and parentheses; the n-th record entry here is the n-th record the scanner yields.

/// One record entry (directives are not counted).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// 1-based line where the entry starts.
    pub line: usize,
    /// The entry starts at column 1, so its first token is the owner.
    pub owner_first: bool,
    /// (token index within the entry, line) of tokens with two unescaped dots in a row.
    pub double_dots: Vec<(usize, usize)>,
}

/// The record entries of `text`, in order.
pub fn outline(text: &[u8]) -> Vec<Entry> {
    let mut out = Vec::new();
    let (mut line, mut depth) = (1usize, 0usize);
    let mut cur: Option<(Entry, bool)> = None; // (entry, is a directive)
    let mut token = 0usize;
    let mut in_token = false;
    let mut last_dot = false;
    let mut col1 = true;
    let mut i = 0;
    let finish = |cur: &mut Option<(Entry, bool)>, out: &mut Vec<Entry>| {
        if let Some((e, directive)) = cur.take() {
            if !directive {
                out.push(e);
            }
        }
    };
    while i < text.len() {
        let c = text[i];
        let starts_content = !matches!(c, b' ' | b'\t' | b'\r' | b'\n' | b';' | b'(' | b')');
        if starts_content && cur.is_none() {
            let e = Entry {
                line,
                owner_first: col1,
                double_dots: Vec::new(),
            };
            cur = Some((e, c == b'$'));
            token = 0;
            in_token = false;
        }
        match c {
            b';' => {
                while i < text.len() && text[i] != b'\n' {
                    i += 1;
                }
                continue;
            }
            b'"' => {
                // A quoted string is one token with no names in it.
                i += 1;
                while i < text.len() && text[i] != b'"' {
                    if text[i] == b'\\' {
                        i += 1;
                    }
                    if text.get(i) == Some(&b'\n') {
                        line += 1;
                    }
                    i += 1;
                }
                in_token = true;
                last_dot = false;
            }
            b'(' | b')' => {
                depth = if c == b'(' {
                    depth + 1
                } else {
                    depth.saturating_sub(1)
                };
                if in_token {
                    token += 1;
                }
                in_token = false;
            }
            b' ' | b'\t' | b'\r' | b'\n' => {
                if in_token {
                    token += 1;
                }
                in_token = false;
                last_dot = false;
                if c == b'\n' {
                    line += 1;
                    col1 = true;
                    if depth == 0 {
                        finish(&mut cur, &mut out);
                    }
                    i += 1;
                    continue;
                }
            }
            b'\\' => {
                in_token = true;
                last_dot = false;
                i += 1;
            }
            b'.' => {
                if last_dot {
                    if let Some((e, _)) = cur.as_mut() {
                        e.double_dots.push((token, line));
                    }
                }
                in_token = true;
                last_dot = true;
            }
            _ => {
                in_token = true;
                last_dot = false;
            }
        }
        col1 = false;
        i += 1;
    }
    finish(&mut cur, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_entries_across_comments_parens_and_directives() {
        let t = b"$ORIGIN a.\n; note\n@ SOA ns h (\n 1 2 3 4 5 )\n\n  A 1.2.3.4\nbad..x A 1.1.1.1\nt TXT \"a..b\" c\\..d\n";
        let e = outline(t);
        assert_eq!(e.len(), 4);
        assert_eq!((e[0].line, e[0].owner_first), (3, true));
        assert_eq!((e[1].line, e[1].owner_first), (6, false));
        assert_eq!(e[2].double_dots, vec![(0, 7)]);
        assert!(e[3].double_dots.is_empty(), "quoted and escaped dots");
    }
}
