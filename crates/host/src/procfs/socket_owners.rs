//! Which process holds a socket: /proc/<pid>/fd links read `socket:[INODE]`, the number a
//! drop's socket is known by. The same walk `ss -p` and `lsof` make, limited to the inodes
//! asked for, so a host with many fds is read once per report, not per drop.

use std::collections::{BTreeMap, BTreeSet};

/// A process holding a socket.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Owner {
    pub pid: u32,
    /// /proc/<pid>/comm.
    pub comm: String,
    /// The first words of the command line (`firehose serve`), at most 3.
    pub command: String,
}

impl std::fmt::Display for Owner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} pid {}", self.command, self.pid)
    }
}

/// The inode of an fd link's target, when it is a socket: `socket:[12345]` -> 12345.
pub fn socket_inode(link: &str) -> Option<u64> {
    link.strip_prefix("socket:[")?
        .strip_suffix(']')?
        .parse()
        .ok()
}

/// The command as `ps` would shorten it: the program's file name and its next two words
/// (NUL-separated /proc/<pid>/cmdline); `comm` when the command line is empty (a kernel
/// thread, a zombie).
pub fn command(cmdline: &str, comm: &str) -> String {
    let mut words = cmdline.split('\0').filter(|w| !w.is_empty());
    let Some(first) = words.next() else {
        return comm.to_string();
    };
    let prog = first.rsplit('/').next().unwrap_or(first);
    let mut out = prog.to_string();
    for w in words.take(2) {
        out.push(' ');
        out.push_str(w);
    }
    out
}

/// The owners of `inodes` among the running processes (the first process found for each;
/// a socket shared by a fork names one holder). Processes that vanish meanwhile, or whose
/// fds this reader may not list, are skipped.
pub fn owners(inodes: &BTreeSet<u64>) -> BTreeMap<u64, Owner> {
    owners_in(&crate::fs::HostFs::live(), inodes)
}

/// [`owners`] in the tree `fs` (the doctor gathers from a fake tree in its tests).
pub fn owners_in(fs: &crate::fs::HostFs, inodes: &BTreeSet<u64>) -> BTreeMap<u64, Owner> {
    let mut out = BTreeMap::new();
    if inodes.is_empty() {
        return out;
    }
    let Ok(procs) = fs.list("/proc") else {
        return out;
    };
    for name in procs {
        let Ok(pid) = name.parse::<u32>() else {
            continue;
        };
        let Ok(fds) = fs.list(&format!("/proc/{pid}/fd")) else {
            continue;
        };
        let mut found = Vec::new();
        for fd in fds {
            let Ok(link) = fs.link(&format!("/proc/{pid}/fd/{fd}")) else {
                continue;
            };
            if let Some(ino) = socket_inode(&link) {
                if inodes.contains(&ino) && !out.contains_key(&ino) {
                    found.push(ino);
                }
            }
        }
        if found.is_empty() {
            continue;
        }
        let comm = fs.value(&format!("/proc/{pid}/comm")).unwrap_or_default();
        let cmdline = fs.read(&format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let owner = Owner {
            pid,
            command: command(&cmdline, &comm),
            comm,
        };
        for ino in found {
            out.insert(ino, owner.clone());
        }
        if out.len() == inodes.len() {
            break;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_and_commands() {
        assert_eq!(socket_inode("socket:[4242]"), Some(4242));
        assert_eq!(socket_inode("pipe:[4242]"), None);
        assert_eq!(socket_inode("socket:[x]"), None);
        assert_eq!(
            command("/usr/bin/firehose\0serve\0--listen\0x\0", "firehose"),
            "firehose serve --listen"
        );
        assert_eq!(command("", "kworker/0:1"), "kworker/0:1");
    }

    #[test]
    fn finds_the_owner_of_its_own_socket() {
        let s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let _ = s;
        let me = std::process::id();
        let mut mine = BTreeSet::new();
        for fd in std::fs::read_dir("/proc/self/fd").unwrap().flatten() {
            if let Ok(l) = std::fs::read_link(fd.path()) {
                if let Some(ino) = socket_inode(&l.to_string_lossy()) {
                    mine.insert(ino);
                }
            }
        }
        assert!(!mine.is_empty());
        let found = owners(&mine);
        assert!(found.values().all(|o| o.pid == me), "{found:?}");
        assert_eq!(found.len(), mine.len());
    }
}
