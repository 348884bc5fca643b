//! The metrics endpoint's request reader (`engine::metrics_http`): any client that can
//! reach `serve --metrics` sends it bytes.
//!
//! Input: one control byte (how the request arrives in reads), then the bytes. Read piece
//! by piece as the endpoint reads them, the head ends at the same place however the bytes
//! were cut, never past the limit, at a blank line; the answer to what arrived states its
//! body's length, and renders metrics only for `GET /metrics`.

use crate::input::{pieces, Input};
use firehose_engine::metrics_http::{head, route, Head};
use std::cell::Cell;

/// A small limit, so inputs reach it.
const MAX: usize = 512;

const CUTS: [&[u8]; 4] = [&[], &[1], &[3, 7, 1], &[64, 200]];

pub fn check(data: &[u8]) {
    let mut inp = Input::new(data);
    let cut = CUTS[inp.byte() as usize % CUTS.len()];
    let bytes = inp.rest();
    let whole = head(bytes, MAX);
    let mut buf = Vec::new();
    let mut seen = Head::Incomplete;
    for p in pieces(bytes, cut) {
        if seen != Head::Incomplete {
            break;
        }
        buf.extend_from_slice(p);
        seen = head(&buf, MAX);
    }
    match seen {
        Head::Complete(n) => {
            assert_eq!(
                whole, seen,
                "the head ends where it ends, however it arrives"
            );
            assert!(n <= buf.len() && n <= MAX);
            assert!(buf[..n].ends_with(b"\n\n") || buf[..n].ends_with(b"\r\n\r\n"));
            let earlier = &buf[..n - 1];
            assert!(!earlier.windows(2).any(|w| w == b"\n\n"));
            assert!(!earlier.windows(4).any(|w| w == b"\r\n\r\n"));
            answer(&buf[..n]);
        }
        Head::TooLarge => {
            assert_eq!(whole, Head::TooLarge);
            assert!(buf.len() >= MAX);
        }
        Head::Incomplete => {
            assert_eq!(whole, Head::Incomplete);
            assert!(bytes.len() < MAX);
            // The client closed its side: what came is answered.
            answer(bytes);
        }
    }
}

fn answer(req: &[u8]) {
    let rendered = Cell::new(0);
    let r = route(req, &|| {
        rendered.set(rendered.get() + 1);
        "firehose_up 1\n".to_string()
    });
    let wire = r.to_bytes();
    let text = String::from_utf8(wire).expect("the answer is text");
    assert!(text.starts_with(&format!("HTTP/1.1 {}\r\n", r.status)));
    assert!(text.contains(&format!("\r\nContent-Length: {}\r\n", r.body.len())));
    assert!(text.ends_with(&format!("\r\n\r\n{}", r.body)));
    let line = req
        .split(|&b| b == b'\r' || b == b'\n')
        .next()
        .unwrap_or_default();
    let line = String::from_utf8_lossy(line);
    let mut words = line.split_whitespace();
    let asked = words.next() == Some("GET")
        && words.next().and_then(|t| t.split('?').next()) == Some("/metrics");
    assert_eq!(
        rendered.get(),
        u32::from(asked),
        "metrics rendered only when asked"
    );
    assert_eq!(r.status == "200 OK", asked);
}

/// Scrapes as Prometheus and curl send them, other paths and methods, a bare-LF head, a
/// head cut short, and a long header.
pub fn seeds() -> Vec<Vec<u8>> {
    let reqs: [&[u8]; 7] = [
        b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1:9100\r\nUser-Agent: Prometheus/2.45.0\r\nAccept: application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5\r\nX-Prometheus-Scrape-Timeout-Seconds: 10\r\n\r\n",
        b"GET /metrics?x=1 HTTP/1.0\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: a\r\n\r\n",
        b"POST /metrics HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc",
        b"GET /metrics\n\n",
        b"GET /metrics HTTP/1.1\r\nHost: a\r\n",
        b"GET /metrics HTTP/1.1\r\nCookie: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n\r\n",
    ];
    reqs.iter()
        .enumerate()
        .map(|(i, r)| [&[i as u8][..], r].concat())
        .collect()
}
