//! `serve --metrics ADDR:PORT`: a Prometheus scrape endpoint at `/metrics`.
//!
//! One thread accepts one connection at a time and renders a fresh snapshot per scrape. The
//! workers never see it: their counters are atomics they own, read here with relaxed loads.

use anyhow::{Context, Result};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::Duration;

/// Binds the endpoint and serves `render()` at `/metrics` from a background thread.
pub fn spawn<F>(addr: SocketAddr, render: F) -> Result<SocketAddr>
where
    F: Fn() -> String + Send + 'static,
{
    let listener = TcpListener::bind(addr).with_context(|| {
        format!("--metrics {addr}: cannot listen there (pick another address:port)")
    })?;
    let local = listener.local_addr()?;
    std::thread::Builder::new()
        .name("fh-metrics".into())
        .spawn(move || {
            for conn in listener.incoming().flatten() {
                // A slow or broken client only delays the next scrape.
                let _ = answer(conn, &render);
            }
        })
        .context("starting the metrics thread")?;
    Ok(local)
}

fn answer<F: Fn() -> String>(mut conn: TcpStream, render: &F) -> std::io::Result<()> {
    conn.set_read_timeout(Some(Duration::from_secs(2)))?;
    conn.set_write_timeout(Some(Duration::from_secs(2)))?;
    let mut req = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    while !req.windows(4).any(|w| w == b"\r\n\r\n") && req.len() < 8192 {
        let n = conn.read(&mut chunk)?;
        if n == 0 {
            break;
        }
        req.extend_from_slice(&chunk[..n]);
    }
    let (status, ctype, body) = route(&req, render);
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    conn.write_all(head.as_bytes())?;
    conn.write_all(body.as_bytes())
}

/// The response to a request: status line text, content type and body.
fn route<F: Fn() -> String>(req: &[u8], render: &F) -> (&'static str, &'static str, String) {
    let line = req.split(|&b| b == b'\r').next().unwrap_or_default();
    let line = String::from_utf8_lossy(line);
    let mut parts = line.split_whitespace();
    let (method, path) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let path = path.split('?').next().unwrap_or("");
    match (method, path) {
        ("GET", "/metrics") => (
            "200 OK",
            "text/plain; version=0.0.4; charset=utf-8",
            render(),
        ),
        ("GET", _) => (
            "404 Not Found",
            "text/plain; charset=utf-8",
            "firehose serves metrics at /metrics\n".into(),
        ),
        _ => (
            "405 Method Not Allowed",
            "text/plain; charset=utf-8",
            "only GET is served\n".into(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_metrics_and_refuses_the_rest() {
        let r = || "x 1\n".to_string();
        assert_eq!(
            route(b"GET /metrics HTTP/1.1\r\nHost: a\r\n\r\n", &r).2,
            "x 1\n"
        );
        assert_eq!(route(b"GET /metrics?x=1 HTTP/1.0\r\n\r\n", &r).0, "200 OK");
        assert_eq!(route(b"GET / HTTP/1.1\r\n\r\n", &r).0, "404 Not Found");
        assert_eq!(
            route(b"POST /metrics HTTP/1.1\r\n\r\n", &r).0,
            "405 Method Not Allowed"
        );
        assert_eq!(route(b"", &r).0, "405 Method Not Allowed");
    }

    #[test]
    fn serves_a_scrape_over_tcp() {
        let addr = spawn("127.0.0.1:0".parse().unwrap(), || "firehose_up 1\n".into()).unwrap();
        let mut c = TcpStream::connect(addr).unwrap();
        c.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
            .unwrap();
        let mut text = String::new();
        c.read_to_string(&mut text).unwrap();
        assert!(text.starts_with("HTTP/1.1 200 OK\r\n"), "{text}");
        assert!(text.contains("Content-Length: 14\r\n"), "{text}");
        assert!(text.ends_with("\r\n\r\nfirehose_up 1\n"), "{text}");
    }
}
