//! A frame as tables of strings: the one formatting that the screen draws and `--once`
//! prints.

use crate::args::thousands;
use firehose_observe::top::Frame;

/// One table.
pub struct Section {
    pub title: String,
    pub header: Vec<&'static str>,
    pub rows: Vec<Vec<String>>,
}

fn rate(v: f64) -> String {
    thousands(v.round())
}

fn pct(v: f64) -> String {
    format!("{v:.1}")
}

/// The frame's tables, in screen order.
pub fn sections(f: &Frame) -> Vec<Section> {
    let mut out = vec![Section {
        title: "CPU (%, softirqs/s)".into(),
        header: vec![
            "cpu", "usr", "sys", "soft", "irq", "idle", "NET_RX/s", "NET_TX/s",
        ],
        rows: f
            .cpus
            .iter()
            .map(|c| {
                vec![
                    c.cpu.to_string(),
                    pct(c.usr),
                    pct(c.sys),
                    pct(c.softirq),
                    pct(c.irq),
                    pct(c.idle),
                    rate(c.net_rx_per_s),
                    rate(c.net_tx_per_s),
                ]
            })
            .collect(),
    }];
    out.push(Section {
        title: "Interfaces (packets/s)".into(),
        header: vec!["iface", "rx", "tx", "rx drop", "tx drop", "queues"],
        rows: f
            .ifaces
            .iter()
            .map(|i| {
                let q: Vec<String> = i
                    .queues
                    .iter()
                    .map(|q| format!("{}{} {}", q.dir, q.queue, rate(q.pps)))
                    .collect();
                vec![
                    i.iface.clone(),
                    rate(i.rx_pps),
                    rate(i.tx_pps),
                    rate(i.rx_dropped_per_s),
                    rate(i.tx_dropped_per_s),
                    q.join("  "),
                ]
            })
            .collect(),
    });
    let u = &f.udp;
    out.push(Section {
        title: "UDP (datagrams/s)".into(),
        header: vec![
            "in",
            "out",
            "InErrors",
            "RcvbufErrors",
            "NoPorts",
            "SndbufErrors",
        ],
        rows: vec![vec![
            rate(u.in_per_s),
            rate(u.out_per_s),
            rate(u.in_errors_per_s),
            rate(u.rcvbuf_errors_per_s),
            rate(u.no_ports_per_s),
            rate(u.sndbuf_errors_per_s),
        ]],
    });
    out.push(Section {
        title: "Sockets (busiest)".into(),
        header: vec!["local", "rx queue B", "drops/s", "drops", "process"],
        rows: f
            .sockets
            .iter()
            .map(|s| {
                vec![
                    s.local.clone(),
                    thousands(s.rx_queue_bytes as f64),
                    rate(s.drops_per_s),
                    thousands(s.drops_total as f64),
                    s.process
                        .as_ref()
                        .map_or_else(|| format!("socket:[{}]", s.inode), |o| o.to_string()),
                ]
            })
            .collect(),
    });
    out.push(Section {
        title: "Drops (this namespace)".into(),
        header: vec!["drops/s", "reason", "location", "port", "process"],
        rows: f
            .drops
            .iter()
            .map(|d| {
                vec![
                    rate(d.per_s),
                    d.row.reason.clone(),
                    d.row.location.clone(),
                    d.row.port.map_or("-".into(), |p| p.to_string()),
                    d.row.process.as_ref().map_or("-".into(), |o| o.to_string()),
                ]
            })
            .collect(),
    });
    if !f.servers.is_empty() {
        out.push(Section {
            title: "firehose servers (--metrics)".into(),
            header: vec![
                "pid",
                "metrics",
                "rx/s",
                "tx/s",
                "kernel drops/s",
                "errors/s",
            ],
            rows: f
                .servers
                .iter()
                .map(|s| {
                    let o = |v: Option<f64>| v.map_or("-".into(), rate);
                    vec![
                        s.pid.to_string(),
                        match &s.error {
                            Some(e) => format!("{} ({e})", s.metrics),
                            None => s.metrics.clone(),
                        },
                        o(s.rx_pps),
                        o(s.tx_pps),
                        o(s.kernel_drops_per_s),
                        o(s.errors_per_s),
                    ]
                })
                .collect(),
        });
    }
    out
}

/// The frame as aligned text lines.
pub fn lines(f: &Frame) -> Vec<String> {
    let mut out = vec![format!("firehose top: {:.2} s", f.seconds)];
    for s in sections(f) {
        out.push(String::new());
        out.push(s.title.clone());
        let mut width: Vec<usize> = s.header.iter().map(|h| h.len()).collect();
        for r in &s.rows {
            for (i, c) in r.iter().enumerate() {
                width[i] = width[i].max(c.len());
            }
        }
        let fmt = |cells: Vec<String>| {
            let last = cells.len() - 1;
            cells
                .into_iter()
                .enumerate()
                .map(|(i, c)| {
                    if i == last {
                        c
                    } else {
                        format!("{c:<w$}", w = width[i])
                    }
                })
                .collect::<Vec<_>>()
                .join("  ")
                .trim_end()
                .to_string()
        };
        out.push(format!(
            "  {}",
            fmt(s.header.iter().map(|h| h.to_string()).collect())
        ));
        if s.rows.is_empty() {
            out.push("  (none)".into());
        }
        for r in s.rows {
            out.push(format!("  {}", fmt(r)));
        }
    }
    for n in &f.notes {
        out.push(format!("note: {n}"));
    }
    out
}
