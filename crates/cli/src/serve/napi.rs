//! The per-NAPI busy-polling settings of a busy-polling server (firehose_host::napi): set on
//! start, printed as the kernel reads them back, restored when `serve` ends (its normal end,
//! Ctrl-C, SIGTERM, or a failure that returns), each restore printed.

use firehose_host::doctor::apply::{Outcome, StepResult};
use firehose_host::napi::{self, NapiGuard, NapiReport};
use firehose_sys::netdev::NapiParam;
use std::net::SocketAddr;

/// Restores the settings when dropped, saying what it did.
pub(super) struct Restore(Option<NapiGuard>);

impl Drop for Restore {
    fn drop(&mut self) {
        if let Some(g) = self.0.take() {
            for o in g.restore() {
                say!("  napi restore: {}", outcome(&o));
            }
        }
    }
}

fn outcome(o: &Outcome) -> String {
    let (word, note) = match &o.result {
        StepResult::Done(n) => ("done", n),
        StepResult::Skipped(n) => ("skipped", n),
        StepResult::Failed(n) => ("FAILED", n),
    };
    format!("{} -> {}: {word} ({note})", o.target, o.new.trim())
}

/// Sets the latency values on the NAPIs of the interface holding `listen`'s address and
/// prints what the kernel holds afterwards.
pub(super) fn start(listen: SocketAddr) -> Restore {
    let path = napi::journal_path(std::process::id());
    let (r, guard) = napi::apply_for(listen.ip(), &napi::LATENCY, &path);
    print(&r);
    Restore(guard)
}

fn print(r: &NapiReport) {
    let iface = r.iface.as_deref().unwrap_or("-");
    let gro = match r.gro {
        Some(true) => ", GRO on",
        Some(false) => ", GRO off",
        None => "",
    };
    say!(
        "  napi: {iface} ({}{gro}): {} NAPI instance(s)",
        r.kind.as_deref().unwrap_or("device"),
        r.napis.len()
    );
    for n in &r.napis {
        let v: Vec<String> = NapiParam::ALL
            .iter()
            .map(|&p| {
                format!(
                    "{}={}",
                    p.name(),
                    p.of(n).map_or("unreported".into(), |v| v.to_string())
                )
            })
            .collect();
        say!(
            "  napi {} (irq {}): {}",
            n.id,
            n.irq.map_or("-".into(), |i| i.to_string()),
            v.join(" ")
        );
    }
    for o in r.outcomes.iter().filter(|o| o.failed()) {
        say!("  napi-set: {}", outcome(o));
    }
    if let Some(j) = &r.journal {
        say!(
            "  napi: old values journaled in {}; restored when serve ends (after a kill -9: firehose doctor --revert --journal {})",
            j.display(),
            j.display()
        );
    }
    if let Some(n) = &r.note {
        say!("  napi: {n}");
    }
}
