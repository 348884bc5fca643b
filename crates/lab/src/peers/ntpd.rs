//! ntpsec's ntpd as a peer NTP server: one configuration in a directory of the run's own and
//! one process, like for like with chronyd and `firehose serve --proto ntp` as far as ntpd
//! allows.
//!
//! - It answers every client as a synchronised stratum-N server of this host's clock. ntpsec
//!   1.2 still has the local clock driver (`refclock local stratum 10`), but run as below
//!   (the kernel discipline refused) it never took the driver as its source (150 s of trying
//!   at an 8 s poll; we did not find why): it is run in orphan mode instead (`tos orphan N orphanwait 0`), which ntpsec's
//!   documentation recommends over the local clock, and answers at once.
//! - No rate limit: ntpsec's built-in `restrict default` entry is `noquery limited`, and a
//!   `restrict` line only adds flags, so `unrestrict default limited` takes `limited` off.
//!   `noquery` stays: modes 6 and 7 get nothing, as from firehose.
//! - No client log: `disable monitor` (its MRU list of clients).
//! - It never touches the host's clock: `disable ntp` and `disable kernel`, and, because
//!   ntpsec 1.2.2 still calls ntp_adjtime() to start the kernel loop whatever the
//!   configuration says, it runs without CAP_SYS_TIME (`setpriv --bounding-set -sys_time`),
//!   so those calls fail with EPERM (it logs them and goes on).
//! - It serves port 123 only (ntpsec has no option for another port) from one process that
//!   binds it without SO_REUSEPORT: one instance, never one per CPU. The lab runs it in the
//!   veth topology's server namespace, where port 123 is the lab's own.
//! - In the foreground (`-n`), its log on stdout, its pid file, configuration and statistics
//!   directory in the run's directory.
//! - Debian's ntpsec and chrony packages conflict (both provide time-daemon), so `sh mk/deps
//!   lab` does not install ntpsec: it unpacks the package into [`UNPACKED`], and the lab runs
//!   that ntpd by its path ([`find`]).

use std::path::{Path, PathBuf};

/// The program and the Debian package it comes from.
pub const PROGRAM: &str = "ntpd";
pub const PACKAGE: &str = "ntpsec";

/// Where `sh mk/deps lab` unpacks Debian's ntpsec package without installing it (it
/// conflicts with chrony, and installed it would become the host's time service).
pub const UNPACKED: &str = "/var/cache/firehose/ntpsec";

/// The ntpd to run: the one on PATH (a host with ntpsec installed), else the unpacked one;
/// `None` when there is neither.
pub fn find() -> Option<String> {
    if crate::cmd::installed(PROGRAM) {
        return Some(PROGRAM.into());
    }
    let p = Path::new(UNPACKED).join("usr/sbin").join(PROGRAM);
    p.is_file().then(|| p.display().to_string())
}

/// The one port ntpd serves.
pub const PORT: u16 = 123;

/// What the configuration says.
#[derive(Debug, Clone)]
pub struct NtpdConf<'a> {
    /// The run's directory for ntpd (configuration, pid file, statistics).
    pub dir: &'a Path,
    /// The stratum it claims (orphan mode), 1..=15.
    pub stratum: u8,
}

impl NtpdConf<'_> {
    /// The text of ntp.conf.
    pub fn text(&self) -> String {
        format!(
            "# firehose lab: ntpsec's ntpd as a peer NTP server (crates/lab/src/peers/ntpd.rs)\n\
             tos orphan {stratum} orphanwait 0\n\
             unrestrict default limited\n\
             disable monitor\n\
             disable ntp\n\
             disable kernel\n\
             statsdir {dir}/\n",
            stratum = self.stratum.clamp(1, 15),
            dir = self.dir.display(),
        )
    }

    /// Writes ntp.conf into the run's directory; returns the command line that runs
    /// `program` (see [`find`]) on it.
    pub fn write(&self, program: &str) -> std::io::Result<Vec<String>> {
        let path = self.dir.join("ntp.conf");
        std::fs::write(&path, self.text())?;
        Ok(argv(program, &path))
    }
}

/// `program` (an ntpd) in the foreground on the configuration at `conf`, its pid file
/// beside it, without CAP_SYS_TIME.
pub fn argv(program: &str, conf: &Path) -> Vec<String> {
    let dir = conf.parent().unwrap_or(Path::new("."));
    let pid: PathBuf = dir.join("ntpd.pid");
    [
        "setpriv",
        "--bounding-set",
        "-sys_time",
        program,
        "-n",
        "-c",
        &conf.display().to_string(),
        "-p",
        &pid.display().to_string(),
    ]
    .map(String::from)
    .to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn orphan_stratum_no_rate_limit_no_client_log_no_clock() {
        let dir = crate::workdir::WorkDir::new("ntpd-test").unwrap();
        let conf = NtpdConf {
            dir: &dir,
            stratum: 10,
        };
        let t = conf.text();
        for line in [
            "tos orphan 10 orphanwait 0\n",
            "unrestrict default limited\n",
            "disable monitor\n",
            "disable ntp\n",
            "disable kernel\n",
        ] {
            assert!(t.contains(line), "{line}: {t}");
        }
        // No upstream source, no rate limiting or KoD turned on.
        for l in t.lines().filter(|l| !l.starts_with('#')) {
            for word in [
                "server ",
                "pool ",
                "refclock ",
                "restrict ",
                "kod",
                "limited",
            ] {
                assert!(!l.starts_with(word) && !l.contains(" kod"), "{l}: {t}");
            }
        }
        let a = conf.write("ntpd").unwrap();
        assert_eq!(
            a[..5],
            ["setpriv", "--bounding-set", "-sys_time", "ntpd", "-n"]
        );
        let path = dir.join("ntp.conf");
        assert_eq!(a[6], path.display().to_string());
        assert_eq!(std::fs::read_to_string(&path).unwrap(), t);
        assert!(a[8].ends_with("/ntpd.pid"), "{a:?}");
    }
}
