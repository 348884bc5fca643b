//! firehose's own programs as the lab starts them: `serve` (ready once it prints where it
//! listens), `load` (its report read back through its writer's type), `serve --json-file`'s
//! stats, and the hidden helpers (`lab plain-echo`, `lab xdp-drop`, `lab answers`).

use crate::proc::Proc;
use crate::study::Lab;
use crate::topology::Side;
use crate::{LabError, LabResult};
use firehose_engine::StatsDocument;
use firehose_load::document::LoadDocument;
use firehose_load::LoadReport;
use serde::Deserialize;
use serde_json::Value;
use std::path::Path;
use std::time::{Duration, Instant};

/// The first line `firehose serve` prints once every worker runs.
pub const SERVE_READY: &str = "firehose serve: listening on ";

/// A started `firehose serve`.
pub struct Serving {
    pub proc: Proc,
    /// Where it listens, as it printed it (the port it got for port 0).
    pub listen: String,
}

/// Starts `firehose serve ARGS` on `side`, confined to `cpus`, and waits (15 s at most)
/// for its first line.
pub fn serve(
    lab: &Lab<'_>,
    side: Side,
    cpus: &[usize],
    args: &[String],
    tag: &str,
) -> LabResult<Serving> {
    let mut argv = lab.firehose(&["serve"]);
    argv.extend_from_slice(args);
    let mut proc = lab.spawn(side, cpus, &argv, tag)?;
    let by = Instant::now() + Duration::from_secs(15);
    let out = proc.wait_for_output(SERVE_READY, by, Some(lab.stop))?;
    let listen = out
        .lines()
        .find_map(|l| l.strip_prefix(SERVE_READY))
        .unwrap_or_default()
        .trim()
        .to_string();
    Ok(Serving { proc, listen })
}

/// `firehose load --target TARGET ARGS --quiet --json-file JSON`, with `--server-pid` so
/// that it measures the server's CPU too.
pub fn load(
    lab: &Lab<'_>,
    target: &str,
    args: &[String],
    json: &Path,
    server_pid: Option<u32>,
) -> Vec<String> {
    let mut v = lab.firehose(&["load", "--target", target]);
    v.extend_from_slice(args);
    v.extend(["--quiet".into(), "--json-file".into()]);
    v.push(json.display().to_string());
    if let Some(p) = server_pid {
        v.extend(["--server-pid".into(), p.to_string()]);
    }
    v
}

fn read_text(path: &Path) -> LabResult<String> {
    std::fs::read_to_string(path).map_err(|e| LabError::io(path.display(), e))
}

/// Reads what `firehose load --json-file` wrote, through load's own document type (the
/// envelope, the report, its settings and environment: a missing field is an error, never
/// 0): the report, and the whole document.
pub fn read_load(path: &Path) -> LabResult<(LoadReport, Value)> {
    let bad = |e: serde_json::Error| {
        LabError::Run(format!(
            "{}: not a firehose load document: {e}",
            path.display()
        ))
    };
    let v: Value = serde_json::from_str(&read_text(path)?).map_err(bad)?;
    let doc = LoadDocument::deserialize(&v).map_err(bad)?;
    Ok((doc.body.report, v))
}

/// Reads what `firehose serve --json-file` wrote.
pub fn read_stats(path: &Path) -> LabResult<StatsDocument> {
    StatsDocument::parse(&read_text(path)?).map_err(|e| {
        LabError::Run(format!(
            "{}: not a firehose serve stats document: {e}",
            path.display()
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use firehose_load::document::{LoadRun, LoadSettings};

    #[test]
    fn reports_read_back_through_the_writers_types() {
        let dir = crate::workdir::WorkDir::new("test").unwrap();
        let p = dir.join("load.json");
        std::fs::write(&p, "{\"tps\": 1}").unwrap();
        let e = read_load(&p).unwrap_err().to_string();
        assert!(e.contains("not a firehose load document"), "{e}");
        std::fs::write(&p, "not json").unwrap();
        assert!(read_stats(&p).is_err());
    }

    #[test]
    fn what_load_writes_reads_back() {
        // A document as `firehose load --json` writes it: the envelope, LoadReport's keys,
        // its config and environment.
        let mut r =
            firehose_load::summarize(&[], None, None, Vec::new(), 0.0, |c| c.to_string()).unwrap();
        r.tps = 94376.4;
        r.lost = 2;
        let config = LoadSettings {
            target: "10.0.0.2:53".into(),
            proto: "dns".into(),
            mode: "closed".into(),
            flows: 8,
            window: 100,
            rate: None,
            threads: 1,
            cpus: None,
            size: None,
            queries: Some("queries.txt".into()),
            timeout_s: 1.0,
            warmup_s: 0.0,
            batch: 32,
            per_wake: None,
            wake_period_us: None,
            spin: false,
            gso: true,
            stamps: false,
            arrivals: None,
            io: "socket".into(),
            xdp: None,
        };
        let run = LoadRun {
            report: r,
            config,
            loss_attribution: None,
            environment: Default::default(),
        };
        let build = firehose_host::document::Build {
            version: "0.1.0".into(),
            commit: "abc".into(),
            rustc: "rustc".into(),
            target: "x86_64-unknown-linux-gnu".into(),
        };
        let mut doc = serde_json::to_value(LoadDocument::new(build, run)).unwrap();
        let dir = crate::workdir::WorkDir::new("test").unwrap();
        let path = dir.join("load.json");
        std::fs::write(&path, serde_json::to_string_pretty(&doc).unwrap()).unwrap();
        let (back, v) = read_load(&path).unwrap();
        assert_eq!((back.tps, back.lost), (94376.4, 2));
        assert_eq!(v["config"]["window"], 100);
        // A field gone (the report's, the settings', the envelope's) is an error, not a zero.
        for key in ["lost", "config", "schema_version", "environment"] {
            let mut d = doc.clone();
            d.as_object_mut().unwrap().remove(key);
            std::fs::write(&path, serde_json::to_string(&d).unwrap()).unwrap();
            let e = read_load(&path).unwrap_err().to_string();
            assert!(e.contains(key), "{key}: {e}");
        }
        doc["config"].as_object_mut().unwrap().remove("window");
        std::fs::write(&path, serde_json::to_string(&doc).unwrap()).unwrap();
        assert!(read_load(&path).is_err());
    }
}
