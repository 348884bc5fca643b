//! The frame of the self-contained HTML page written by `--report DIR`: no scripts, no
//! external fonts or styles, readable offline.

/// Escapes text for HTML.
pub fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The start of a report page: head, the one style, the title as heading; the page
/// appends the body and [`PAGE_END`].
pub fn page_start(title: &str) -> String {
    let t = esc(title);
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>{t}</title>\n\
         <style>body{{font-family:sans-serif;margin:24px;color:#222}}\
         table{{border-collapse:collapse;font-size:13px}}\
         td,th{{border:1px solid #bbb;padding:3px 6px;text-align:left}}th{{background:#eee}}\
         .charts{{display:flex;flex-wrap:wrap;gap:12px}}tr.dim{{color:#888}}\
         .key{{display:inline-block;width:12px;height:12px;margin:0 4px 0 12px;border:1px solid #999}}\
         .legend{{font-size:13px;text-align:center}}</style>\n</head><body>\n<h1>{t}</h1>\n"
    )
}

/// The end of a page begun with [`page_start`].
pub const PAGE_END: &str = "</body></html>\n";
