//! `lab sink` and `lab flood`: the packet-rate study of the Red Hat article on UDP receive
//! and the NFV testing and tuning sheet, on the veth topology.
//!
//! `lab sink`: one `firehose sink` (one worker, on the server CPU) receives from a `firehose
//! flood --io sendmmsg` in the client namespace with one thread per receive queue and 16
//! flows per thread (source ports spread the flows over the queues), for each receive queue
//! count (`ethtool -L` on both veth ends, GRO on the receiving end so that each rx queue
//! has its own NAPI) and each receive mode; beside them udp_sink and `sockperf sr` where
//! installed. After the measured repetitions, one more run per mode samples the receiving
//! CPU with perf for the kernel symbols that bound it.
//!
//! `lab flood`: each send mode of `firehose flood` (one thread, on the client CPU) at each
//! RFC 2544 frame size into a receiver that costs nothing: an XDP_DROP program on the
//! receiving veth, held by `firehose lab xdp-drop` inside the server namespace (its BPF
//! link, and so the program, goes with that process however it ends); the client has a
//! permanent neighbour entry for the server, since ARP replies never come. Beside them
//! trafgen (AF_PACKET, bypassing the qdisc like `--io packet`) and `iperf3 -u` (which
//! needs its TCP control connection, so its cells run with the program off and iperf3's
//! server receiving).
//!
//! Every cell runs once per repetition, in turn (interleaved), each in the lab's harness:
//! two [`HostSample`]s around the measured window give the processes' and the host's CPU
//! time and the kernel's drop counters; medians with min-max over the repetitions.

mod peers;
pub mod perf_report;
pub mod report;
mod start;

pub use peers::{trafgen_conf, udp_sink_rates, UDP_SINK_HINT};
pub use report::{Row, SinkStudyReport};

use crate::cmd;
use crate::cputime::{self, Scope};
use crate::proc;
use crate::sample::{HostSample, Watch, Window};
use crate::stats::Summary;
use crate::topology::{Side, Topology, VETH_SERVER_ADDR};
use crate::{LabError, LabResult};
use firehose_sink::document::SinkDocument;
use perf_report::{Recording, Symbol};
use serde::Serialize;
use start::{mac, start_flood_cell, start_sink_cell, Lab};
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

/// RFC 2544 frame sizes (bytes on the wire, FCS included).
pub const RFC2544_FRAMES: [usize; 7] = [64, 128, 256, 512, 1024, 1280, 1518];

/// Flows of the generator per receive queue: enough source ports that the hash spreads
/// them over every queue.
const FLOWS_PER_QUEUE: usize = 16;

/// Which study.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Study {
    Sink,
    Flood,
}

/// What is measured in a cell: a receiver (lab sink) or a sender (lab flood).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Subject {
    /// `firehose sink --io MODE`.
    Sink(String),
    /// udp_sink --recvmsg.
    UdpSink,
    /// `sockperf sr`, the receiving side of sockperf's throughput mode.
    Sockperf,
    /// `firehose flood --io MODE`.
    Flood(String),
    /// trafgen (netsniff-ng): AF_PACKET TX ring, qdisc bypassed.
    Trafgen,
    /// `iperf3 -u -b 0`.
    Iperf3,
    /// `sockperf tp`: sockperf's throughput mode, the sending side (no answers needed).
    SockperfTp,
}

impl Subject {
    /// The name in tables: the mode, or the peer's name.
    pub fn name(&self) -> String {
        match self {
            Subject::Sink(m) | Subject::Flood(m) => m.clone(),
            Subject::UdpSink => "udp_sink".into(),
            Subject::Sockperf => "sockperf sr".into(),
            Subject::Trafgen => "trafgen".into(),
            Subject::Iperf3 => "iperf3 -u".into(),
            Subject::SockperfTp => "sockperf tp".into(),
        }
    }

    /// The program a peer needs, `None` for firehose itself.
    pub fn program(&self) -> Option<&'static str> {
        match self {
            Subject::Sink(_) | Subject::Flood(_) => None,
            Subject::UdpSink => Some("udp_sink"),
            Subject::Sockperf | Subject::SockperfTp => Some("sockperf"),
            Subject::Trafgen => Some("trafgen"),
            Subject::Iperf3 => Some("iperf3"),
        }
    }
}

/// One configuration.
#[derive(Debug, Clone, Serialize)]
pub struct Cell {
    pub subject: Subject,
    /// Receive queues of both veth ends (lab flood: 1).
    pub queues: usize,
    /// Frame size on the wire.
    pub frame: usize,
}

impl Cell {
    pub fn name(&self) -> String {
        match self.subject {
            Subject::Sink(_) | Subject::UdpSink | Subject::Sockperf => {
                format!("{} q{}", self.subject.name(), self.queues)
            }
            _ => format!("{} {}B", self.subject.name(), self.frame),
        }
    }
}

/// What to run.
#[derive(Debug, Clone)]
pub struct StudyOptions {
    pub study: Study,
    /// The `firehose` binary.
    pub bin: PathBuf,
    /// Receive (sink) or send (flood) modes, by their command-line names.
    pub modes: Vec<String>,
    /// Peers to run beside them (absent ones are reported, not run).
    pub peers: Vec<Subject>,
    /// Receive queue counts (lab sink); veth ends get the largest.
    pub queues: Vec<usize>,
    /// Frame sizes (lab flood; lab sink uses the first).
    pub frames: Vec<usize>,
    pub repetitions: usize,
    pub duration_s: u64,
    pub warmup_s: u64,
    pub server_cpu: usize,
    pub client_cpus: Vec<usize>,
    /// Sample the receiving CPU with perf once per mode (lab sink).
    pub profile: bool,
    pub workdir: PathBuf,
}

/// What one trial measured, over the window between two host samples.
#[derive(Debug, Clone, Serialize)]
pub struct Measured {
    pub pps: f64,
    /// Receiving process CPU per packet (lab sink).
    pub receiver_cpu_us_per_packet: Option<f64>,
    /// Sending process CPU per packet.
    pub sender_cpu_us_per_packet: Option<f64>,
    /// Every CPU's busy time (/proc/stat) per packet.
    pub host_cpu_us_per_packet: Option<f64>,
    /// The receiver's own count of what it lost (socket drops, ring drops).
    pub own_drops: u64,
    /// Udp InErrors (RcvbufErrors included; server namespace) and softnet dropped, over the
    /// window.
    pub kernel_drops: u64,
}

/// The plan: every cell of the study.
pub fn cells(o: &StudyOptions) -> Vec<Cell> {
    let mut out = Vec::new();
    match o.study {
        Study::Sink => {
            let frame = o.frames.first().copied().unwrap_or(64);
            for &q in &o.queues {
                let subjects = o.modes.iter().map(|m| Subject::Sink(m.clone()));
                for subject in subjects.chain(o.peers.iter().cloned()) {
                    out.push(Cell {
                        subject,
                        queues: q,
                        frame,
                    });
                }
            }
        }
        Study::Flood => {
            for &frame in &o.frames {
                let subjects = o.modes.iter().map(|m| Subject::Flood(m.clone()));
                for subject in subjects.chain(o.peers.iter().cloned()) {
                    out.push(Cell {
                        subject,
                        queues: 1,
                        frame,
                    });
                }
            }
        }
    }
    out
}

/// UDP payload of an IPv4 frame of `frame` bytes on the wire.
pub fn payload_of(frame: usize) -> usize {
    frame.saturating_sub(14 + 20 + 8 + 4)
}

/// A trial's figures (or why the cell cannot run here), and the receiving CPU's profile
/// when one was asked for (or why there is none).
type TrialResult = (
    Result<Measured, String>,
    Option<Result<Vec<Symbol>, String>>,
);

/// Runs one trial; `Ok(Err(why))` when the cell cannot run here (a mode the kernel refuses).
fn trial(
    lab: &Lab<'_>,
    cell: &Cell,
    tag: &str,
    port: u16,
    profile: bool,
) -> LabResult<TrialResult> {
    let o = lab.o;
    if o.study == Study::Sink {
        lab.set_queues(cell.queues)?;
    }
    let total_s = o.warmup_s + o.duration_s + 1;
    let started = match o.study {
        Study::Sink => start_sink_cell(lab, cell, port, tag, total_s),
        Study::Flood => start_flood_cell(lab, cell, port, tag, total_s),
    };
    let mut run = match started {
        Ok(r) => r,
        Err(LabError::Run(why)) => return Ok((Err(why), None)),
        Err(e) => return Err(e),
    };
    let watch = Watch {
        server_pid: run.receiver.pid(),
        client_pid: run.sender.pid(),
        port,
        separate_ns: true,
    };
    let t0 = Instant::now();
    proc::sleep_until(
        t0 + Duration::from_secs(o.warmup_s) + Duration::from_millis(300),
        Some(lab.stop),
    )?;
    if let Some(st) = run.sender.exited() {
        let why = format!(
            "the sender exited early ({st}): {}",
            run.sender.stderr_tail()
        );
        return Ok((Err(why), None));
    }
    let window = Duration::from_secs(o.duration_s).saturating_sub(Duration::from_millis(500));
    let rec = profile
        .then(|| Recording::start(o.server_cpu, window, lab.logs(), tag))
        .flatten();
    let tx0 = lab.tx_packets()?;
    // The sender's whole process tree: trafgen sends from a forked child.
    let tree = |pid| cputime::seconds(pid, Scope::Tree).ok();
    let send0 = tree(watch.client_pid);
    let before = HostSample::take(&watch)?;
    proc::sleep_until(Instant::now() + window, Some(lab.stop))?;
    let after = HostSample::take(&watch)?;
    let send1 = tree(watch.client_pid);
    let tx1 = lab.tx_packets()?;
    let w = Window::between(&before, &after);
    let sent = if cell.subject == Subject::Trafgen {
        // trafgen has no time limit: it sends until told to stop.
        Some(run.sender.stop("INT", Duration::from_secs(5)))
    } else {
        let by = t0 + Duration::from_secs(total_s + 10);
        run.sender.wait_until(by, Some(lab.stop))?
    };
    let profile = rec.map(|r| r.finish(8));
    // The receiver prints its summary on SIGINT (firehose sink, udp_sink's partial round
    // is lost: it reports finished rounds only).
    run.receiver.stop("INT", Duration::from_secs(5));
    let sender_ok = match sent {
        Some(s) => s.success() || cell.subject == Subject::Trafgen,
        None => false,
    };
    if !sender_ok {
        let why = format!("the sender failed: {}", run.sender.stderr_tail());
        return Ok((Err(why), profile));
    }
    let secs = w.seconds.max(1e-9);
    // (pps, the receiver's own drops, the kernel's drops; InErrors holds RcvbufErrors).
    let window_drops = w.udp_server.in_errors + w.softnet_dropped();
    let figures = match &cell.subject {
        Subject::Sink(_) => {
            let p = run.sink_json.as_ref().expect("sink cells write JSON");
            let text = std::fs::read_to_string(p).map_err(|e| {
                LabError::Run(format!(
                    "{}: no summary ({e}): {}",
                    p.display(),
                    run.receiver.stderr_tail()
                ))
            })?;
            let doc: SinkDocument = serde_json::from_str(&text)
                .map_err(|e| LabError::Run(format!("{}: not a sink document: {e}", p.display())))?;
            let r = doc.body;
            // The sink's host figures leave out what packet mode's port-holding socket
            // discards by design.
            (
                r.pps,
                r.socket_drops + r.ring_drops,
                r.host.udp_in_errors + r.host.softnet_dropped,
            )
        }
        Subject::UdpSink => match Summary::of(udp_sink_rates(&run.receiver.stdout())) {
            Some(s) => (s.median, 0, window_drops),
            None => {
                let why = format!("udp_sink finished no round: {}", run.receiver.stderr_tail());
                return Ok((Err(why), profile));
            }
        },
        // sockperf sr keeps no count of its own: the datagrams the kernel queued to sockets
        // in the server namespace, which in steady state is what the reader took.
        Subject::Sockperf => (
            w.udp_server.in_datagrams as f64 / secs,
            w.socket_drops,
            window_drops,
        ),
        // Senders: what the client veth transmitted over the window.
        _ => (tx1.saturating_sub(tx0) as f64 / secs, 0, window_drops),
    };
    let (pps, own_drops, kernel_drops) = figures;
    let packets = pps * secs;
    let per = |cpu_s: f64| (packets > 0.0 && cpu_s > 0.0).then(|| cpu_s * 1e6 / packets);
    let m = Measured {
        pps,
        receiver_cpu_us_per_packet: (o.study == Study::Sink)
            .then(|| per(w.server_cpu_s))
            .flatten(),
        sender_cpu_us_per_packet: send0.zip(send1).and_then(|(a, b)| per(b - a)),
        host_cpu_us_per_packet: per(w.host_cpu_s),
        own_drops,
        kernel_drops,
    };
    Ok((Ok(m), profile))
}

/// What a whole study produced, before it is summarised.
pub struct Outcome {
    pub cells: Vec<Cell>,
    pub trials: Vec<Vec<Measured>>,
    pub skipped: Vec<Option<String>>,
    /// Per mode (lab sink): the receiving CPU's top kernel symbols, or why not.
    pub profiles: Vec<(String, Result<Vec<Symbol>, String>)>,
}

/// Why a peer is not run here, `None` when it can be.
pub fn peer_absent(s: &Subject) -> Option<String> {
    let prog = s.program()?;
    if cmd::installed(prog) {
        return None;
    }
    Some(match s {
        Subject::UdpSink => format!("not measured (udp_sink not installed): {UDP_SINK_HINT}"),
        Subject::Trafgen => {
            "not measured (trafgen not installed: apt-get install netsniff-ng)".into()
        }
        _ => format!("not measured ({prog} not installed: apt-get install {prog})"),
    })
}

/// Runs the study on a fresh veth topology `id`, repetitions interleaved.
pub fn run(o: &StudyOptions, id: &str, stop: &AtomicBool) -> LabResult<Outcome> {
    if o.repetitions == 0 || o.modes.is_empty() && o.peers.is_empty() {
        return Err(LabError::Usage(
            "nothing to run: give at least one mode and one repetition".into(),
        ));
    }
    if o.client_cpus.is_empty() {
        return Err(LabError::Usage(
            "the sender needs a CPU apart from the receiver's".into(),
        ));
    }
    std::fs::create_dir_all(&o.workdir).map_err(|e| LabError::io(o.workdir.display(), e))?;
    let max_q = o.queues.iter().copied().max().unwrap_or(1);
    let lab = Lab {
        topo: Topology::veth(id, max_q)?,
        o,
        stop,
    };
    let res = run_on(&lab);
    let mut topo = lab.topo;
    let torn = topo.teardown();
    let out = res?;
    torn?;
    Ok(out)
}

fn run_on(lab: &Lab<'_>) -> LabResult<Outcome> {
    let o = lab.o;
    let sdev = lab.topo.dev(Side::Server);
    match o.study {
        // Each rx queue its own NAPI instance: veth polls per queue only with GRO (or XDP).
        Study::Sink => {
            lab.exec(Side::Server, &["ethtool", "-K", &sdev, "gro", "on"])?;
        }
        // The XDP_DROP receiver never answers ARP: a permanent neighbour entry instead.
        Study::Flood => {
            let m = mac(lab, Side::Server)?
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect::<Vec<_>>()
                .join(":");
            let cdev = lab.topo.dev(Side::Client);
            let addr = VETH_SERVER_ADDR.to_string();
            lab.exec(
                Side::Client,
                &[
                    "ip",
                    "neigh",
                    "replace",
                    &addr,
                    "lladdr",
                    &m,
                    "dev",
                    &cdev,
                    "nud",
                    "permanent",
                ],
            )?;
        }
    }
    let cells = cells(o);
    let mut trials: Vec<Vec<Measured>> = vec![Vec::new(); cells.len()];
    let mut skipped: Vec<Option<String>> = cells.iter().map(|c| peer_absent(&c.subject)).collect();
    let mut port = 7400u16;
    for rep in 0..o.repetitions {
        for (i, cell) in cells.iter().enumerate() {
            proc::check(Some(lab.stop))?;
            if skipped[i].is_some() {
                continue;
            }
            eprintln!(
                "lab {}: repetition {}/{}: {}",
                study_name(o.study),
                rep + 1,
                o.repetitions,
                cell.name()
            );
            port += 1;
            match trial(lab, cell, &format!("r{rep}-c{i}"), port, false)?.0 {
                Ok(m) => trials[i].push(m),
                Err(why) => {
                    eprintln!("  not measured: {why}");
                    skipped[i] = Some(why);
                }
            }
        }
    }
    let mut profiles = Vec::new();
    if o.profile && o.study == Study::Sink {
        let max_q = o.queues.iter().copied().max().unwrap_or(1);
        for (i, cell) in cells.iter().enumerate() {
            if cell.queues != max_q || skipped[i].is_some() {
                continue;
            }
            proc::check(Some(lab.stop))?;
            eprintln!("lab sink: profiling the receiving CPU: {}", cell.name());
            port += 1;
            let (_, prof) = trial(lab, cell, &format!("prof-c{i}"), port, true)?;
            let prof = prof.unwrap_or_else(|| {
                Err("perf is not installed (apt-get install linux-perf)".into())
            });
            profiles.push((cell.name(), prof));
        }
    }
    Ok(Outcome {
        cells,
        trials,
        skipped,
        profiles,
    })
}

pub fn study_name(s: Study) -> &'static str {
    match s {
        Study::Sink => "sink",
        Study::Flood => "flood",
    }
}

#[cfg(test)]
mod tests;
