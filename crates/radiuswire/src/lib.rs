//! RADIUS wire format shared by the server (`firehose-proto`) and the load generator
//! (`firehose-load`): packets and attributes, the MD5-based authenticators, User-Password
//! hiding, CHAP and Message-Authenticator, the standard attribute dictionary, and
//! FreeRADIUS's own file formats (`clients.conf`, the `files` module's users file) so
//! both servers can be pointed at the same files.
//!
//! A leaf crate: it depends on nothing of firehose.

pub mod clients;
pub mod crypto;
pub mod dict;
mod lex;
pub mod packet;
pub mod users;

pub use clients::{Client, ClientsFile, Prefix};
pub use crypto::{chap_response, ct_eq, Secret, MAX_PASSWORD};
pub use packet::{
    attr, attrs, code, code_name, parse_request, put_attr, put_header, Attr, Header, Malformed,
    Request, Span, AUTH_LEN, HEADER, MAX_PACKET,
};
pub use users::UsersFile;

/// Files larger than this are refused: a clients or users file is text an operator
/// writes, and this bounds what a mistaken path (a device, a log) can cost.
pub const MAX_FILE: u64 = 64 << 20;

/// Reads a regular file of at most [`MAX_FILE`] bytes as UTF-8 text.
fn read_text(path: &std::path::Path) -> Result<String, String> {
    let p = path.display();
    let meta = std::fs::metadata(path).map_err(|e| format!("cannot read {p}: {e}"))?;
    if !meta.is_file() {
        return Err(format!("{p} is not a regular file"));
    }
    if meta.len() > MAX_FILE {
        return Err(format!("{p} is larger than {} MiB", MAX_FILE >> 20));
    }
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read {p}: {e}"))?;
    String::from_utf8(bytes).map_err(|_| format!("{p} is not UTF-8 text"))
}
