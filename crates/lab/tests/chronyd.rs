//! chronyd as the lab's NTP peer, against the real program: one configuration, two
//! instances sharing one port (SO_REUSEPORT), both answering NTP clients as a stratum-10
//! server without rate limiting, and nothing left running or on disk afterwards. Skips with
//! the reason when chronyd is not installed.

use firehose_lab::peers::chronyd::{self, ChronydConf};
use firehose_lab::proc::free_port;
use firehose_lab::sample::sockets_on_port;
use firehose_lab::study::{Lab, Placement};
use firehose_lab::topology::{Side, Topology};
use firehose_lab::workdir::WorkDir;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::AtomicBool;
use std::time::Duration;

#[test]
fn two_instances_share_a_port_and_answer_every_client() {
    if !firehose_lab::cmd::installed(chronyd::PROGRAM) {
        eprintln!("skipped: chronyd is not installed (apt-get install chrony)");
        return;
    }
    let work = WorkDir::new("chronyd-test").unwrap();
    let stop = AtomicBool::new(false);
    let lab = Lab {
        bin: "firehose".into(),
        stop: &stop,
        workdir: work.to_path_buf(),
        topo: Topology::loopback(),
        placement: Placement {
            server_cpus: vec![0],
            client_cpus: vec![0],
        },
    };
    let listen: SocketAddr = ([127, 0, 0, 1], free_port().unwrap()).into();
    let conf = ChronydConf {
        listen,
        allow: "127.0.0.1",
        stratum: 10,
    };
    let procs = chronyd::start(
        &lab,
        Side::Server,
        &[0],
        &work,
        &conf,
        2,
        Duration::from_secs(20),
    )
    .unwrap();
    let pids: Vec<u32> = procs.iter().map(|p| p.pid()).collect();
    assert_eq!(
        sockets_on_port(pids[0], listen.port()),
        2,
        "one socket per instance"
    );
    // 200 clients (one socket each, so reuseport spreads them over the instances), 2 requests
    // each in a row: with `ratelimit` chronyd would hold back a client's quick repeats.
    let ask = |clients: u64, tag: u64| {
        for c in 0..clients {
            let s = UdpSocket::bind("127.0.0.1:0").unwrap();
            s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
            for k in 0..2 {
                let t = (tag << 32) | (c << 8) | k;
                s.send_to(&chronyd::client_request(t), listen).unwrap();
                let mut buf = [0u8; 512];
                let (n, _) = firehose_sys::retry_interrupted(|| s.recv_from(&mut buf))
                    .unwrap_or_else(|e| panic!("client {c} request {k}: no answer: {e}"));
                assert!(chronyd::is_answer(&buf[..n], t), "{:?}", &buf[..n]);
                assert_eq!(buf[1], 10, "stratum");
                assert_eq!(buf[0] >> 6, 0, "leap: synchronised");
            }
        }
    };
    // 200 clients, one socket each (reuseport spreads them over the instances), 2 requests
    // each in a row: with a `ratelimit` line chronyd would hold back quick repeats.
    ask(200, 1);
    // With the first instance gone, the other one takes every client of the port alone.
    let mut procs = procs;
    drop(procs.remove(0));
    assert_eq!(sockets_on_port(pids[1], listen.port()), 1);
    ask(50, 2);
    drop(procs);
    for p in pids {
        assert!(
            !firehose_lab::cmd::process_alive(p),
            "chronyd {p} still running"
        );
    }
    let dir = work.to_path_buf();
    drop(work);
    assert!(!dir.exists(), "{} left behind", dir.display());
}
