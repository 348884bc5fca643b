//! The one report writer: a study describes its report once as a [`Page`] (preamble lines,
//! tables, lists, charts, prose) and it is rendered three ways: the text the terminal shows,
//! `report.md`, and a self-contained `report.html` with SVG charts (no scripts, nothing
//! fetched).

use super::charts;
use super::html::{esc, page_start, PAGE_END};
use crate::LabResult;
use std::fmt::Write as _;

/// A report.
#[derive(Debug, Clone, Default)]
pub struct Page {
    /// "firehose lab sink": the Markdown and HTML heading.
    pub title: String,
    /// Lines about the run (placement, environment, load average): first on the terminal,
    /// a list in Markdown, paragraphs in HTML.
    pub preamble: Vec<String>,
    pub blocks: Vec<Block>,
}

/// A part of a page.
#[derive(Debug, Clone)]
pub enum Block {
    Table(Table),
    List(List),
    /// Charts side by side (HTML only).
    Charts(Vec<charts::Chart>),
    /// A paragraph of the Markdown and HTML pages (the terminal shows none).
    Prose(String),
    /// Lines for the terminal only (what the pages show as a table or a list).
    Terminal(Vec<String>),
}

/// How a column lines up on the terminal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Align {
    Left,
    Right,
}

/// A column of a table.
#[derive(Debug, Clone)]
pub struct Column {
    pub header: String,
    /// Width on the terminal; `None`: the widest cell or header.
    pub width: Option<usize>,
    pub align: Align,
}

impl Column {
    /// A left-aligned column as wide as its widest cell.
    pub fn auto(header: &str) -> Column {
        Column {
            header: header.into(),
            width: None,
            align: Align::Left,
        }
    }

    /// Columns padded on the terminal, from (header, width, left-aligned) triples.
    pub fn fixed_all(spec: &[(&str, usize, bool)]) -> Vec<Column> {
        spec.iter()
            .map(|&(h, w, left)| Column::fixed(h, w, if left { Align::Left } else { Align::Right }))
            .collect()
    }

    /// A column padded to `width` on the terminal.
    pub fn fixed(header: &str, width: usize, align: Align) -> Column {
        Column {
            header: header.into(),
            width: Some(width),
            align,
        }
    }
}

/// How a table shows on the terminal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TextTable {
    /// Padded columns joined by `gap` spaces, after a blank line when `blank_before`.
    Padded { gap: usize, blank_before: bool },
    /// As a Markdown table.
    Markdown,
    /// Not on the terminal (Markdown and HTML only).
    Hidden,
}

/// A table.
#[derive(Debug, Clone)]
pub struct Table {
    /// Heading in Markdown and HTML.
    pub title: Option<String>,
    pub columns: Vec<Column>,
    pub rows: Vec<Vec<String>>,
    /// Rows shown dimmed in HTML (client-bound, not measured), by index.
    pub dim: Vec<usize>,
    pub text: TextTable,
}

/// How a list shows on the terminal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TextList {
    /// A heading line (after a blank line when `blank_before`), then each item after
    /// `prefix`.
    Lines {
        heading: Option<String>,
        prefix: String,
        blank_before: bool,
    },
    /// Not on the terminal.
    Hidden,
}

impl TextList {
    /// Each item on its own line after `prefix`, no heading.
    pub fn prefixed(prefix: &str) -> TextList {
        TextList::Lines {
            heading: None,
            prefix: prefix.into(),
            blank_before: false,
        }
    }
}

/// A list (targets, ratios, what was skipped, notes).
#[derive(Debug, Clone)]
pub struct List {
    /// Heading in Markdown and HTML.
    pub title: String,
    pub items: Vec<String>,
    pub text: TextList,
}

impl Page {
    /// The text for the terminal.
    pub fn text(&self) -> String {
        let mut s = String::new();
        for l in &self.preamble {
            let _ = writeln!(s, "{l}");
        }
        for b in &self.blocks {
            match b {
                Block::Table(t) => text_table(&mut s, t),
                Block::List(l) => text_list(&mut s, l),
                Block::Terminal(lines) => {
                    for l in lines {
                        let _ = writeln!(s, "{l}");
                    }
                }
                Block::Charts(_) | Block::Prose(_) => {}
            }
        }
        s
    }

    /// report.md.
    pub fn markdown(&self) -> String {
        let mut s = format!("# {}\n\n", self.title);
        for l in &self.preamble {
            let _ = writeln!(s, "- {l}");
        }
        for b in &self.blocks {
            match b {
                Block::Table(t) => {
                    s.push('\n');
                    if let Some(h) = &t.title {
                        let _ = writeln!(s, "## {h}\n");
                    }
                    s.push_str(&md_table(t));
                }
                Block::List(l) if !l.items.is_empty() => {
                    let _ = writeln!(s, "\n## {}\n", l.title);
                    for i in &l.items {
                        let _ = writeln!(s, "- {i}");
                    }
                }
                Block::Prose(p) => {
                    let _ = writeln!(s, "\n{p}");
                }
                Block::List(_) | Block::Charts(_) | Block::Terminal(_) => {}
            }
        }
        s
    }

    /// report.html.
    pub fn html(&self) -> LabResult<String> {
        let mut h = page_start(&self.title);
        for l in &self.preamble {
            let _ = writeln!(h, "<p>{}</p>", esc(l));
        }
        for b in &self.blocks {
            match b {
                Block::Table(t) => {
                    if let Some(title) = &t.title {
                        let _ = writeln!(h, "<h2>{}</h2>", esc(title));
                    }
                    h.push_str(&html_table(t));
                }
                Block::List(l) if !l.items.is_empty() => {
                    let _ = writeln!(h, "<h2>{}</h2>\n<ul>", esc(&l.title));
                    for i in &l.items {
                        let _ = writeln!(h, "<li>{}</li>", esc(i));
                    }
                    h.push_str("</ul>\n");
                }
                Block::Charts(cs) => {
                    h.push_str("<div class=\"charts\">\n");
                    for c in cs {
                        let _ = writeln!(h, "<div>{}</div>", c.svg()?);
                    }
                    h.push_str("</div>\n");
                }
                Block::Prose(p) => {
                    let _ = writeln!(h, "<p>{}</p>", esc(p));
                }
                Block::List(_) | Block::Terminal(_) => {}
            }
        }
        h.push_str(PAGE_END);
        Ok(h)
    }
}

fn text_table(s: &mut String, t: &Table) {
    let TextTable::Padded { gap, blank_before } = t.text else {
        if t.text == TextTable::Markdown {
            s.push_str(&md_table(t));
        }
        return;
    };
    if blank_before {
        s.push('\n');
    }
    let widths: Vec<usize> = t
        .columns
        .iter()
        .enumerate()
        .map(|(i, c)| {
            c.width.unwrap_or_else(|| {
                t.rows
                    .iter()
                    .filter_map(|r| r.get(i))
                    .map(|x| x.chars().count())
                    .chain([c.header.chars().count()])
                    .max()
                    .unwrap_or(0)
            })
        })
        .collect();
    let line = |cells: &mut dyn Iterator<Item = &str>| {
        let mut l = String::new();
        for (i, (x, c)) in cells.zip(&t.columns).enumerate() {
            if i > 0 {
                l.push_str(&" ".repeat(gap));
            }
            let w = widths[i];
            let _ = match c.align {
                Align::Left => write!(l, "{x:<w$}"),
                Align::Right => write!(l, "{x:>w$}"),
            };
        }
        l.trim_end().to_string()
    };
    let _ = writeln!(
        s,
        "{}",
        line(&mut t.columns.iter().map(|c| c.header.as_str()))
    );
    for r in &t.rows {
        let _ = writeln!(s, "{}", line(&mut r.iter().map(String::as_str)));
    }
}

fn text_list(s: &mut String, l: &List) {
    let TextList::Lines {
        heading,
        prefix,
        blank_before,
    } = &l.text
    else {
        return;
    };
    if l.items.is_empty() {
        return;
    }
    if *blank_before {
        s.push('\n');
    }
    if let Some(h) = heading {
        let _ = writeln!(s, "{h}");
    }
    for i in &l.items {
        let _ = writeln!(s, "{prefix}{i}");
    }
}

/// The table in Markdown, `|` in cells escaped.
fn md_table(t: &Table) -> String {
    let headers: Vec<&str> = t.columns.iter().map(|c| c.header.as_str()).collect();
    let mut out = format!(
        "| {} |\n|{}\n",
        headers.join(" | "),
        "---|".repeat(headers.len())
    );
    for r in &t.rows {
        let cells: Vec<String> = r.iter().map(|c| c.replace('|', "\\|")).collect();
        let _ = writeln!(out, "| {} |", cells.join(" | "));
    }
    out
}

/// The table in HTML, every cell escaped, dimmed rows marked.
fn html_table(t: &Table) -> String {
    let mut h = String::from("<table>\n<tr>");
    for c in &t.columns {
        let _ = write!(h, "<th>{}</th>", esc(&c.header));
    }
    h.push_str("</tr>\n");
    for (i, r) in t.rows.iter().enumerate() {
        h.push_str(if t.dim.contains(&i) {
            "<tr class=\"dim\">"
        } else {
            "<tr>"
        });
        for c in r {
            let _ = write!(h, "<td>{}</td>", esc(c));
        }
        h.push_str("</tr>\n");
    }
    h.push_str("</table>\n");
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page() -> Page {
        Page {
            title: "firehose lab test".into(),
            preamble: vec!["host: a <b>".into()],
            blocks: vec![
                Block::Table(Table {
                    title: Some("Cells".into()),
                    columns: vec![Column::auto("cell"), Column::fixed("pps", 6, Align::Right)],
                    rows: vec![
                        vec!["a|b".into(), "1.0k".into()],
                        vec!["longer".into(), "2".into()],
                    ],
                    dim: vec![1],
                    text: TextTable::Padded {
                        gap: 2,
                        blank_before: true,
                    },
                }),
                Block::List(List {
                    title: "Targets".into(),
                    items: vec!["x: met".into()],
                    text: TextList::prefixed("target: "),
                }),
                Block::List(List {
                    title: "Skipped".into(),
                    items: Vec::new(),
                    text: TextList::prefixed("skipped: "),
                }),
                Block::Prose("Verdicts judge tps.".into()),
            ],
        }
    }

    #[test]
    fn one_page_three_renderings() {
        let p = page();
        assert_eq!(
            p.text(),
            "host: a <b>\n\ncell       pps\na|b       1.0k\nlonger       2\ntarget: x: met\n"
        );
        let md = p.markdown();
        assert!(
            md.starts_with("# firehose lab test\n\n- host: a <b>\n"),
            "{md}"
        );
        assert!(
            md.contains("## Cells\n\n| cell | pps |\n|---|---|\n| a\\|b | 1.0k |\n"),
            "{md}"
        );
        assert!(md.contains("\n## Targets\n\n- x: met\n"), "{md}");
        assert!(!md.contains("Skipped"), "an empty list is left out: {md}");
        assert!(md.ends_with("\nVerdicts judge tps.\n"), "{md}");
        let h = p.html().unwrap();
        assert!(h.contains("<p>host: a &lt;b&gt;</p>"), "{h}");
        assert!(h.contains("<tr class=\"dim\"><td>longer</td>"), "{h}");
        assert!(h.contains("<h2>Targets</h2>\n<ul>\n<li>x: met</li>"), "{h}");
        assert!(h.ends_with(PAGE_END));
    }

    #[test]
    fn markdown_tables_print_as_such_on_the_terminal_and_hidden_ones_not_at_all() {
        let mut p = page();
        if let Block::Table(t) = &mut p.blocks[0] {
            t.text = TextTable::Markdown;
        }
        assert!(p.text().contains("| cell | pps |\n|---|---|\n"));
        if let Block::Table(t) = &mut p.blocks[0] {
            t.text = TextTable::Hidden;
        }
        assert!(!p.text().contains("cell"));
    }
}
