//! The protocol a server answers and a generator speaks (`serve --proto`, `load --proto`,
//! `lab compare --proto`): one type, one spelling on every command line and in the JSON.

use clap::ValueEnum;

/// The protocol spoken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Proto {
    /// Every datagram sent back byte for byte (load: fixed-size requests carrying an id and
    /// timestamp; the answer must be identical).
    Echo,
    /// DNS: authoritative answers from --zone files (load: queries from --queries; an
    /// answer must echo the question).
    Dns,
    /// RADIUS Access- and Accounting-Requests for --radius-users (serve: with
    /// --radius-clients, FreeRADIUS's formats; load: PAP or CHAP, every response's
    /// authenticators and verdict checked).
    Radius,
    /// NTP client requests (serve: modes 3 and 1 answered from the system clock, as
    /// chronyd does, control and private modes never; load: random transmit timestamps,
    /// every response checked and its offset, delay and hold time measured).
    Ntp,
}

impl Proto {
    /// The name in reports and JSON (the flag's spelling).
    pub fn name(self) -> &'static str {
        match self {
            Proto::Echo => "echo",
            Proto::Dns => "dns",
            Proto::Radius => "radius",
            Proto::Ntp => "ntp",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_the_flags_spelling() {
        for p in Proto::value_variants() {
            assert_eq!(p.to_possible_value().unwrap().get_name(), p.name());
        }
    }
}
