//! Setup refusals from the libraries as one line of bad usage (exit 2): a usage error with
//! each setting it names printed as its flag, or the kernel's refusal (call and errno) with
//! the fix for common errnos.

use crate::args::Usage;
use firehose_sys::{Setting, SetupError};

/// The flag that sets `s`, the same on every subcommand that has it.
pub fn flag(s: Setting) -> &'static str {
    match s {
        Setting::Io => "--io",
        Setting::Iface => "--iface",
        Setting::Queues => "--queues",
        Setting::Ring => "--ring",
        Setting::XdpMode => "--xdp-mode",
        Setting::ZeroCopy => "--zerocopy",
        Setting::Force => "--force",
        Setting::Listen => "--listen",
        Setting::Target => "--target",
        Setting::Workers => "--workers",
        Setting::Threads => "--threads",
        Setting::Flows => "--flows",
        Setting::Batch => "--batch",
        Setting::Cpus => "--cpus",
        Setting::Steer => "--steer",
        Setting::Sockets => "--sockets",
        Setting::Size => "--size",
        Setting::FrameSize => "--frame-size",
        Setting::Window => "--window",
        Setting::Timeout => "--timeout",
        Setting::PerWake => "--per-wake",
        Setting::Rate => "--rate",
        Setting::Duration => "--duration",
        Setting::Requests => "--requests",
    }
}

/// A start-up refusal as one line of bad usage. `io` names the I/O mode for a kernel refusal
/// (`--io uring: the kernel refused ...`), when the subcommand has several.
pub fn setup_error(e: SetupError, io: Option<&str>) -> anyhow::Error {
    Usage(text(&e, io)).into()
}

/// The line [`setup_error`] prints.
pub fn text(e: &SetupError, io: Option<&str>) -> String {
    match e {
        SetupError::Usage(u) => u.render(|s| flag(s).to_string()),
        SetupError::Kernel(k) => {
            let errno = k.errno().map(firehose_sys::errno_name);
            let hint = crate::uring_args::uring_hint(&k.what, errno).unwrap_or(match errno {
                Some("EADDRINUSE") => {
                    " — another process holds this port; pick another --listen port"
                }
                Some("EACCES") | Some("EPERM") => {
                    " — this needs more privilege (run as root or lower the value)"
                }
                _ => "",
            });
            let io = io.map(|m| format!("--io {m}: ")).unwrap_or_default();
            format!("{io}the kernel refused {k}{hint}")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_setting_has_a_flag_the_cli_takes() {
        use clap::CommandFactory;
        let cmd = crate::Cli::command();
        let mut longs = std::collections::BTreeSet::new();
        fn walk(c: &clap::Command, out: &mut std::collections::BTreeSet<String>) {
            for a in c.get_arguments() {
                if let Some(l) = a.get_long() {
                    out.insert(format!("--{l}"));
                }
            }
            for s in c.get_subcommands() {
                walk(s, out);
            }
        }
        walk(&cmd, &mut longs);
        for &s in Setting::ALL {
            assert!(
                longs.contains(flag(s)),
                "{s:?}: no subcommand has {}",
                flag(s)
            );
        }
    }

    #[test]
    fn a_usage_error_prints_its_settings_as_flags() {
        let e = SetupError::usage(
            Setting::Threads,
            format!("{} 2: use {} 1", Setting::Threads.r(), Setting::Threads.r()),
        );
        assert_eq!(
            setup_error(e, None).to_string(),
            "--threads 2: use --threads 1"
        );
    }
}
