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
}
