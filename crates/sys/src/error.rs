//! The one error type of setting up a run, shared by serve, load, sink and flood: a
//! [`Usage`] error (a setting that cannot work here, said in words that name no command-line
//! flag) or a kernel refusal ([`SysError`]: the call and its errno). The cli turns each
//! [`Setting`] into its flag when it prints ([`Usage::render`]).

use std::fmt;
use std::io;

/// An error from a named system call, carrying the OS errno.
#[derive(Debug)]
pub struct SysError {
    /// The call or option that failed, e.g. `setsockopt(SO_REUSEPORT)`.
    pub what: String,
    /// The underlying OS error.
    pub source: io::Error,
}

impl std::fmt::Display for SysError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let errno = self.source.raw_os_error().map(errno_name).unwrap_or("?");
        write!(f, "{}: {} ({})", self.what, self.source, errno)
    }
}

impl std::error::Error for SysError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}

impl SysError {
    /// The errno of the failed call, if the OS gave one.
    pub fn errno(&self) -> Option<i32> {
        self.source.raw_os_error()
    }
}

/// Result of a named system call.
pub type SysResult<T> = Result<T, SysError>;

/// The symbolic name of an errno, for messages users can search for.
pub fn errno_name(errno: i32) -> &'static str {
    match errno {
        libc::EPERM => "EPERM",
        libc::ENOENT => "ENOENT",
        libc::EINTR => "EINTR",
        libc::EIO => "EIO",
        libc::EBADF => "EBADF",
        libc::EMFILE => "EMFILE",
        libc::ENFILE => "ENFILE",
        libc::EAGAIN => "EAGAIN",
        libc::ENOMEM => "ENOMEM",
        libc::EACCES => "EACCES",
        libc::EFAULT => "EFAULT",
        libc::EBUSY => "EBUSY",
        libc::EINVAL => "EINVAL",
        libc::ENOSPC => "ENOSPC",
        libc::ENOSYS => "ENOSYS",
        libc::ENOPROTOOPT => "ENOPROTOOPT",
        libc::EOPNOTSUPP => "EOPNOTSUPP",
        libc::EAFNOSUPPORT => "EAFNOSUPPORT",
        libc::EADDRINUSE => "EADDRINUSE",
        libc::EADDRNOTAVAIL => "EADDRNOTAVAIL",
        libc::ENETUNREACH => "ENETUNREACH",
        libc::ECONNREFUSED => "ECONNREFUSED",
        libc::EMSGSIZE => "EMSGSIZE",
        libc::ENOBUFS => "ENOBUFS",
        libc::E2BIG => "E2BIG",
        libc::ERANGE => "ERANGE",
        libc::ECONNRESET => "ECONNRESET",
        libc::EPIPE => "EPIPE",
        libc::ENODEV => "ENODEV",
        libc::ETIMEDOUT => "ETIMEDOUT",
        libc::ENOTCONN => "ENOTCONN",
        libc::ENETDOWN => "ENETDOWN",
        libc::ENXIO => "ENXIO",
        libc::EHOSTUNREACH => "EHOSTUNREACH",
        libc::ENOTTY => "ENOTTY",
        libc::EPROTO => "EPROTO",
        _ => "errno",
    }
}

/// Why a run could not be set up.
#[derive(Debug)]
pub enum SetupError {
    /// A setting cannot work as given (or the host lacks what it needs); the text says how
    /// to fix it.
    Usage(Usage),
    /// The kernel refused a call.
    Kernel(SysError),
}

impl SetupError {
    /// A [`Usage`] error about `setting` (see [`Usage::new`]).
    pub fn usage(setting: Setting, text: impl Into<String>) -> SetupError {
        SetupError::Usage(Usage::new(setting, text))
    }

    /// A [`Usage`] error no single setting causes (see [`Usage::host`]).
    pub fn host(text: impl Into<String>) -> SetupError {
        SetupError::Usage(Usage::host(text))
    }
}

impl fmt::Display for SetupError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SetupError::Usage(u) => u.fmt(f),
            SetupError::Kernel(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for SetupError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            SetupError::Usage(_) => None,
            SetupError::Kernel(e) => Some(e),
        }
    }
}

impl From<SysError> for SetupError {
    fn from(e: SysError) -> Self {
        SetupError::Kernel(e)
    }
}

impl From<Usage> for SetupError {
    fn from(u: Usage) -> Self {
        SetupError::Usage(u)
    }
}

/// A setting of a run, by the libraries' word for it. Messages refer to settings only through
/// these (`Setting::Queues.r()` in a `format!`), so the cli can print each as its flag and a
/// library never spells a flag.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Setting {
    /// The I/O path (sockets, io_uring, AF_PACKET, AF_XDP).
    Io,
    /// The network interface an AF_XDP or AF_PACKET path opens.
    Iface,
    /// The rx queues of the interface.
    Queues,
    /// The AF_XDP ring size.
    Ring,
    /// Native or generic XDP.
    XdpMode,
    /// AF_XDP zero-copy.
    ZeroCopy,
    /// Replacing another tool's XDP program.
    Force,
    /// The local address to receive on.
    Listen,
    /// The address to send to.
    Target,
    /// Server or sink worker threads.
    Workers,
    /// Generator threads.
    Threads,
    /// Flows (source ports).
    Flows,
    /// Datagrams per system call.
    Batch,
    /// The CPUs to pin threads to.
    Cpus,
    /// How reuseport sockets are chosen per packet.
    Steer,
    /// The socket layout (one per worker, or one shared).
    Sockets,
    /// The payload size of a request or datagram.
    Size,
    /// The AF_XDP UMEM frame size.
    FrameSize,
    /// Requests in flight per flow.
    Window,
    /// How long a request is waited for.
    Timeout,
    /// Requests sent per wake-up of an open-loop generator.
    PerWake,
    /// Requests (or datagrams) per second.
    Rate,
    /// How long a run lasts.
    Duration,
    /// How many requests a run sends.
    Requests,
}

impl Setting {
    /// Every setting (the cli checks that each has a flag).
    pub const ALL: &'static [Setting] = &[
        Setting::Io,
        Setting::Iface,
        Setting::Queues,
        Setting::Ring,
        Setting::XdpMode,
        Setting::ZeroCopy,
        Setting::Force,
        Setting::Listen,
        Setting::Target,
        Setting::Workers,
        Setting::Threads,
        Setting::Flows,
        Setting::Batch,
        Setting::Cpus,
        Setting::Steer,
        Setting::Sockets,
        Setting::Size,
        Setting::FrameSize,
        Setting::Window,
        Setting::Timeout,
        Setting::PerWake,
        Setting::Rate,
        Setting::Duration,
        Setting::Requests,
    ];

    /// The word a library message uses for the setting.
    pub fn name(self) -> &'static str {
        match self {
            Setting::Io => "io",
            Setting::Iface => "iface",
            Setting::Queues => "queues",
            Setting::Ring => "ring",
            Setting::XdpMode => "xdp mode",
            Setting::ZeroCopy => "zerocopy",
            Setting::Force => "force",
            Setting::Listen => "listen",
            Setting::Target => "target",
            Setting::Workers => "workers",
            Setting::Threads => "threads",
            Setting::Flows => "flows",
            Setting::Batch => "batch",
            Setting::Cpus => "cpus",
            Setting::Steer => "steer",
            Setting::Sockets => "sockets",
            Setting::Size => "size",
            Setting::FrameSize => "frame size",
            Setting::Window => "window",
            Setting::Timeout => "timeout",
            Setting::PerWake => "per wake",
            Setting::Rate => "rate",
            Setting::Duration => "duration",
            Setting::Requests => "requests",
        }
    }

    /// A reference to the setting inside a [`Usage`] message: rendered as [`Setting::name`]
    /// by `Display`, as the flag by the cli ([`Usage::render`]).
    pub fn r(self) -> SettingRef {
        SettingRef(self)
    }

    fn index(self) -> usize {
        Setting::ALL
            .iter()
            .position(|&s| s == self)
            .expect("every setting is in ALL")
    }
}

/// A [`Setting`] as written into a message (see [`Setting::r`]).
pub struct SettingRef(Setting);

/// Marks a setting reference in a message's text: never part of human text.
const MARK: char = '\u{1}';

impl fmt::Display for SettingRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{MARK}{}{MARK}", self.0.index())
    }
}

/// A setting that cannot work as given, and how to fix it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Usage {
    /// The setting at fault, when one is.
    pub setting: Option<Setting>,
    /// The text, with settings marked (see [`Setting::r`]).
    text: String,
}

impl Usage {
    /// A usage error about `setting`; `text` refers to settings only through
    /// [`Setting::r`].
    pub fn new(setting: Setting, text: impl Into<String>) -> Usage {
        Usage {
            setting: Some(setting),
            text: text.into(),
        }
    }

    /// A usage error that no single setting causes (the host lacks a privilege or a
    /// device).
    pub fn host(text: impl Into<String>) -> Usage {
        Usage {
            setting: None,
            text: text.into(),
        }
    }

    /// The text with every setting written by `name`: the cli passes its flags.
    pub fn render(&self, name: impl Fn(Setting) -> String) -> String {
        let mut out = String::with_capacity(self.text.len());
        for (i, part) in self.text.split(MARK).enumerate() {
            // Odd parts are the indexes written by SettingRef.
            match part.parse::<usize>().ok().and_then(|n| Setting::ALL.get(n)) {
                Some(&s) if i % 2 == 1 => out.push_str(&name(s)),
                _ => out.push_str(part),
            }
        }
        out
    }
}

impl fmt::Display for Usage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.render(|s| s.name().to_string()))
    }
}

impl std::error::Error for Usage {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_render_as_names_or_as_the_callers_words() {
        let u = Usage::new(
            Setting::Threads,
            format!(
                "{} 4: use {} 1 or raise {}",
                Setting::Threads.r(),
                Setting::Threads.r(),
                Setting::FrameSize.r()
            ),
        );
        assert_eq!(
            u.to_string(),
            "threads 4: use threads 1 or raise frame size"
        );
        let flags = u.render(|s| format!("--{}", s.name().replace(' ', "-")));
        assert_eq!(flags, "--threads 4: use --threads 1 or raise --frame-size");
        assert_eq!(u.setting, Some(Setting::Threads));
    }

    #[test]
    fn every_setting_has_one_distinct_name() {
        let mut names: Vec<&str> = Setting::ALL.iter().map(|s| s.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), Setting::ALL.len());
        for &s in Setting::ALL {
            assert_eq!(Setting::ALL[s.index()], s);
        }
    }

    #[test]
    fn a_kernel_refusal_names_the_call_and_errno() {
        let e = SetupError::from(SysError {
            what: "bind(10.0.0.1:53)".into(),
            source: io::Error::from_raw_os_error(libc::EADDRINUSE),
        });
        assert!(e.to_string().starts_with("bind(10.0.0.1:53): "), "{e}");
        assert!(e.to_string().ends_with("(EADDRINUSE)"), "{e}");
    }
}
