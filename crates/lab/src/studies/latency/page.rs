//! The latency study's page: the table of rows, the p99 chart, the ratios and the goals.

use super::{goals, max_line, ratios, Goal, LatencyCurve, Row, Who};
use crate::report::charts::Chart;
use crate::report::page::{Align, Block, Column, List, Page, Table, TextList, TextTable};
use crate::report::thousands;
use crate::stats::Summary;
use crate::study::Ran;

fn fmt(s: &Option<Summary>) -> String {
    match s {
        Some(s) => format!(
            "{} ({}-{})",
            crate::report::num(s.median),
            crate::report::num(s.min),
            crate::report::num(s.max)
        ),
        None => "-".into(),
    }
}

/// A rate per second: its median, whole.
fn per_s(s: &Option<Summary>) -> String {
    s.map_or("-".into(), |s| thousands(s.median))
}

pub(super) fn page(s: &LatencyCurve, ran: &Ran<super::Cell, super::Trial>, rows: &[Row]) -> Page {
    let right = |h: &str| Column {
        header: h.into(),
        width: None,
        align: Align::Right,
    };
    let table = Table {
        title: Some(format!("Latency against load ({})", s.topology.name())),
        columns: vec![
            Column::auto("profile"),
            Column::auto("side"),
            right("% max"),
            right("rate"),
            right("tps"),
            right("latency p50 us"),
            right("latency p99 us"),
            right("latency p99.9 us"),
            right("rtt p50 us"),
            right("rtt p99 us"),
            right("rtt p99.9 us"),
            right("send_lag p99 us"),
            right("recv_lag p99 us"),
            right("lost"),
            right("server sleeps/s"),
            right("preempted/s"),
            right("run delay us/s"),
            Column::auto("sampled / why none"),
        ],
        rows: rows
            .iter()
            .map(|r| {
                vec![
                    r.profile.clone(),
                    format!("{:?}", r.who).to_lowercase(),
                    if r.unloaded {
                        "unloaded".into()
                    } else {
                        format!("{}%", r.percent)
                    },
                    if r.unloaded {
                        "1 outstanding".into()
                    } else {
                        thousands(r.rate)
                    },
                    r.tps.map_or("-".into(), |t| thousands(t.median)),
                    fmt(&r.latency_p50_us),
                    fmt(&r.latency_p99_us),
                    fmt(&r.latency_p999_us),
                    fmt(&r.rtt_p50_us),
                    fmt(&r.rtt_p99_us),
                    fmt(&r.rtt_p999_us),
                    fmt(&r.send_lag_p99_us),
                    fmt(&r.recv_lag_p99_us),
                    r.lost.to_string(),
                    per_s(&r.server_sleeps_per_s),
                    per_s(&r.server_preempted_per_s),
                    per_s(&r.server_run_delay_us_per_s),
                    match (&r.reason, r.client_bound) {
                        (Some(why), _) => why.clone(),
                        (None, true) => format!("{}; client-bound", r.sampling),
                        (None, false) => r.sampling.clone(),
                    },
                ]
            })
            .collect(),
        dim: rows
            .iter()
            .enumerate()
            .filter(|(_, r)| r.reason.is_some())
            .map(|(i, _)| i)
            .collect(),
        text: TextTable::Padded {
            gap: 1,
            blank_before: true,
        },
    };
    let mut series = Vec::new();
    for p in &s.profiles {
        for (who, name) in [(Who::Firehose, "firehose"), (Who::Sockperf, "sockperf")] {
            for (what, f) in [
                (
                    "latency p99",
                    (|r: &Row| r.latency_p99_us) as fn(&Row) -> Option<Summary>,
                ),
                ("rtt p99", |r: &Row| r.rtt_p99_us),
            ] {
                let pts: Vec<(f64, f64)> = rows
                    .iter()
                    .filter(|r| &r.profile == p && r.who == who && !r.unloaded)
                    .filter_map(|r| Some((f64::from(r.percent), f(r)?.median)))
                    .filter(|(_, v)| *v > 0.0)
                    .collect();
                if !pts.is_empty() {
                    series.push((format!("{p} {name} {what}"), pts));
                }
            }
        }
    }
    let ratio_lines: Vec<String> = ratios(rows)
        .iter()
        .map(|r| {
            let f = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.2}x"));
            format!(
                "{} at {}% of max: firehose / sockperf latency p50 {}, p99 {} (goal <= 0.8x)",
                r.profile,
                r.percent,
                f(r.p50),
                f(r.p99)
            )
        })
        .collect();
    let mut maxima = Vec::new();
    for (p, m) in &s.max_tps {
        match m {
            Ok(m) => maxima.push(max_line(p, m)),
            Err(why) => maxima.push(format!("{p}: no max: {why}")),
        }
        if let Some(u) = rows.iter().find(|r| &r.profile == p && r.unloaded) {
            let us = |v: &Option<Summary>| v.map_or("-".into(), |v| format!("{:.2}", v.median));
            maxima.push(format!(
                "{p}: unloaded (1 flow, window 1): rtt p50 {} us, p99 {} us; latency p50 {} us",
                us(&u.rtt_p50_us),
                us(&u.rtt_p99_us),
                us(&u.latency_p50_us)
            ));
        }
    }
    let mut blocks = vec![
        Block::Table(table),
        Block::List(List {
            title: "Each profile's max tps and unloaded point".into(),
            items: maxima,
            text: TextList::Lines {
                heading: Some(
                    "max tps (the percents are of the open-loop one) and unloaded point:".into(),
                ),
                prefix: "  ".into(),
                blank_before: true,
            },
        }),
        Block::Charts(vec![Chart::Curves {
            title: "p99 against load".into(),
            x_axis: "% of the profile's max tps".into(),
            series,
        }]),
    ];
    if !ratio_lines.is_empty() {
        blocks.push(Block::List(List {
            title: "firehose against sockperf, like for like".into(),
            items: ratio_lines,
            text: TextList::Lines {
                heading: Some("ratios:".into()),
                prefix: "  ".into(),
                blank_before: true,
            },
        }));
    }
    blocks.push(Block::List(List {
        title: "Issue 25's curve goals".into(),
        items: goals(&s.profiles, &s.max_tps, rows).iter().map(Goal::line).collect(),
        text: TextList::Lines {
            heading: Some(
                "goals (client-bound: the client did not keep the rate, tps < 95% of it or send_lag p50 > 100 us):"
                    .into(),
            ),
            prefix: "  ".into(),
            blank_before: true,
        },
    }));
    Page {
        title: "firehose lab latency".into(),
        preamble: vec![
            format!(
                "firehose lab latency: {} x {:.0} s per cell, interleaved; profiles {}",
                ran.repetitions,
                s.duration.as_secs_f64(),
                s.profiles.join(", ")
            ),
            ran.host_line(),
        ],
        blocks,
    }
}
