//! NTP wire format (RFC 5905), shared by the server (`serve --proto ntp`) and the generator
//! (`load --proto ntp`). A leaf: it depends on nothing of firehose.
//!
//! - [`time`]: the 64-bit timestamp and the 32-bit short format, to and from Unix time.
//! - [`packet`]: the 48-byte header, and [`packet::parse`], which walks extension fields
//!   and a MAC the way chrony does (RFC 7822), without allocating.
//! - [`refid`]: reference IDs (IPv4, IPv6 hash, ASCII codes) and Kiss-o'-Death codes.
//! - [`random`]: the cheap random bits NTP asks for (xorshift64).
//! - [`sample`]: the offset and delay of one exchange from its four timestamps, the one
//!   place both the generator and anything that measures an NTP exchange compute them.

pub mod packet;
pub mod random;
pub mod refid;
pub mod sample;
pub mod time;

pub use packet::{
    client_request, parse, Auth, Header, Leap, Packet, ParseError, HEADER_LEN, MAX_LEN,
};
pub use random::XorShift64;
pub use refid::{kod, RefId};
pub use sample::{Exchange, Sample};
pub use time::{Short, Timestamp};
