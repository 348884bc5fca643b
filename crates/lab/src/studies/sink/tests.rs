use super::report::targets;
use super::*;
use crate::study::CellRun;

fn opts(kind: Kind) -> PacketStudy {
    let mut s = PacketStudy::new(
        kind,
        vec!["recvmsg".into(), "uring".into()],
        vec![Subject::UdpSink],
    );
    s.queues = vec![1, 2];
    s.frames = vec![64, 1518];
    s
}

#[test]
fn the_sink_plan_is_every_mode_and_peer_at_every_queue_count() {
    let c = cells(&opts(Kind::Sink));
    let names: Vec<String> = c.iter().map(Cell::name).collect();
    assert_eq!(
        names,
        [
            "recvmsg q1",
            "uring q1",
            "udp_sink q1",
            "recvmsg q2",
            "uring q2",
            "udp_sink q2"
        ]
    );
    assert!(c.iter().all(|c| c.frame == 64));
    let mut f = opts(Kind::Flood);
    f.modes = vec!["sendto".into()];
    f.peers = vec![Subject::Trafgen];
    let names: Vec<String> = cells(&f).iter().map(Cell::name).collect();
    assert_eq!(
        names,
        ["sendto 64B", "trafgen 64B", "sendto 1518B", "trafgen 1518B"]
    );
    assert_eq!(payload_of(64), 18);
    assert_eq!(payload_of(1518), 1472);
}

fn m(pps: f64, recv_us: f64, send_us: f64) -> Figures {
    Figures {
        pps,
        receiver_cpu_us_per_packet: Some(recv_us),
        sender_cpu_us_per_packet: Some(send_us),
        host_cpu_us_per_packet: Some(recv_us + send_us),
        own_drops: 0,
        kernel_drops: 0,
        loss: None,
    }
}

fn ran(cells: Vec<Cell>, trials: Vec<Vec<Figures>>) -> Ran<Cell, Figures> {
    crate::study::tests::ran(
        cells
            .into_iter()
            .zip(trials)
            .map(|(cell, trials)| CellRun {
                name: cell.name(),
                cell,
                reps: (1..=trials.len()).collect(),
                trials,
                skipped: None,
                failures: Vec::new(),
            })
            .collect(),
    )
}

#[test]
fn sink_targets_compare_per_receiving_cpu_and_state_uring_against_recvmmsg() {
    let cell = |mode: &str| Cell {
        subject: Subject::Sink(mode.into()),
        queues: 1,
        frame: 64,
    };
    // recvmsg: 1 us per packet (1M pps per CPU); recvmmsg 0.5 us (2M); uring 0.625 us (1.6M).
    let ran = ran(
        vec![cell("recvmsg"), cell("recvmmsg"), cell("uring")],
        vec![
            vec![m(500e3, 1.0, 2.0), m(520e3, 1.0, 2.0), m(480e3, 1.0, 2.0)],
            vec![m(800e3, 0.5, 1.0)],
            vec![m(760e3, 0.625, 1.0)],
        ],
    );
    let mut s = opts(Kind::Sink);
    s.queues = vec![1];
    s.profiles = vec![Profile::of(
        "recvmsg q1".into(),
        Err("perf is not installed".into()),
    )];
    let rows = s.rows(&ran);
    assert_eq!(rows[0].pps.unwrap().median, 500e3);
    assert_eq!(rows[0].pps_per_cpu.unwrap().median, 1e6);
    let t = &targets(&s, &rows);
    assert!(
        t[0].starts_with("q1: best sink mode per receiving CPU >= 1.5x recvmsg: met: recvmmsg"),
        "{t:?}"
    );
    assert!(
        t[0].contains("= 2.00x (host CPU per packet 1.50 against 3.00 us)"),
        "{t:?}"
    );
    assert!(
        t[1].contains("= 0.95x, per receiving CPU 0.80x; this host: uring 5% slower"),
        "{t:?}"
    );
    let page = s.page(&ran, &rows);
    let table = page.text();
    assert!(
        table.contains("receiving CPU, recvmsg q1: no profile: perf is not installed"),
        "{table}"
    );
    assert!(table.contains("\ntarget: q1: best sink mode"), "{table}");
    assert!(page.html().unwrap().contains("<svg"));
    // Without recvmsg: not measured, never a number.
    let t = sink_targets(&rows[1..], &[1]);
    assert!(t[0].contains("not measured"), "{t:?}");
}

#[test]
fn flood_targets_say_met_not_met_or_not_measured() {
    let cell = |mode: &str, frame| Cell {
        subject: Subject::Flood(mode.into()),
        queues: 1,
        frame,
    };
    let ran = ran(
        vec![cell("sendto", 64), cell("packet", 64), cell("packet", 1518)],
        vec![
            vec![m(1e6, 0.0, 2.0)],
            vec![m(3e6, 0.0, 0.5)],
            vec![m(1e6, 0.0, 3.0)],
        ],
    );
    let rows: Vec<Row> = opts(Kind::Flood).rows(&ran);
    let t = flood_targets(&rows, &["sendto", "packet"]);
    assert_eq!(t.len(), 2);
    assert!(
        t[0].starts_with("64B: flood packet >= 2x sendto pps per CPU: met: 2.00M against 500.0k"),
        "{t:?}"
    );
    assert!(
        t[1].contains("xdp") && t[1].contains("not measured (flood --io xdp is not in this build)"),
        "{t:?}"
    );
    let t = flood_targets(&rows[1..], &["sendto", "packet", "xdp"]);
    assert!(
        t[0].contains("not measured (packet or sendto did not run)"),
        "{t:?}"
    );
}

#[test]
fn an_absent_peer_is_not_measured_with_the_way_to_get_it() {
    assert_eq!(peer_absent(&Subject::Sink("recvmsg".into())), None);
    if !cmd::installed("udp_sink") {
        let why = peer_absent(&Subject::UdpSink).unwrap();
        assert!(why.starts_with("udp_sink not installed: "), "{why}");
        assert!(why.contains("netoptimizer/network-testing"), "{why}");
    }
}

#[test]
fn the_modes_the_lab_iterates_are_every_mode_once_by_name() {
    use firehose_flood::FloodIo;
    use firehose_sink::SinkIo;
    let sink: Vec<&str> = SinkIo::ALL.iter().map(|m| m.name()).collect();
    let flood: Vec<&str> = FloodIo::ALL.iter().map(|m| m.name()).collect();
    for (names, n) in [(&sink, sink.len()), (&flood, flood.len())] {
        let mut u = names.clone();
        u.sort_unstable();
        u.dedup();
        assert_eq!(u.len(), n, "{names:?}");
    }
    assert!(sink.contains(&"recvmsg") && sink.contains(&"uring") && flood.contains(&"sendto"));
}
