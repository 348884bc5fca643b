//! Every switch is really applied: read back with getsockopt from the live sockets, and
//! CPU steering checked the way the kernel selftest reuseport_bpf_cpu does it.

use firehose_engine::{
    Handler, Pin, PmtuDisc, Profile, Request, ServeConfig, Server, SocketMode, Steer, Verdict,
};
use firehose_sys::retry_interrupted;
use firehose_sys::socket::{consts, UdpSock};
use firehose_sys::{cpu, Setting, SetupError};
use std::net::{SocketAddr, UdpSocket};
use std::time::Duration;

#[derive(Clone, Copy)]
struct Echo;
impl Handler for Echo {
    fn handle(&mut self, req: &mut Request<'_>) -> Verdict {
        Verdict::Reply(req.len())
    }
}

fn any4() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

#[test]
fn the_tuned_profile_gets_its_receive_buffer_or_says_why_not() {
    let cfg = ServeConfig::profile(Profile::Tuned, any4(), 1);
    let srv = Server::start(&cfg, |_| Echo).unwrap();
    let granted = srv.sockets()[0].rcvbuf().unwrap() as usize;
    let want = firehose_engine::config::TUNED_RCVBUF;
    if cpu::is_root() {
        assert_eq!(granted, 2 * want, "SO_RCVBUFFORCE doubles the request");
    }
    let notes = &srv.applied().notes;
    let noted = notes.iter().any(|n| n.starts_with("SO_RCVBUF: asked"));
    assert_eq!(noted, granted < want, "{granted} {notes:?}");
}

#[test]
fn options_are_applied_and_read_back() {
    let mut cfg = ServeConfig::profile(Profile::Naive, any4(), 2);
    cfg.sockets = SocketMode::Reuseport;
    cfg.pmtudisc = PmtuDisc::Omit;
    cfg.busy_poll = Some(50);
    cfg.rcvbuf = Some(1 << 20);
    cfg.sndbuf = Some(1 << 19);
    cfg.batch = 16;
    let srv = Server::start(&cfg, |_| Echo).unwrap();
    assert_eq!(srv.sockets().len(), 2);
    for s in srv.sockets() {
        assert!(s.reuseport().unwrap());
        assert_eq!(s.mtu_discover().unwrap(), consts::IP_PMTUDISC_OMIT);
        assert_eq!(s.busy_poll().unwrap(), 50);
        assert!(s.rxq_ovfl().unwrap());
        if cpu::is_root() {
            // SO_RCVBUFFORCE: the kernel doubles the request and ignores rmem_max.
            assert_eq!(s.rcvbuf().unwrap(), 2 << 20);
            assert_eq!(s.sndbuf().unwrap(), 2 << 19);
        } else {
            eprintln!("not root: buffer sizes are capped by rmem_max/wmem_max, only checked > 0");
            assert!(s.rcvbuf().unwrap() > 0);
        }
        assert_eq!(s.local_addr().unwrap(), srv.local_addr());
    }
    // The printed configuration is the read-back one.
    let a = srv.applied();
    assert!(a
        .socket_detail
        .iter()
        .all(|d| d.mtu_discover == "omit" && d.busy_poll_us == 50));
    // SO_BUSY_POLL_BUDGET (16, the batch; above 8 it needs CAP_NET_ADMIN): read back, or
    // the value set and why it cannot be read (getsockopt has no case for it on many
    // kernels: ENOPROTOOPT), never silently absent.
    for d in &a.socket_detail {
        match (d.busy_poll_budget, &d.busy_poll_budget_unread) {
            (Some(b), None) => assert_eq!(b, 16),
            (None, Some(why)) => assert!(why.starts_with("set to 16; not read back: "), "{why}"),
            (None, None) if !cpu::is_root() => {
                assert!(a.notes.iter().any(|n| n.contains("SO_BUSY_POLL_BUDGET=16")))
            }
            other => panic!("SO_BUSY_POLL_BUDGET: {other:?}"),
        }
    }
    srv.shutdown().expect("no worker failed");
}

#[test]
fn shared_mode_has_one_socket_without_reuseport() {
    let cfg = ServeConfig::profile(Profile::Naive, any4(), 3);
    let srv = Server::start(&cfg, |_| Echo).unwrap();
    assert_eq!(srv.sockets().len(), 1);
    assert!(!srv.sockets()[0].reuseport().unwrap());
    assert_eq!(srv.applied().worker_sockets, vec![0, 0, 0]);
    srv.shutdown().expect("no worker failed");
}

#[test]
fn port_in_use_is_refused_even_with_reuseport() {
    // The holder has SO_REUSEPORT and our uid, so the kernel would let a reuseport socket
    // join its group: only the server's own plain-bind probe can refuse the port.
    let holder = UdpSock::new_for(&any4()).unwrap();
    holder.set_reuseport(true).unwrap();
    holder.bind(&any4()).unwrap();
    let addr = holder.local_addr().unwrap();
    for p in [Profile::Naive, Profile::Tuned] {
        let cfg = ServeConfig::profile(p, addr, 1);
        let err = Server::start(&cfg, |_| Echo)
            .err()
            .unwrap_or_else(|| panic!("{p:?}: a port held by another socket must be refused"));
        assert!(err.to_string().contains("EADDRINUSE"), "{p:?}: {err}");
    }
}

/// Sends `n` datagrams from a thread pinned to `cpu`, waiting for each echo.
fn send_from_cpu(cpu_k: usize, to: SocketAddr, n: usize) {
    std::thread::spawn(move || {
        cpu::pin_current_thread(cpu_k).unwrap();
        let s = UdpSocket::bind("127.0.0.1:0").unwrap();
        s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let mut buf = [0u8; 64];
        for i in 0..n {
            s.send_to(&(i as u32).to_le_bytes(), to).unwrap();
            retry_interrupted(|| s.recv_from(&mut buf)).unwrap();
        }
    })
    .join()
    .unwrap();
}

fn steering_sends_each_cpu_to_its_worker(steer: Steer) {
    let cpus = cpu::allowed_cpus().unwrap();
    if cpus.len() < 2 {
        // With one CPU every packet reaches the one worker whatever the program does.
        eprintln!(
            "skipping {steer:?} steering: needs 2 allowed CPUs to tell workers apart, have {cpus:?}"
        );
        return;
    }
    let mut cfg = ServeConfig::profile(Profile::Steered, any4(), cpus.len());
    cfg.steer = steer;
    cfg.pin = Pin::List(cpus.clone());
    let srv = match Server::start(&cfg, |_| Echo) {
        Ok(s) => s,
        // Without root the kernel may refuse to load a BPF program; as root it must not.
        Err(e) if e.to_string().contains("EPERM") && !cpu::is_root() => {
            eprintln!("skipping {steer:?}: the kernel refused the BPF program ({e})");
            return;
        }
        Err(e) => panic!("{steer:?}: {e}"),
    };
    let to = srv.local_addr();
    for &k in &cpus {
        let before = srv.worker_stats();
        send_from_cpu(k, to, 50);
        let total =
            |v: &[firehose_engine::WorkerStats]| v.iter().map(|w| w.packets_in).sum::<u64>();
        let mut after = srv.worker_stats();
        for _ in 0..100 {
            if total(&after) >= total(&before) + 50 {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
            after = srv.worker_stats();
        }
        for (b, a) in before.iter().zip(&after) {
            let got = a.packets_in - b.packets_in;
            if a.cpu == Some(k) {
                assert_eq!(
                    got, 50,
                    "{steer:?}: worker on CPU {k} must get every packet sent from CPU {k}"
                );
            } else {
                assert_eq!(
                    got, 0,
                    "{steer:?}: worker on CPU {:?} got packets sent from CPU {k}",
                    a.cpu
                );
            }
        }
    }
    srv.shutdown().expect("no worker failed");
}

#[test]
fn cbpf_steering_by_cpu() {
    steering_sends_each_cpu_to_its_worker(Steer::Cpu);
}

#[test]
fn ebpf_steering_by_cpu() {
    steering_sends_each_cpu_to_its_worker(Steer::CpuEbpf);
}

#[test]
fn steering_needs_reuseport_and_distinct_cpus() {
    let mut cfg = ServeConfig::profile(Profile::Naive, any4(), 1);
    cfg.steer = Steer::Cpu;
    let e = Server::start(&cfg, |_| Echo)
        .err()
        .expect("steering a shared socket must fail");
    // The library names settings, never flags: the cli prints them as flags.
    assert!(
        e.to_string().contains("steer needs sockets reuseport"),
        "{e}"
    );
    assert!(!e.to_string().contains("--"), "{e}");
    assert!(
        matches!(&e, SetupError::Usage(u) if u.setting == Some(Setting::Steer)),
        "{e}"
    );
    // Two workers pinned to the same CPU collide modulo 2 (any host has its first CPU).
    let cpus = cpu::allowed_cpus().unwrap();
    let mut cfg = ServeConfig::profile(Profile::Steered, any4(), 2);
    cfg.pin = Pin::List(vec![cpus[0], cpus[0]]);
    let e = Server::start(&cfg, |_| Echo)
        .err()
        .expect("same CPU twice must fail");
    assert!(
        e.to_string().contains("pinned CPUs must differ modulo 2"),
        "{e}"
    );
}

#[test]
fn overload_drops_and_counts_without_crashing() {
    // A tiny receive buffer and a burst far larger than it: the kernel drops, the socket's
    // drop counter says so, and the server keeps answering afterwards.
    let mut cfg = ServeConfig::profile(Profile::Naive, any4(), 1);
    cfg.rcvbuf = Some(4096);
    let srv = Server::start(&cfg, |_| Echo).unwrap();
    let to = srv.local_addr();
    let s = UdpSocket::bind("127.0.0.1:0").unwrap();
    let payload = [0u8; 1000];
    for _ in 0..20_000 {
        let _ = s.send_to(&payload, to);
    }
    // Wait until the server has read what the kernel kept (a loaded CI host is slow).
    let counts = || {
        let drops: u64 = srv.socket_stats().iter().map(|x| x.kernel_drops).sum();
        let got: u64 = srv.worker_stats().iter().map(|w| w.packets_in).sum();
        (drops, got)
    };
    let (mut drops, mut got) = counts();
    for _ in 0..500 {
        if drops + got >= 20_000 {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
        (drops, got) = counts();
    }
    assert!(drops > 0, "expected kernel drops with a 4 KiB buffer");
    assert_eq!(
        got + drops,
        20_000,
        "every datagram is either served or counted as dropped"
    );
    s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    let mut buf = [0u8; 2000];
    while retry_interrupted(|| s.recv_from(&mut buf)).is_ok_and(|(n, _)| n == 1000) {
        if srv.worker_stats()[0].packets_out == got {
            break;
        }
    }
    s.send_to(b"still alive", to).unwrap();
    let (n, _) = loop {
        let r = retry_interrupted(|| s.recv_from(&mut buf)).unwrap();
        if r.0 == 11 {
            break r;
        }
    };
    assert_eq!(&buf[..n], b"still alive");
    srv.shutdown().expect("no worker failed");
}
