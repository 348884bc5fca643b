//! The NTT ladder: each step adds one technique to everything above it, first the
//! application's (sockets, steering, pinning, batching, busy polling, IP ID), then the OS
//! knobs the lab can turn inside its own namespaces (RPS, XPS, GRO, rp_filter). A step
//! that hurt is reverted before the next one, as the talk reverted RPS and went on (the
//! run's `--keep-hurt` keeps it in every later step instead).

use crate::server::ServerKind;
use crate::study::Skipped;
use crate::topology::{Kind, Knobs};
use crate::{LabError, LabResult};
use serde::Serialize;

/// One rung.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Step {
    pub name: &'static str,
    pub describe: &'static str,
    /// Turns an OS knob, so it can only be taken inside the veth topology's namespaces.
    pub needs_veth: bool,
}

/// What the NTT talk measured for the same change on its 20-core host with a 10G NIC
/// (100-byte echo), for reading a row against the talk's table. The talk took its steps in
/// another order, so its figures are cumulative over a different path.
pub fn talk_figure(step: &str) -> Option<&'static str> {
    Some(match step {
        "shared" => "270,000 tps (RSS, one socket, 20 threads)",
        "reuseport" => "2,540,000 tps after +SO_REUSEPORT (from 17,000 with RPS on)",
        "steer" => "4,250,000 tps after +SO_ATTACH_REUSEPORT_EBPF",
        "pin" => "5,050,000 tps after pinning threads",
        "pmtu-do" => "6,010,000 tps after skipping IP ID calculation (its last app step)",
        "rps" => "17,000 tps after +affinity_hint+RPS (from 270,000): RPS hurt",
        "xps" => "1,086,000 tps with XPS off vs 5,050,000 on",
        "gro-off" => "5,180,000 tps after disabling GRO (from 5,050,000)",
        "rp-filter-off" => "5,490,000 tps after disabling source validation (from 5,380,000)",
        _ => return None,
    })
}

const fn step(name: &'static str, describe: &'static str, needs_veth: bool) -> Step {
    Step {
        name,
        describe,
        needs_veth,
    }
}

/// The ladder, in order. A step includes every step above it.
pub const STEPS: &[Step] = &[
    step(
        "shared",
        "one shared socket, N threads, recvfrom/sendto",
        false,
    ),
    step("reuseport", "+ SO_REUSEPORT: one socket per worker", false),
    step(
        "steer",
        "+ steering by CPU (SO_ATTACH_REUSEPORT_CBPF)",
        false,
    ),
    step("pin", "+ each worker pinned to one server CPU", false),
    step("batch", "+ recvmmsg/sendmmsg batches of 64", false),
    step("busy-poll", "+ busy polling (SO_BUSY_POLL 50 us)", false),
    step(
        "pmtu-do",
        "+ IP_MTU_DISCOVER = IP_PMTUDISC_DO (DF set: no per-packet IP ID work)",
        false,
    ),
    step(
        "rps",
        "+ RPS: every rx queue of the server veth to the server CPUs",
        true,
    ),
    step(
        "xps",
        "+ XPS: tx queue i used by CPU i, on both veth ends",
        true,
    ),
    step("gro-off", "+ GRO off on both veth ends", true),
    step(
        "rp-filter-off",
        "+ rp_filter off (no source validation)",
        true,
    ),
    step(
        "uring",
        "beyond the talk: io_uring (serve --io uring: the same sockets read by a multishot \
         RECVMSG into provided buffers, replies by batched SEND)",
        false,
    ),
    step(
        "xdp",
        "beyond the talk: AF_XDP (serve --io xdp --profile xdp: an XDP program steers the \
         port to one AF_XDP socket per queue, replies built in place)",
        true,
    ),
];

/// Names of all steps, for messages.
pub fn step_names() -> String {
    STEPS.iter().map(|s| s.name).collect::<Vec<_>>().join(", ")
}

fn position(name: &str) -> Option<usize> {
    STEPS.iter().position(|s| s.name == name)
}

/// The steps to run: `requested` (comma-separated names, ladder order kept) or all; on
/// loopback the OS steps are left out with a reason, unless asked for by name, which is an
/// error. Returns (steps, skipped with reasons).
pub fn select(requested: Option<&str>, topology: Kind) -> LabResult<(Vec<Step>, Vec<Skipped>)> {
    let mut wanted: Vec<usize> = match requested {
        None => (0..STEPS.len()).collect(),
        Some(list) => {
            let mut v = Vec::new();
            for name in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
                let i = position(name).ok_or_else(|| {
                    LabError::Usage(format!(
                        "unknown ladder step '{name}' (valid: {})",
                        step_names()
                    ))
                })?;
                if STEPS[i].needs_veth && topology != Kind::Veth {
                    return Err(LabError::Usage(format!(
                        "step '{name}' turns an OS knob, which the lab does only inside its \
                         namespaces: use --topology veth"
                    )));
                }
                v.push(i);
            }
            if v.is_empty() {
                return Err(LabError::Usage(format!(
                    "--steps names no step (valid: {})",
                    step_names()
                )));
            }
            v
        }
    };
    wanted.sort_unstable();
    wanted.dedup();
    let mut skipped = Vec::new();
    let steps = wanted
        .into_iter()
        .filter(|&i| {
            let s = STEPS[i];
            let ok = !s.needs_veth || topology == Kind::Veth;
            if !ok {
                skipped.push(Skipped {
                    name: s.name.to_string(),
                    reason: "turns an OS knob: only on --topology veth".to_string(),
                });
            }
            ok
        })
        .map(|i| STEPS[i])
        .collect();
    Ok((steps, skipped))
}

/// The step whose technique `step` builds on and cannot run without (steering picks among
/// a reuseport group), if any.
pub fn needs(step: &Step) -> Option<&'static str> {
    (step.name == "steer").then_some("reuseport")
}

/// True when `step` includes the technique of step `name`: it comes at or after it in the
/// ladder, and `name` was not reverted (a step that hurt is left out of the later ones).
/// A technique whose prerequisite was reverted is left out too.
fn includes(step: &Step, name: &str, reverted: &[&str]) -> bool {
    let needed = position(name).and_then(|i| needs(&STEPS[i]));
    position(step.name) >= position(name)
        && !reverted.contains(&name)
        && needed.is_none_or(|n| !reverted.contains(&n))
}

/// The server of a step: `firehose serve` with every application technique up to it but
/// the `reverted` ones.
/// The `xdp` rung serves over AF_XDP on `iface` (the server's veth), a worker per queue.
pub fn server_for(
    step: &Step,
    workers: usize,
    reverted: &[&str],
    iface: Option<&str>,
) -> ServerKind {
    let at = |name: &str| includes(step, name, reverted);
    if let (true, Some(iface)) = (at("xdp"), iface) {
        let flags = [
            "--io",
            "xdp",
            "--iface",
            iface,
            "--profile",
            "xdp",
            "--cpus",
            "none",
        ];
        return ServerKind::Firehose {
            flags: flags.iter().map(|f| f.to_string()).collect(),
        };
    }
    let mut flags: Vec<String> = vec!["--workers".into(), workers.to_string()];
    let mut push = |k: &str, v: &str| {
        flags.push(k.to_string());
        flags.push(v.to_string());
    };
    push(
        "--sockets",
        if at("reuseport") {
            "reuseport"
        } else {
            "shared"
        },
    );
    push("--steer", if at("steer") { "cpu" } else { "none" });
    push("--cpus", if at("pin") { "auto" } else { "none" });
    push("--batch", if at("batch") { "64" } else { "1" });
    push("--busy-poll", if at("busy-poll") { "50" } else { "0" });
    push("--pmtudisc", if at("pmtu-do") { "do" } else { "default" });
    if at("uring") {
        push("--io", "uring");
    }
    ServerKind::Firehose { flags }
}

/// The OS knobs of a step on veth. Every knob is set explicitly, so steps can be run in any
/// order (repetitions are interleaved). The starting point is a NIC's usual defaults: GRO
/// on, no RPS, no XPS, strict rp_filter. A `reverted` step's knob stays at its default.
pub fn knobs_for(step: &Step, reverted: &[&str]) -> Knobs {
    let at = |name: &str| includes(step, name, reverted);
    Knobs {
        gro: Some(!at("gro-off")),
        rps: Some(at("rps")),
        xps: Some(at("xps")),
        rp_filter: Some(if at("rp-filter-off") { 0 } else { 1 }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flags(k: ServerKind) -> String {
        match k {
            ServerKind::Firehose { flags } => flags.join(" "),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn steps_are_cumulative() {
        let s = |n: &str| STEPS[position(n).unwrap()];
        assert_eq!(
            flags(server_for(&s("shared"), 2, &[], None)),
            "--workers 2 --sockets shared --steer none --cpus none --batch 1 --busy-poll 0 --pmtudisc default"
        );
        assert_eq!(
            flags(server_for(&s("pin"), 1, &[], None)),
            "--workers 1 --sockets reuseport --steer cpu --cpus auto --batch 1 --busy-poll 0 --pmtudisc default"
        );
        assert_eq!(
            flags(server_for(&s("gro-off"), 1, &[], None)),
            "--workers 1 --sockets reuseport --steer cpu --cpus auto --batch 64 --busy-poll 50 --pmtudisc do"
        );
        let k = knobs_for(&s("shared"), &[]);
        assert_eq!(
            (k.gro, k.rps, k.xps, k.rp_filter),
            (Some(true), Some(false), Some(false), Some(1))
        );
        let k = knobs_for(&s("gro-off"), &[]);
        assert_eq!(
            (k.gro, k.rps, k.xps, k.rp_filter),
            (Some(false), Some(true), Some(true), Some(1))
        );
    }

    #[test]
    fn the_xdp_rung_serves_over_af_xdp_on_the_server_veth() {
        let s = |n: &str| *STEPS.iter().find(|x| x.name == n).unwrap();
        assert_eq!(
            flags(server_for(&s("xdp"), 1, &[], Some("fhv0-7"))),
            "--io xdp --iface fhv0-7 --profile xdp --cpus none"
        );
        assert!(s("xdp").needs_veth);
    }

    #[test]
    fn the_uring_rung_is_every_app_step_over_io_uring() {
        let s = |n: &str| STEPS[position(n).unwrap()];
        assert_eq!(
            flags(server_for(&s("uring"), 2, &[], None)),
            "--workers 2 --sockets reuseport --steer cpu --cpus auto --batch 64 --busy-poll 50 \
             --pmtudisc do --io uring"
        );
        assert!(!s("uring").needs_veth);
        assert!(!flags(server_for(&s("rp-filter-off"), 1, &[], None)).contains("uring"));
        // A busy poll that hurt is left out of the uring rung too.
        assert!(flags(server_for(&s("uring"), 1, &["busy-poll"], None))
            .contains("--busy-poll 0 --pmtudisc do --io uring"));
    }

    #[test]
    fn a_reverted_step_is_left_out_of_later_steps() {
        let s = |n: &str| STEPS[position(n).unwrap()];
        assert_eq!(
            flags(server_for(&s("pin"), 1, &["steer"], None)),
            "--workers 1 --sockets reuseport --steer none --cpus auto --batch 1 --busy-poll 0 --pmtudisc default"
        );
        assert!(flags(server_for(&s("pin"), 1, &["reuseport"], None))
            .contains("--sockets shared --steer none --cpus auto"));
        let k = knobs_for(&s("gro-off"), &["rps"]);
        assert_eq!(
            (k.gro, k.rps, k.xps, k.rp_filter),
            (Some(false), Some(false), Some(true), Some(1))
        );
    }

    #[test]
    fn the_talk_has_a_figure_for_its_own_steps_only() {
        assert!(talk_figure("reuseport").unwrap().contains("2,540,000"));
        assert!(talk_figure("batch").is_none(), "the talk did not batch");
        assert!(talk_figure("busy-poll").is_none());
    }

    #[test]
    fn selection() {
        let (all, skipped) = select(None, Kind::Loopback).unwrap();
        assert_eq!(all.len(), 8, "the app steps and uring");
        assert_eq!(
            skipped.len(),
            5,
            "rps, xps, gro-off, rp-filter-off and xdp need veth"
        );
        let (all, skipped) = select(None, Kind::Veth).unwrap();
        assert_eq!((all.len(), skipped.len()), (STEPS.len(), 0));
        let (two, _) = select(Some("batch,shared"), Kind::Loopback).unwrap();
        assert_eq!(
            two.iter().map(|s| s.name).collect::<Vec<_>>(),
            ["shared", "batch"]
        );
        let e = select(Some("shared,turbo"), Kind::Veth)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("unknown ladder step 'turbo'") && e.contains("pmtu-do"),
            "{e}"
        );
        let e = select(Some("rps"), Kind::Loopback).unwrap_err().to_string();
        assert!(e.contains("--topology veth"), "{e}");
        assert!(select(Some(","), Kind::Veth).is_err());
    }
}
