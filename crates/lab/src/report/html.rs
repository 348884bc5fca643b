//! The self-contained HTML page written by `--report DIR`: inline SVG charts and the table,
//! no scripts, no external fonts or styles, readable offline.

use super::table::{self, cells, HEADERS};
use super::{charts, LabReport};
use crate::LabResult;

/// Escapes text for HTML.
pub fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A table of `rows` under `headers`, every cell escaped.
pub fn html_table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut t = String::from("<table>\n<tr>");
    for c in headers {
        t.push_str(&format!("<th>{}</th>", esc(c)));
    }
    t.push_str("</tr>\n");
    for r in rows {
        t.push_str("<tr>");
        for c in r {
            t.push_str(&format!("<td>{}</td>", esc(c)));
        }
        t.push_str("</tr>\n");
    }
    t.push_str("</table>\n");
    t
}

/// The start of a plain report page (`lab stream`, `lab sink`): head, shared style, the
/// title as heading; the caller appends the body and [`PAGE_END`].
pub fn page_start(title: &str) -> String {
    let t = esc(title);
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>{t}</title>\n\
         <style>body{{font-family:sans-serif;margin:24px;color:#222}}\
         table{{border-collapse:collapse;font-size:13px}}\
         td,th{{border:1px solid #bbb;padding:3px 6px;text-align:left}}th{{background:#eee}}\
         .charts{{display:flex;flex-wrap:wrap;gap:12px}}</style>\n</head><body>\n<h1>{t}</h1>\n"
    )
}

/// The end of a page begun with [`page_start`].
pub const PAGE_END: &str = "</body></html>\n";

/// Renders the page.
pub fn render(rep: &LabReport) -> LabResult<String> {
    let title = format!("firehose lab {} ({})", rep.kind, rep.topology);
    let tps = charts::tps_bars(&rep.rows, "Transactions per second")?;
    let names: Vec<String> = rep.rows.iter().map(|r| r.name.clone()).collect();
    let per_cpu: Vec<_> = rep.rows.iter().map(|r| r.cpus.clone()).collect();
    let cpus = charts::cpu_stacks(&names, &per_cpu)?;
    let latency: Vec<_> = rep.rows.iter().map(|r| r.latency_us.clone()).collect();
    let lat = charts::latency_lines(&names, &latency)?;
    let mut h = String::new();
    h.push_str("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n");
    h.push_str(&format!("<title>{}</title>\n", esc(&title)));
    h.push_str(
        "<style>body{font-family:sans-serif;margin:24px;color:#222}\
         table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #bbb;padding:3px 6px;text-align:left}\
         th{background:#eee}.charts{display:flex;flex-wrap:wrap;gap:12px}.bound{color:#888}\
         .key{display:inline-block;width:12px;height:12px;margin:0 4px 0 12px;border:1px solid #999}\
         .legend{font-size:13px;text-align:center}</style>\n",
    );
    h.push_str("</head><body>\n");
    h.push_str(&format!("<h1>{}</h1>\n", esc(&title)));
    h.push_str(&format!(
        "<p>Kernel {} &middot; {} &middot; {} CPUs &middot; server CPUs {} &middot; client CPUs {} &middot; {} worker(s) &middot; {} repetition(s) of {} s, interleaved.</p>\n",
        esc(&rep.environment.kernel),
        esc(&rep.environment.cpu_model),
        rep.environment.nproc,
        firehose_sys::cpu::CpuSet::from(&rep.placement.server_cpus),
        firehose_sys::cpu::CpuSet::from(&rep.placement.client_cpus),
        rep.workers,
        rep.repetitions,
        rep.load.duration_s
    ));
    let legend: String = charts::CPU_PARTS
        .iter()
        .map(|(name, (r, g, b))| {
            format!("<span class=\"key\" style=\"background:rgb({r},{g},{b})\"></span>{name} ")
        })
        .collect();
    h.push_str("<div class=\"charts\">\n");
    h.push_str(&format!("<div>{tps}</div>\n"));
    h.push_str(&format!(
        "<div>{cpus}<div class=\"legend\">{legend}</div></div>\n"
    ));
    h.push_str("</div>\n<div class=\"charts\">\n");
    h.push_str(&format!("<div>{lat}</div>\n</div>\n"));
    h.push_str("<h2>Results</h2>\n<table>\n<tr>");
    for c in HEADERS {
        h.push_str(&format!("<th>{}</th>", esc(c)));
    }
    h.push_str("</tr>\n");
    for r in &rep.rows {
        let class = if r.client_bound {
            " class=\"bound\""
        } else {
            ""
        };
        h.push_str(&format!("<tr{class}>"));
        for c in cells(r) {
            h.push_str(&format!("<td>{}</td>", esc(&c)));
        }
        h.push_str("</tr>\n");
    }
    h.push_str("</table>\n<ul>\n");
    let per_cpu = table::per_cpu_cells(rep);
    let per_cpu_html = html_table(&table::PER_CPU_HEADERS, &per_cpu);
    for r in &rep.rows {
        h.push_str(&format!(
            "<li><b>{}</b>: {}</li>\n",
            esc(&r.name),
            esc(&r.describe)
        ));
    }
    h.push_str("</ul>\n<h2>Per CPU (median repetition)</h2>\n");
    h.push_str(&per_cpu_html);
    if !rep.ratios.is_empty() {
        h.push_str("<h2>Ratios</h2>\n<ul>\n");
        for r in &rep.ratios {
            h.push_str(&format!(
                "<li>{}: {} / {} = <b>{:.2}</b></li>\n",
                esc(&r.what),
                esc(&r.a),
                esc(&r.b),
                r.value
            ));
        }
        h.push_str("</ul>\n");
    }
    for (head, items) in [
        (
            "Skipped",
            rep.skipped
                .iter()
                .map(|s| format!("{}: {}", s.name, s.reason))
                .collect::<Vec<_>>(),
        ),
        ("Notes", rep.notes.clone()),
    ] {
        if !items.is_empty() {
            h.push_str(&format!("<h2>{head}</h2>\n<ul>\n"));
            for i in items {
                h.push_str(&format!("<li>{}</li>\n", esc(&i)));
            }
            h.push_str("</ul>\n");
        }
    }
    h.push_str("</body></html>\n");
    Ok(h)
}
