//! The envelope of every JSON document a subcommand writes: `schema_version` and the build
//! (`firehose`) beside the document's own fields, so a result can be traced and read back by
//! type ([`Document`]). Each document's body is a type owned by the library that produces it
//! and carries its own `environment` ([`crate::env::Environment`]); docs/json.md lists them.

use serde::{Deserialize, Serialize};

/// Raised when a field of any document changes meaning or goes away (docs/json.md).
pub const SCHEMA_VERSION: u32 = 1;

/// The build that wrote a document.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Build {
    pub version: String,
    /// The commit (`-dirty` when the tree differed), or "unknown".
    pub commit: String,
    pub rustc: String,
    pub target: String,
}

/// A document: the envelope fields, then the body's own, at one level.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Document<T> {
    pub schema_version: u32,
    pub firehose: Build,
    #[serde(flatten)]
    pub body: T,
}

impl<T> Document<T> {
    /// `body` as written by `build`, at this schema version.
    pub fn new(build: Build, body: T) -> Document<T> {
        Document {
            schema_version: SCHEMA_VERSION,
            firehose: build,
            body,
        }
    }
}

/// For an `Option` field that must be present (null allowed): serde reads a missing
/// `Option` as `None` unless the field has its own deserializer.
pub fn required<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(d)
}

/// The rates a packet counter reports over its measured time (`sink`, `flood`), the same
/// fields and the same arithmetic in both documents.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PacketRates {
    /// The measured time (sink: from one tick before the first datagram was seen to the tick
    /// the last was seen; flood: from the start to the last send).
    pub seconds: f64,
    pub pps: f64,
    /// Megabits per second of `bytes` (sink: payload; flood: frames on the wire).
    pub mbit_s: f64,
    /// Null when no packet was counted.
    #[serde(deserialize_with = "required")]
    pub cpu_us_per_packet: Option<f64>,
    #[serde(deserialize_with = "required")]
    pub syscalls_per_packet: Option<f64>,
}

impl PacketRates {
    /// `packets` of `bytes` in all over `seconds`, costing `cpu_s` of CPU and `syscalls`.
    pub fn new(packets: u64, bytes: u64, seconds: f64, cpu_s: f64, syscalls: u64) -> Self {
        let per = |v: f64| (packets > 0).then(|| v / packets as f64);
        PacketRates {
            seconds,
            pps: packets as f64 / seconds.max(1e-9),
            mbit_s: bytes as f64 * 8.0 / seconds.max(1e-9) / 1e6,
            cpu_us_per_packet: per(cpu_s * 1e6),
            syscalls_per_packet: per(syscalls as f64),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Body {
        pps: f64,
        drops: u64,
        #[serde(deserialize_with = "required")]
        note: Option<String>,
    }

    fn build() -> Build {
        Build {
            version: "0.1.0".into(),
            commit: "abc".into(),
            rustc: "rustc 1.87".into(),
            target: "x86_64-unknown-linux-gnu".into(),
        }
    }

    #[test]
    fn the_envelope_sits_beside_the_body_and_reads_back() {
        let d = Document::new(
            build(),
            Body {
                pps: 1.5,
                drops: 3,
                note: None,
            },
        );
        let v = serde_json::to_value(&d).unwrap();
        assert_eq!(v["schema_version"], SCHEMA_VERSION);
        assert_eq!(v["firehose"]["commit"], "abc");
        assert_eq!(v["drops"], 3);
        assert!(v["note"].is_null());
        let back: Document<Body> = serde_json::from_value(v).unwrap();
        assert_eq!(back, d);
    }

    #[test]
    fn a_missing_field_is_an_error_never_zero() {
        let mut v = serde_json::to_value(Document::new(
            build(),
            Body {
                pps: 1.0,
                drops: 0,
                note: Some("x".into()),
            },
        ))
        .unwrap();
        for key in ["drops", "note", "schema_version", "firehose"] {
            let mut w = v.clone();
            w.as_object_mut().unwrap().remove(key);
            let e = serde_json::from_value::<Document<Body>>(w).unwrap_err();
            assert!(e.to_string().contains(key), "{key}: {e}");
        }
        v["drops"] = "many".into();
        assert!(serde_json::from_value::<Document<Body>>(v).is_err());
    }

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Counted {
        packets: u64,
        #[serde(flatten)]
        rates: PacketRates,
    }

    #[test]
    fn packet_rates_sit_at_the_documents_level_and_none_may_be_missing() {
        let r = PacketRates::new(1000, 64_000, 0.5, 0.002, 10);
        assert_eq!((r.pps, r.mbit_s), (2000.0, 1.024));
        assert_eq!(r.cpu_us_per_packet, Some(2.0));
        assert_eq!(r.syscalls_per_packet, Some(0.01));
        let none = PacketRates::new(0, 0, 1.0, 0.1, 3);
        assert_eq!(
            (none.cpu_us_per_packet, none.syscalls_per_packet),
            (None, None)
        );
        let v = serde_json::to_value(Counted {
            packets: 1000,
            rates: r,
        })
        .unwrap();
        assert_eq!(v["pps"], 2000.0, "{v}");
        for key in [
            "seconds",
            "pps",
            "mbit_s",
            "cpu_us_per_packet",
            "syscalls_per_packet",
        ] {
            let mut w = v.clone();
            w.as_object_mut().unwrap().remove(key);
            let e = serde_json::from_value::<Counted>(w).unwrap_err();
            assert!(e.to_string().contains(key), "{key}: {e}");
        }
        assert_eq!(serde_json::from_value::<Counted>(v).unwrap().rates, r);
    }
}
