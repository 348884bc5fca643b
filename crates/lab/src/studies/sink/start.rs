//! Starting the two sides of a cell in the lab's namespaces: the receiver (a sink, a peer,
//! the XDP_DROP holder or iperf3's server) and the sender (a flood or a peer); and what the
//! cells read off the test host.

use super::{payload_of, Cell, Subject, FLOWS_PER_QUEUE};
use crate::peers::{iperf3, sockperf, trafgen, udp_sink};
use crate::proc::Proc;
use crate::sample;
use crate::study::Lab;
use crate::topology::{Side, VETH_CLIENT_ADDR, VETH_SERVER_ADDR};
use crate::{LabError, LabResult};
use firehose_sink::document::{SinkDocument, SinkReport};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// `ethtool -L DEV rx Q tx Q` on both ends.
pub(super) fn set_queues(lab: &Lab<'_>, q: usize) -> LabResult<()> {
    let q = q.to_string();
    for side in [Side::Server, Side::Client] {
        let dev = lab.topo.dev(side);
        lab.topo
            .exec(side, &["ethtool", "-L", &dev, "rx", &q, "tx", &q])?;
    }
    Ok(())
}

/// What the client veth has transmitted so far.
pub(super) fn tx_packets(lab: &Lab<'_>) -> LabResult<u64> {
    let dev = lab.topo.dev(Side::Client);
    let path = format!("/sys/class/net/{dev}/statistics/tx_packets");
    let t = lab.topo.exec(Side::Client, &["cat", &path])?;
    t.trim()
        .parse()
        .map_err(|_| LabError::Command(format!("{path}: not a number: {t}")))
}

/// Waits (at most `within`) until the client veth transmits: more than a few packets (an
/// ARP or neighbour exchange) between two reads 20 ms apart. False when it never does.
pub(super) fn sending(lab: &Lab<'_>, within: Duration) -> LabResult<bool> {
    let by = Instant::now() + within;
    let mut last = tx_packets(lab)?;
    while Instant::now() < by {
        lab.sleep_until(Instant::now() + Duration::from_millis(20))?;
        let now = tx_packets(lab)?;
        if now.saturating_sub(last) > 16 {
            return Ok(true);
        }
        last = now;
    }
    Ok(false)
}

/// Reads what `firehose sink --json-file` wrote, through the sink's own document type (a
/// missing field is an error, never 0).
pub(super) fn read_sink(path: &std::path::Path) -> LabResult<SinkReport> {
    let text = std::fs::read_to_string(path).map_err(|e| LabError::io(path.display(), e))?;
    let doc: SinkDocument = serde_json::from_str(&text).map_err(|e| {
        LabError::Run(format!(
            "{}: not a firehose sink document: {e}",
            path.display()
        ))
    })?;
    Ok(doc.body)
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// Waits until `pid` holds `port` (its socket is bound), or fails with its stderr.
fn wait_bound(lab: &Lab<'_>, p: &mut Proc, port: u16) -> LabResult<()> {
    let by = Instant::now() + Duration::from_secs(15);
    while !sample::port_bound(p.pid(), port) {
        lab.check()?;
        if p.exited().is_some() || Instant::now() > by {
            return Err(LabError::Run(format!(
                "{} did not bind port {port}: {}",
                p.name(),
                p.stderr_tail()
            )));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}

/// The sides of a running trial and what is read at its end.
pub(super) struct Running {
    pub(super) receiver: Proc,
    pub(super) sender: Proc,
    pub(super) sink_json: Option<PathBuf>,
}

/// Starts the receiver and sender of a lab sink cell.
pub(super) fn sink_cell(
    lab: &Lab<'_>,
    cell: &Cell,
    port: u16,
    tag: &str,
    total_s: u64,
) -> LabResult<Running> {
    let listen = format!("{VETH_SERVER_ADDR}:{port}");
    let json = lab.workdir.join(format!("{tag}-sink.json"));
    let (args, sink_json) = match &cell.subject {
        Subject::Sink(mode) => {
            let limit = (total_s + 10).to_string();
            // No drop watch: its program on every dropped skb would cost the sink what its
            // peers do not pay, and its teardown can outlast the stop's grace on a busy host.
            let mut a = lab.firehose(&[
                "sink",
                "--listen",
                &listen,
                "--io",
                mode,
                "--quiet",
                "--no-drops",
            ]);
            // AF_XDP takes one worker per receive queue (a queue without a socket would
            // drop its share); every other mode is one receiving worker.
            if mode != "xdp" {
                a.extend(strings(&["--workers", "1"]));
            }
            a.extend(strings(&["--duration", &limit, "--json-file"]));
            a.push(json.to_string_lossy().into_owned());
            (a, Some(json))
        }
        Subject::UdpSink => (udp_sink::argv(port), None),
        Subject::Sockperf => (
            sockperf::server(&VETH_SERVER_ADDR.to_string(), port, &[]),
            None,
        ),
        other => return Err(LabError::Run(format!("{other:?} is not a receiver"))),
    };
    let server_cpu = lab.placement.server_cpus[..1].to_vec();
    let mut receiver = lab.spawn(Side::Server, &server_cpu, &args, &format!("{tag}-recv"))?;
    wait_bound(lab, &mut receiver, port)?;
    let q = cell.queues.to_string();
    let flows = (cell.queues * FLOWS_PER_QUEUE).to_string();
    let frame = cell.frame.to_string();
    let secs = total_s.to_string();
    let send = lab.firehose(&[
        "flood",
        "--target",
        &listen,
        "--io",
        "sendmmsg",
        "--threads",
        &q,
        "--flows",
        &flows,
        "--frame",
        &frame,
        "--duration",
        &secs,
        "--quiet",
    ]);
    let client_cpus = lab.placement.client_cpus.clone();
    let sender = lab.spawn(Side::Client, &client_cpus, &send, &format!("{tag}-send"))?;
    Ok(Running {
        receiver,
        sender,
        sink_json,
    })
}

/// Starts the receiver and sender of a lab flood cell. The receiver is the XDP_DROP holder
/// (or, for iperf3, its server).
pub(super) fn flood_cell(
    lab: &Lab<'_>,
    cell: &Cell,
    port: u16,
    tag: &str,
    total_s: u64,
) -> LabResult<Running> {
    let sdev = lab.topo.dev(Side::Server);
    let target = format!("{VETH_SERVER_ADDR}:{port}");
    let server_cpu = lab.placement.server_cpus[..1].to_vec();
    let by = Instant::now() + Duration::from_secs(10);
    let receiver = if cell.subject == Subject::Iperf3 {
        let args = iperf3::server(port, None);
        let mut p = lab.spawn(Side::Server, &server_cpu, &args, &format!("{tag}-recv"))?;
        p.wait_for_output(iperf3::LISTENING, by, Some(lab.stop))?;
        p
    } else {
        let args = lab.firehose(&["lab", "xdp-drop", "--iface", &sdev]);
        let mut p = lab.spawn(Side::Server, &server_cpu, &args, &format!("{tag}-xdp"))?;
        p.wait_for_output("drops every packet", by, Some(lab.stop))?;
        p
    };
    let secs = total_s.to_string();
    let frame = cell.frame.to_string();
    let payload = payload_of(cell.frame);
    let addr = VETH_SERVER_ADDR.to_string();
    let args = match &cell.subject {
        Subject::Flood(mode) => lab.firehose(&[
            "flood",
            "--target",
            &target,
            "--io",
            mode,
            "--frame",
            &frame,
            "--duration",
            &secs,
            "--quiet",
        ]),
        Subject::Iperf3 => iperf3::udp_client(&addr, port, payload, total_s),
        // sockperf's throughput client sends flat out with one sendto() per message and
        // waits for no answer, so XDP_DROP suits it like firehose's own senders.
        Subject::SockperfTp => sockperf::throughput(&addr, port, payload, total_s),
        Subject::Trafgen => {
            let conf = lab.workdir.join(format!("{tag}.trafgen"));
            let text = trafgen::conf(
                cell.frame,
                mac(lab, Side::Client)?,
                mac(lab, Side::Server)?,
                (VETH_CLIENT_ADDR, 40000),
                (VETH_SERVER_ADDR, port),
            )
            .ok_or_else(|| LabError::Usage(format!("frame {} is too small", cell.frame)))?;
            std::fs::write(&conf, text).map_err(|e| LabError::io(conf.display(), e))?;
            trafgen::argv(&lab.topo.dev(Side::Client), &conf)
        }
        other => return Err(LabError::Run(format!("{other:?} is not a sender"))),
    };
    let cpu = lab.placement.client_cpus[..1].to_vec();
    let sender = lab.spawn(Side::Client, &cpu, &args, &format!("{tag}-send"))?;
    Ok(Running {
        receiver,
        sender,
        sink_json: None,
    })
}

/// The MAC address of one side's veth.
pub(super) fn mac(lab: &Lab<'_>, side: Side) -> LabResult<[u8; 6]> {
    let dev = lab.topo.dev(side);
    let t = lab
        .topo
        .exec(side, &["cat", &format!("/sys/class/net/{dev}/address")])?;
    firehose_frame::parse_mac(t.trim())
        .ok_or_else(|| LabError::Command(format!("{dev}: unreadable MAC '{}'", t.trim())))
}
