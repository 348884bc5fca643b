//! DNS wire format shared by the responder (`firehose-proto`) and the load generator
//! (`firehose-load`): names, the header, the question, type/class/rcode tables, a query
//! builder, and the allocation-free query parser of the responder's hot path.
//!
//! A leaf crate: it depends on nothing of firehose, so a client links no server engine.

pub mod message;
pub mod name;
pub mod query;
pub mod types;

pub use message::{
    get16, parse_query, put16, question_end, read_name, DropReason, Edns, FormErr, Header, NameBuf,
    Parsed, Query, HEADER, MAX_LABELS, MAX_NAME,
};
pub use name::{label_offsets, name_from_text, name_to_text, NameError, MAX_LABEL};
pub use query::QueryBuilder;
pub use types::{
    class_from_name, class_name, rcode, rcode_name, rtype, type_from_name, type_name, CLASS_IN,
};
