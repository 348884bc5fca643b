//! Where each record of a master file starts, and which of its tokens hold an empty
//! label (`bad..name`).
//!
//! The zone file scanner yields records without positions and silently cuts a name
//! at an empty label, so this light pass over the text finds both, for messages of
//! the form FILE:LINE. It follows the scanner's rules for comments, quotes, escapes
//! and parentheses; the n-th record entry here is the n-th record the scanner yields.

/// The record entries of a text (directives are not counted), compactly: a zone of
/// millions of records keeps one word per entry.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Outline {
    /// Per entry: 1-based line where it starts, shifted left by one; the low bit is set
    /// when the entry starts at column 1 (its first token is the owner).
    starts: Vec<u32>,
    /// (entry, token index within the entry, line) of tokens with two unescaped dots in
    /// a row, in entry order.
    dots: Vec<(u32, u32, u32)>,
    /// The line of a `(` still open at the end of the text.
    unclosed: Option<usize>,
}

impl Outline {
    /// Entries found.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.starts.len()
    }

    /// The line where entry `i` starts (0 if there is no such entry).
    pub fn line(&self, i: usize) -> usize {
        self.starts.get(i).map_or(0, |&s| (s >> 1) as usize)
    }

    /// Entry `i` starts at column 1.
    pub fn owner_first(&self, i: usize) -> bool {
        self.starts.get(i).is_some_and(|&s| s & 1 == 1)
    }

    /// The line of a `(` never closed: the scanner must not see such a text (domain
    /// 0.12.3 panics on a TXT string inside it at the end of the file).
    pub fn unclosed_paren(&self) -> Option<usize> {
        self.unclosed
    }

    /// (token, line) of the tokens of entry `i` with two dots in a row.
    pub fn double_dots(&self, i: usize) -> impl Iterator<Item = (usize, usize)> + '_ {
        let from = self.dots.partition_point(|d| (d.0 as usize) < i);
        self.dots[from..]
            .iter()
            .take_while(move |d| d.0 as usize == i)
            .map(|d| (d.1 as usize, d.2 as usize))
    }
}

/// The record entries of `text`, in order.
pub fn outline(text: &[u8]) -> Outline {
    let mut out = Outline::default();
    let (mut line, mut depth) = (1usize, 0usize);
    let mut opened_at = 0usize;
    // The entry being read: (line, starts at column 1, is a directive, its double dots).
    let mut cur: Option<Entry> = None;
    let mut token = 0usize;
    let mut in_token = false;
    let mut last_dot = false;
    let mut col1 = true;
    let mut i = 0;
    let finish = |cur: &mut Option<Entry>, out: &mut Outline| {
        if let Some(e) = cur.take() {
            if !e.directive {
                let i = out.starts.len() as u32;
                out.starts.push((e.line as u32) << 1 | e.owner_first as u32);
                out.dots
                    .extend(e.dots.iter().map(|&(t, l)| (i, t as u32, l as u32)));
            }
        }
    };
    while i < text.len() {
        let c = text[i];
        let starts_content = !matches!(c, b' ' | b'\t' | b'\r' | b'\n' | b';' | b'(' | b')');
        if starts_content && cur.is_none() {
            cur = Some(Entry {
                line,
                owner_first: col1,
                directive: c == b'$',
                dots: Vec::new(),
            });
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
                if c == b'(' && depth == 0 {
                    opened_at = line;
                }
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
                    if let Some(e) = cur.as_mut() {
                        e.dots.push((token, line));
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
    out.unclosed = (depth > 0).then_some(opened_at);
    out
}

/// The entry being read.
struct Entry {
    line: usize,
    owner_first: bool,
    directive: bool,
    /// (token, line) of tokens with two dots in a row.
    dots: Vec<(usize, usize)>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_entries_across_comments_parens_and_directives() {
        let t = b"$ORIGIN a.\n; note\n@ SOA ns h (\n 1 2 3 4 5 )\n\n  A 1.2.3.4\nbad..x A 1.1.1.1\nt TXT \"a..b\" c\\..d\n";
        let e = outline(t);
        assert_eq!(e.len(), 4);
        assert_eq!((e.line(0), e.owner_first(0)), (3, true));
        assert_eq!((e.line(1), e.owner_first(1)), (6, false));
        assert_eq!(e.double_dots(2).collect::<Vec<_>>(), vec![(0, 7)]);
        assert_eq!(e.double_dots(3).count(), 0, "quoted and escaped dots");
        assert_eq!(e.line(4), 0);
        assert_eq!(e.unclosed_paren(), None);
        let open = outline(b"@ SOA ns h 1 2 3 4 5\n; (\nt TXT \"(\" \\(\nu TXT ( x\n\n");
        assert_eq!(
            open.unclosed_paren(),
            Some(4),
            "quoted, escaped and commented ones do not count"
        );
    }
}
