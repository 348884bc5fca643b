//! Reloading zones under load: every query answered, each answer wholly from one
//! version of the zone, versions never going back, and a broken file keeping the
//! version before it.

mod common;

use common::query;
use firehose_engine::{Profile, ServeConfig, Server};
use firehose_proto::dns::{Limits, Outcome, Reloader};
use firehose_proto::DnsHandler;
use firehose_sys::retry_interrupted;
use hickory_proto::op::Message;
use hickory_proto::rr::{RData, RecordType};
use std::net::UdpSocket;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Version `n` of the zone: an MX whose target and its address both carry `n`, and a
/// serial of `n`, so a mixed answer would show.
fn write_version(path: &Path, n: u32) {
    let text = format!(
        "$ORIGIN rl.test.\n$TTL 60\n@ SOA ns h {n} 2 3 4 5\n@ NS ns\nns A 192.0.2.250\n\
         mx MX 10 m{n}\nm{n} A 192.0.2.{n}\n"
    );
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// The version an answer comes from, checking that its parts agree.
fn version_of(resp: &[u8]) -> u32 {
    let m = Message::from_vec(resp).unwrap();
    let Some(RData::MX(mx)) = m.answers().first().map(|r| r.data()) else {
        panic!("no MX in {m:?}");
    };
    let target = mx.exchange().to_ascii();
    let n: u32 = target
        .strip_prefix('m')
        .and_then(|t| t.split('.').next())
        .and_then(|t| t.parse().ok())
        .unwrap();
    let glue = m.additionals();
    assert_eq!(glue.len(), 1, "{m:?}");
    assert_eq!(glue[0].name().to_ascii(), target);
    assert_eq!(
        glue[0].data().to_string(),
        format!("192.0.2.{n}"),
        "mixed versions"
    );
    n
}

#[test]
fn queries_across_reloads_are_all_answered_from_one_version() {
    let path: PathBuf =
        std::env::temp_dir().join(format!("fh-dns-reload-{}.zone", std::process::id()));
    write_version(&path, 1);
    let mut reloader =
        Reloader::load(std::slice::from_ref(&path), Limits::default(), false).unwrap();
    let cfg = ServeConfig::profile(Profile::Naive, "127.0.0.1:0".parse().unwrap(), 2);
    let h = DnsHandler::live(reloader.live(), 1232);
    let srv = Server::start(&cfg, move |_| h.clone()).unwrap();
    let addr = srv.local_addr();
    let done = Arc::new(AtomicBool::new(false));
    let d2 = done.clone();
    let client = std::thread::spawn(move || {
        let s = UdpSocket::bind("127.0.0.1:0").unwrap();
        s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let q = query("mx.rl.test.", RecordType::MX, Some(1232));
        let mut buf = [0u8; 2048];
        let (mut sent, mut lost, mut last) = (0u64, 0u64, 1u32);
        while !d2.load(Ordering::Relaxed) || sent < 2000 {
            s.send_to(&q, addr).unwrap();
            sent += 1;
            match retry_interrupted(|| s.recv(&mut buf)) {
                Ok(n) => {
                    let v = version_of(&buf[..n]);
                    assert!(v >= last, "version went back from {last} to {v}");
                    last = v;
                }
                Err(_) => lost += 1,
            }
        }
        (sent, lost, last)
    });
    for n in 2..=40 {
        write_version(&path, n);
        let out = reloader.reload().unwrap();
        assert!(matches!(out[0].1, Outcome::Loaded(5)), "{out:?}");
        std::thread::sleep(Duration::from_millis(5));
    }
    // A broken file: version 40 stays.
    std::fs::write(&path, "$ORIGIN rl.test.\n@ SOA ns h 41 2 3 4 5\nmx MX 10\n").unwrap();
    let out = reloader.reload().unwrap();
    let Outcome::Kept(why) = &out[0].1 else {
        panic!("{out:?}")
    };
    assert!(why.contains(":3:"), "{why}");
    std::thread::sleep(Duration::from_millis(20));
    done.store(true, Ordering::Relaxed);
    let (sent, lost, last) = client.join().unwrap();
    srv.shutdown().expect("no worker failed");
    let _ = std::fs::remove_file(&path);
    assert_eq!(lost, 0, "{lost} of {sent} queries unanswered");
    assert_eq!(last, 40);
}

#[test]
fn a_fifo_in_place_of_a_zone_file_is_refused_at_once() {
    use std::sync::mpsc;
    use std::time::Duration;
    let dir = std::env::temp_dir().join(format!("fh-dns-fifo-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("zone");
    std::fs::write(
        &path,
        "$ORIGIN f.test.\n@ SOA ns h 1 2 3 4 5\n@ NS ns\nns A 192.0.2.1\n",
    )
    .unwrap();
    let mut r = Reloader::load(std::slice::from_ref(&path), Limits::default(), false).unwrap();
    // The operator's mistake: a FIFO where the file was, then SIGHUP.
    std::fs::remove_file(&path).unwrap();
    let made = std::process::Command::new("mkfifo").arg(&path).status();
    if !made.is_ok_and(|s| s.success()) {
        eprintln!("skipped: mkfifo failed");
        let _ = std::fs::remove_dir_all(&dir);
        return;
    }
    let (tx, rx) = mpsc::channel();
    let reload = std::thread::spawn(move || {
        let _ = tx.send(r.reload().map(|o| format!("{:?}", o[0].1)));
    });
    let got = rx.recv_timeout(Duration::from_secs(5));
    if got.is_err() {
        // Unblock the reader stuck in open() before failing, so the test ends.
        let _ = std::fs::OpenOptions::new().write(true).open(&path);
    }
    let _ = reload.join();
    let _ = std::fs::remove_dir_all(&dir);
    let outcome = got.expect("the reload returned within 5 s").unwrap();
    assert!(
        outcome.contains("Kept") && outcome.contains("not a regular file"),
        "{outcome}"
    );
}
