//! DNS over TCP: the framing and the event loop's state machine, fed arbitrary byte
//! streams over a real loopback connection to a running TCP side (one per process).
//!
//! Input: one control byte (how the stream is cut into writes), then the stream. The
//! stream is sent in those pieces and the write side closed; the server must answer every
//! complete message before the first one it refuses to answer (a runt or a response),
//! in order, each framed, with the message's ID and QR set and sections that walk, then
//! close. A reset may cut the answers short, never reorder or corrupt them.

use crate::input::{pieces, Input};
use firehose_dnswire::get16;
use firehose_proto::dns::build::build;
use firehose_proto::dns::zone::parse_zone;
use firehose_proto::dns::{LiveZones, TcpConfig, TcpServer};
use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// How long the server has to answer and close.
const DEADLINE: Duration = Duration::from_secs(10);

/// Cuts of the stream into writes: whole, every byte, small and large pieces.
const CUTS: [&[u8]; 6] = [&[], &[1], &[2, 1, 13], &[7, 255, 3], &[14, 2], &[200, 100]];

fn server() -> SocketAddr {
    static S: OnceLock<(TcpServer, SocketAddr)> = OnceLock::new();
    S.get_or_init(|| {
        let zones = crate::dns_handler::ZONES
            .iter()
            .map(|(name, text)| parse_zone(text.as_bytes(), name).map(Arc::new))
            .collect::<Result<Vec<_>, _>>()
            .expect("test zones parse");
        let db = Arc::new(build(&zones).expect("test zones build"));
        let cfg = TcpConfig {
            max_conns: 1024,
            max_per_client: 1024,
            idle: Duration::from_secs(5),
            allow_transfer: vec!["127.0.0.2".parse().expect("literal")],
            ..TcpConfig::default()
        };
        let tcp = TcpServer::start(
            "127.0.0.1:0".parse().expect("literal"),
            LiveZones::new(db),
            cfg,
        )
        .expect("the TCP side starts");
        let addr = tcp.local_addr();
        (tcp, addr)
    })
    .1
}

pub fn check(data: &[u8]) {
    let mut inp = Input::new(data);
    let cut = CUTS[inp.byte() as usize % CUTS.len()];
    let stream = inp.rest();
    let mut s = TcpStream::connect(server()).expect("connect to the TCP side");
    s.set_nodelay(true).expect("nodelay");
    let started = Instant::now();
    // The server may stop reading (a refused message); then writes fail, which is fine.
    for p in pieces(stream, cut) {
        if s.write_all(p).is_err() {
            break;
        }
    }
    let _ = s.shutdown(Shutdown::Write);
    let mut got = Vec::new();
    let mut reset = false;
    let mut chunk = [0u8; 65536];
    loop {
        let left = DEADLINE.saturating_sub(started.elapsed());
        assert!(
            !left.is_zero(),
            "the server neither answered nor closed within {DEADLINE:?}"
        );
        s.set_read_timeout(Some(left)).expect("timeout");
        match s.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => got.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                panic!("the server neither answered nor closed within {DEADLINE:?}")
            }
            Err(_) => {
                reset = true;
                break;
            }
        }
    }
    compare(stream, &got, reset);
}

/// The messages of a stream (complete ones only) up to the first the server refuses:
/// shorter than a header, or a response.
fn expected(stream: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    let mut at = 0;
    while at + 2 <= stream.len() {
        let len = get16(stream, at) as usize;
        let Some(m) = stream.get(at + 2..at + 2 + len) else {
            break;
        };
        if m.len() < 12 || m[2] & 0x80 != 0 {
            break;
        }
        out.push(m);
        at += 2 + len;
    }
    out
}

fn compare(stream: &[u8], got: &[u8], reset: bool) {
    let want = expected(stream);
    let mut at = 0;
    let mut answered = 0;
    while at < got.len() {
        let Some(len) = got.get(at..at + 2).map(|b| get16(b, 0) as usize) else {
            assert!(reset, "a partial length prefix at the end of the answers");
            return;
        };
        let Some(resp) = got.get(at + 2..at + 2 + len) else {
            assert!(reset, "a partial answer at the end of the answers");
            return;
        };
        let q = want.get(answered).unwrap_or_else(|| {
            panic!(
                "answer {answered} has no query (only {} complete ones)",
                want.len()
            )
        });
        assert_eq!(resp[..2], q[..2], "answer {answered}: the query's ID");
        assert!(resp[2] & 0x80 != 0, "answer {answered}: QR set");
        if let Err(e) = crate::dns_message::walk(resp) {
            panic!("answer {answered} malformed ({e}): {resp:02x?}");
        }
        answered += 1;
        at += 2 + len;
    }
    if !reset {
        assert_eq!(
            answered,
            want.len(),
            "every complete query answered before the close"
        );
    }
}

/// Pipelined queries: all the test queries in one stream, some one at a time, one cut by
/// a runt, one by a response, a zone transfer (refused: not an allowed address), and a
/// message left incomplete.
pub fn seeds() -> Vec<Vec<u8>> {
    let frame = |m: &[u8]| [&(m.len() as u16).to_be_bytes()[..], m].concat();
    let qs = crate::dns_handler::queries();
    let all: Vec<u8> = qs.iter().flat_map(|q| frame(q)).collect();
    let mut out = vec![[&[0u8][..], &all].concat(), [&[2u8][..], &all].concat()];
    for (i, q) in qs.iter().take(8).enumerate() {
        out.push([&[i as u8][..], &frame(q)].concat());
    }
    let mut resp = qs[0].clone();
    resp[2] |= 0x80;
    out.push([&[3u8][..], &frame(&qs[1]), &frame(&resp), &frame(&qs[2])].concat());
    out.push(
        [
            &[4u8][..],
            &frame(&qs[1]),
            &frame(&[1, 2, 3]),
            &frame(&qs[2]),
        ]
        .concat(),
    );
    let axfr = crate::dns_handler::query("example.com.", 252, false);
    out.push([&[0u8][..], &frame(&axfr), &frame(&qs[0])].concat());
    let q = frame(&qs[4]);
    out.push([&[5u8][..], &q, &q[..q.len() - 3]].concat());
    out
}
