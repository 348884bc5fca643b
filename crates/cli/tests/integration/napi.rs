//! `serve --profile latency` and the kernel's busy-poll machinery: the epoll parameters
//! (EPIOCSPARAMS) read back in the start-up lines, and per-NAPI settings (netdev netlink)
//! set through the doctor's journal on the listening veth and restored when the server
//! ends, SIGTERM included; on loopback (no NAPI) the start-up lines say so.

use crate::util::*;
use firehose_sys::netdev::{Napi, NapiParam, Netdev};
use std::io::BufRead;
use std::path::PathBuf;
use std::process::Command;
use std::sync::mpsc;
use std::time::Duration;

/// A `serve` child whose stdout lines arrive on a channel; killed when dropped.
struct Lines {
    child: Spawned,
    rx: mpsc::Receiver<String>,
    seen: Vec<String>,
}

impl Lines {
    fn start(cmd: Command) -> Lines {
        let mut child = Spawned::start(cmd);
        let out = child.child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for l in std::io::BufReader::new(out).lines() {
                let Ok(l) = l else { break };
                if tx.send(l).is_err() {
                    break;
                }
            }
        });
        Lines {
            child,
            rx,
            seen: Vec::new(),
        }
    }

    /// Waits (at most 30 s) for a line starting with `prefix` (after its indent).
    fn until(&mut self, prefix: &str) -> String {
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match self.rx.recv_timeout(left) {
                Ok(l) => {
                    self.seen.push(l.clone());
                    if l.trim_start().starts_with(prefix) {
                        return l;
                    }
                }
                Err(_) => panic!("no line {prefix:?} within 30 s: {:#?}", self.seen),
            }
        }
    }

    /// SIGTERM, then every line until the exit, which must be clean.
    fn stop(mut self) -> Vec<String> {
        signal_pid(self.child.id(), "TERM");
        let status = self.child.wait(Duration::from_secs(30));
        while let Ok(l) = self.rx.recv_timeout(Duration::from_secs(5)) {
            self.seen.push(l);
        }
        assert!(
            status.success(),
            "serve exited with {status}: {:#?}",
            self.seen
        );
        self.seen
    }
}

fn napis_in(ns: &str, dev: &str) -> Vec<Napi> {
    let path = PathBuf::from(format!("/run/netns/{ns}"));
    let dev = dev.to_string();
    firehose_sys::ifaddr::in_netns(&path, move || {
        let idx = firehose_sys::ifaddr::ifindex(&dev)?;
        Netdev::open()?.napis(idx)
    })
    .unwrap()
}

#[test]
fn latency_serve_sets_napi_values_on_a_gro_veth_and_restores_them_on_sigterm() {
    if !root_or_skip() {
        return;
    }
    let pair = veth("np", 1);
    let srv_ns = pair
        .netns(Side::Server)
        .expect("a veth topology has namespaces");
    let ns = PathBuf::from(format!("/run/netns/{srv_ns}"));
    let dev = pair.dev(Side::Server);
    let listen = format!("{}:0", pair.server_addr());
    // A veth has NAPI only with GRO on (or XDP attached).
    assert!(napis_in(&srv_ns, &dev).is_empty(), "GRO is off by default");
    firehose_sys::ifaddr::in_netns(&ns, || {
        firehose_sys::ethtool::Ethtool::new()?.set_gro(&dev, true)
    })
    .unwrap();
    let before = match firehose_sys::ifaddr::in_netns(&ns, || {
        Netdev::open()?.napis(firehose_sys::ifaddr::ifindex(&dev)?)
    }) {
        Ok(v) if !v.is_empty() => v,
        other => {
            eprintln!("skipping: no NAPI listed for a veth with GRO on here: {other:?}");
            return;
        }
    };
    if before
        .iter()
        .any(|n| NapiParam::ALL.iter().any(|p| p.of(n).is_none()))
    {
        eprintln!("skipping: this kernel has no per-NAPI settings (6.13+): {before:?}");
        return;
    }
    let want = firehose_host::napi::LATENCY;
    assert!(
        before
            .iter()
            .all(|n| want.iter().any(|&(p, v)| p.of(n) != Some(v))),
        "the test needs values that differ from the defaults: {before:?}"
    );
    let mut serve = Command::new("ip");
    serve.args(["netns", "exec", &srv_ns, bin()]).args([
        "serve",
        "--profile",
        "latency",
        "--listen",
        &listen,
        "--workers",
        "1",
    ]);
    let mut srv = Lines::start(serve);
    srv.until("firehose serve: listening on");
    let head = srv.until("napi: ");
    assert!(head.contains(&format!("{dev} (veth, GRO on)")), "{head}");
    let journal = srv.until("napi: old values journaled in");
    let path = firehose_host::napi::journal_path(srv.child.id());
    assert!(journal.contains(&path.display().to_string()), "{journal}");
    assert!(path.exists(), "{}", path.display());
    let during = napis_in(&srv_ns, &dev);
    assert_eq!(during.len(), before.len());
    for n in &during {
        for &(p, v) in &want {
            assert_eq!(p.of(n), Some(v), "{} of napi {}: {n:?}", p.name(), n.id);
        }
    }
    // The start-up lines show the values read back.
    let printed = srv.seen.join("\n");
    assert!(
        printed.contains("defer-hard-irqs=2 gro-flush-timeout=200000 irq-suspend-timeout=20000000"),
        "{printed}"
    );
    let rest = srv.stop();
    let after = napis_in(&srv_ns, &dev);
    assert_eq!(after, before, "restored after SIGTERM: {rest:#?}");
    assert!(
        rest.iter()
            .any(|l| l.contains("napi restore:") && l.contains("done")),
        "{rest:#?}"
    );
    assert!(!path.exists(), "the journal is removed once restored");
    let mut retired = path.into_os_string();
    retired.push(".reverted");
    assert!(!PathBuf::from(retired).exists());
}

#[test]
fn on_loopback_the_latency_profile_says_there_is_no_napi_and_reports_its_epoll() {
    let mut srv = Lines::start({
        let mut c = Command::new(bin());
        c.args([
            "serve",
            "--profile",
            "latency",
            "--listen",
            "127.0.0.1:0",
            "--workers",
            "1",
        ]);
        c
    });
    srv.until("firehose serve: listening on");
    let note = srv.until("napi: lo has no NAPI instance");
    assert!(note.contains("none set"), "{note}");
    let printed = srv.seen.join("\n");
    // The epoll busy-poll parameters read back, or their refusal with its errno.
    assert!(
        printed.contains(
            "epoll (idle wait, EPIOCGPARAMS): busy_poll_usecs=50 busy_poll_budget=8 prefer_busy_poll=1"
        ) || printed.contains("EPIOCSPARAMS"),
        "{printed}"
    );
    srv.stop();
}
