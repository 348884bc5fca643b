//! `firehose sink`'s drop counters, each driven above zero (docs/sink-flood.md's drop
//! accounting): the sink is frozen (SIGSTOP) while datagrams arrive, so its socket or ring
//! overflows for certain, then thawed; every datagram sent is then either received or
//! counted as dropped, exactly. The port-holding socket's filter counts what reaches the
//! kernel stack. A receive buffer or ring that never overflowed, or a counter that stayed
//! zero, fails the test. AF_PACKET and AF_XDP need root and skip with a reason otherwise.

use crate::util::{bin, freeze, json_of, send_paced, signal_pid, tmp, until, Spawned};
use crate::xdp_util::{Lab, SRV4};
use firehose_sys::cpu::is_root;
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, UdpSocket};
use std::process::Command;
use std::time::{Duration, Instant};

/// A sink child: started, its listen address read from its start line, its later lines
/// kept for [`Sink::wait_line`]; killed on drop.
pub(crate) struct Sink {
    proc: Spawned,
    pub(crate) addr: SocketAddr,
    lines: std::sync::mpsc::Receiver<String>,
}

impl Sink {
    /// Starts `cmd` (a command line running `firehose sink`) and reads its start line
    /// ("firehose sink: ADDR --io ..."), printed once every socket, ring or program is in
    /// place. Fails after 30 s.
    pub(crate) fn start(cmd: Command) -> Sink {
        let (mut sink, first) = Sink::spawn(cmd);
        sink.addr = first
            .strip_prefix("firehose sink: ")
            .and_then(|r| r.split_whitespace().next())
            .and_then(|a| a.parse().ok())
            .unwrap_or_else(|| panic!("unexpected start line {first:?}"));
        sink
    }

    /// Starts `cmd` (any firehose child that prints a start line once set up) and returns
    /// it with that line. Fails after 30 s.
    pub(crate) fn spawn(cmd: Command) -> (Sink, String) {
        let mut proc = Spawned::start(cmd);
        let out = proc.child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for l in BufReader::new(out).lines().map_while(Result::ok) {
                let _ = tx.send(l);
            }
        });
        let mut sink = Sink {
            proc,
            addr: "0.0.0.0:0".parse().unwrap(),
            lines: rx,
        };
        match sink.lines.recv_timeout(Duration::from_secs(30)) {
            Ok(first) => (sink, first),
            Err(e) => {
                sink.kill();
                let mut err = String::new();
                if let Some(mut s) = sink.proc.child.stderr.take() {
                    let _ = std::io::Read::read_to_string(&mut s, &mut err);
                }
                panic!("no start line within 30 s ({e}): {err}")
            }
        }
    }

    /// SIGKILL now (nothing runs in the child: it can clean up nothing); reaps it.
    pub(crate) fn kill(&mut self) {
        self.proc.kill();
    }

    /// True while the child runs.
    pub(crate) fn running(&mut self) -> bool {
        matches!(self.proc.child.try_wait(), Ok(None))
    }

    pub(crate) fn pid(&self) -> u32 {
        self.proc.id()
    }

    /// Waits (at most 30 s) for a line of stdout starting with `prefix` (after trimming).
    pub(crate) fn wait_line(&self, prefix: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(l) if l.trim_start().starts_with(prefix) => return l,
                Ok(_) => {}
                Err(e) => panic!("no line starting {prefix:?} within 30 s: {e}"),
            }
        }
    }

    /// The lines printed so far (nothing is waited for).
    pub(crate) fn lines_so_far(&self) -> Vec<String> {
        self.lines.try_iter().collect()
    }

    /// Ctrl-C, then the exit (within 30 s) and its JSON report from `json`.
    pub(crate) fn stop(self, json: &std::path::Path) -> Value {
        signal_pid(self.pid(), "INT");
        self.exited(json)
    }

    /// The exit (within 30 s; the sink ends by itself), successful, and its JSON report
    /// from `json`.
    pub(crate) fn exited(mut self, json: &std::path::Path) -> Value {
        let st = self.proc.wait(Duration::from_secs(30));
        let mut err = String::new();
        if let Some(mut e) = self.proc.child.stderr.take() {
            let _ = std::io::Read::read_to_string(&mut e, &mut err);
        }
        assert!(st.success(), "sink exited with {st}: {err}");
        let v = json_of(json);
        let _ = std::fs::remove_file(json);
        v
    }
}

/// The receive queue of the UDP socket bound to `port` (/proc/net/udp's rx_queue), if any.
pub(crate) fn rx_queue(port: u16) -> Option<u64> {
    let text = std::fs::read_to_string("/proc/net/udp").unwrap();
    text.lines().skip(1).find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        let local_port = u16::from_str_radix(f[1].rsplit(':').next()?, 16).ok()?;
        (local_port == port).then(|| {
            let q = f[4].split(':').nth(1)?;
            u64::from_str_radix(q, 16).ok()
        })?
    })
}

fn sink_cmd(args: &[&str]) -> Command {
    let mut c = Command::new(bin());
    c.arg("sink").args(args);
    c
}

/// The smallest receive buffer overflows while the sink is frozen: what the socket could
/// not queue is `socket_drops`, and received + dropped is every datagram sent.
#[test]
fn a_frozen_sinks_socket_drops_are_counted_exactly() {
    let j = tmp("sink-drops-socket.json");
    let sink = Sink::start(sink_cmd(&[
        "--listen",
        "127.0.0.1:0",
        "--io",
        "recvmsg",
        "--rcvbuf",
        "4k",
        "--duration",
        "60",
        "--json-file",
        j.to_str().unwrap(),
    ]));
    freeze(sink.pid());
    send_paced(sink.addr, 2000, 64, 1);
    signal_pid(sink.pid(), "CONT");
    let port = sink.addr.port();
    until("the sink reading its queue", || rx_queue(port) == Some(0));
    let v = sink.stop(&j);
    let (packets, drops) = (
        v["packets"].as_u64().unwrap(),
        v["socket_drops"].as_u64().unwrap(),
    );
    assert!(
        drops > 0,
        "a 4 KiB buffer holds fewer than 2000 datagrams: {v}"
    );
    assert!(packets > 0, "{v}");
    assert_eq!(packets + drops, 2000, "received + dropped = sent: {v}");
    assert_eq!(
        v["per_worker"][0]["socket_drops"], drops,
        "the worker's count is the total: {v}"
    );
}

/// Packet mode, frozen: the ring fills and the kernel counts what it could not put there
/// (`ring_drops`, PACKET_STATISTICS); every datagram also reaches the port-holding socket,
/// whose drop-all filter counts it (`held_port_filtered`).
#[test]
fn a_frozen_packet_sinks_ring_drops_and_held_port_are_counted_exactly() {
    if !is_root() {
        eprintln!("skipping: AF_PACKET needs root");
        return;
    }
    let j = tmp("sink-drops-packet.json");
    let sink = Sink::start(sink_cmd(&[
        "--listen",
        "127.0.0.1:0",
        "--io",
        "packet",
        "--duration",
        "60",
        "--json-file",
        j.to_str().unwrap(),
    ]));
    freeze(sink.pid());
    // 20,000 datagrams of 1400 bytes: 28 MB, over the 16 MiB ring.
    let n = 20_000;
    send_paced(sink.addr, n, 1400, 4);
    signal_pid(sink.pid(), "CONT");
    let v = sink.stop(&j);
    let packets = v["packets"].as_u64().unwrap();
    let drops = v["ring_drops"].as_u64().unwrap();
    assert!(
        drops > 0,
        "{n} datagrams of 1400 bytes overflow the ring: {v}"
    );
    assert_eq!(packets + drops, n as u64, "received + dropped = sent: {v}");
    assert_eq!(
        v["held_port_filtered"], n as u64,
        "every datagram reached the port: {v}"
    );
}

/// AF_XDP, frozen, with 64-entry rings: the first frames fill the rx ring, the fill ring
/// runs dry, and the kernel drops the rest, counted by XDP_STATISTICS
/// (`xsk_rx_dropped`/`xsk_rx_ring_full`, `xsk_fill_ring_empty`). At most the two rx rings'
/// 128 frames get in while it is frozen and nothing is sent after, so at least the rest
/// is counted as dropped, however late the sink drains its rings.
#[test]
fn a_frozen_xdp_sinks_ring_drops_are_counted() {
    if !is_root() {
        eprintln!("skipping: AF_XDP needs root");
        return;
    }
    let lab = Lab::new("sd");
    let j = tmp("sink-drops-xdp.json");
    let listen = format!("{SRV4}:7301");
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", &lab.srv, bin(), "sink"]).args([
        "--listen",
        &listen,
        "--io",
        "xdp",
        "--queues",
        "0,1",
        "--ring",
        "64",
        "--duration",
        "60",
        "--json-file",
        j.to_str().unwrap(),
    ]);
    let sink = Sink::start(cmd);
    freeze(sink.pid());
    let n = 2000;
    let to: SocketAddr = listen.parse().unwrap();
    Lab::in_ns(&lab.cli, move || {
        let socks: Vec<_> = (0..8)
            .map(|_| UdpSocket::bind("0.0.0.0:0").unwrap())
            .collect();
        for i in 0..n {
            socks[i % 8].send_to(&[i as u8; 100], to).unwrap();
            if i % 20 == 19 {
                std::thread::sleep(Duration::from_millis(2));
            }
        }
    });
    signal_pid(sink.pid(), "CONT");
    let v = sink.stop(&j);
    let packets = v["packets"].as_u64().unwrap();
    let dropped = v["xsk_rx_dropped"].as_u64().unwrap() + v["xsk_rx_ring_full"].as_u64().unwrap();
    assert!(packets <= 128, "two 64-entry rx rings: {v}");
    assert!(
        dropped >= n as u64 - 128,
        "{n} frames at two 64-entry rings: {v}"
    );
    assert!(
        v["xsk_fill_ring_empty"].as_u64().unwrap() > 0,
        "the fill ring ran dry: {v}"
    );
    assert!(packets + dropped <= n as u64, "{v}");
    assert!(!lab.has_xdp(), "program left after the run");
}

/// A root sink started in the background of a non-interactive shell inherits SIGINT
/// ignored (`trap "" INT` does the same): Ctrl-C sent as soon as it has started (its drop
/// watch attached) still stops it cleanly, with its report, and nothing stays attached.
#[test]
fn sigint_right_after_start_stops_a_root_sink_that_inherited_it_ignored() {
    if !is_root() {
        eprintln!("skipping: the sink's drop watch attaches as root only");
        return;
    }
    let j = tmp("sink-drops-sigint.json");
    let mut sh = Command::new("sh");
    sh.arg("-c").arg(format!(
        "trap '' INT; exec {} sink --listen 127.0.0.1:0 --duration 60 --json-file {}",
        bin(),
        j.display()
    ));
    let sink = Sink::start(sh);
    let ids = crate::drops::prog_ids(sink.pid());
    assert!(!ids.is_empty(), "no drop watch held by a root sink");
    let v = sink.stop(&j);
    assert_eq!(v["packets"], 0, "{v}");
    for id in ids {
        let e = firehose_sys::xdp::attach::prog_info(id).unwrap_err();
        assert_eq!(e.errno(), Some(2), "program {id} remains: {e}");
    }
}
