//! The RADIUS servers the lab compares, started one way: ours (`firehose serve --proto
//! radius`) and FreeRADIUS ([`super::freeradius`]), both on the same clients.conf and users
//! file (readiness is [`super::freeradius::answers_status`], a Status-Server).
//! `lab compare --proto radius` starts its servers here.

use super::freeradius::{self, FreeRadiusPlan};
use crate::server::ServerKind;
use crate::{LabError, LabResult};
use std::net::SocketAddr;
use std::path::Path;

/// Everything a RADIUS server start needs.
#[derive(Debug, Clone)]
pub struct RadiusServer<'a> {
    pub kind: &'a ServerKind,
    /// The firehose binary (for ours).
    pub firehose: &'a Path,
    /// firehose's workers; FreeRADIUS's thread pool (start, min and max).
    pub workers: usize,
    /// The server's own files (a directory the run owns).
    pub dir: &'a Path,
    /// Where Access-Requests go (FreeRADIUS takes accounting on the next port).
    pub listen: SocketAddr,
    pub clients: &'a Path,
    pub users: &'a Path,
}

impl RadiusServer<'_> {
    /// The command line; FreeRADIUS's configuration written into `dir` first.
    pub fn argv(&self) -> LabResult<Vec<String>> {
        match self.kind {
            ServerKind::FirehoseRadius => {
                let w = self.workers.to_string();
                let v = [
                    "serve",
                    "--proto",
                    "radius",
                    "--radius-clients",
                    &self.clients.display().to_string(),
                    "--radius-users",
                    &self.users.display().to_string(),
                    "--listen",
                    &self.listen.to_string(),
                    "--workers",
                    &w,
                    "--cpus",
                    "auto",
                ];
                Ok(std::iter::once(self.firehose.display().to_string())
                    .chain(v.iter().map(|s| s.to_string()))
                    .collect())
            }
            ServerKind::FreeRadius => {
                let plan = FreeRadiusPlan {
                    dir: self.dir,
                    listen: self.listen,
                    clients: self.clients,
                    users: self.users,
                    threads: self.workers,
                };
                let args =
                    freeradius::write(&plan).map_err(|e| LabError::io(self.dir.display(), e))?;
                Ok(std::iter::once(freeradius::PROGRAM.to_string())
                    .chain(args)
                    .collect())
            }
            other => Err(LabError::Usage(format!(
                "{} {} is not a RADIUS server (use firehose or freeradius)",
                other.name(),
                other.config(self.workers)
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_servers_get_the_same_files_and_cpus() {
        let dir = crate::workdir::WorkDir::new("test").unwrap();
        let mut s = RadiusServer {
            kind: &ServerKind::FirehoseRadius,
            firehose: Path::new("/usr/bin/firehose"),
            workers: 2,
            dir: &dir,
            listen: "127.0.0.1:18120".parse().unwrap(),
            clients: Path::new("/tmp/c.conf"),
            users: Path::new("/tmp/users"),
        };
        let ours = s.argv().unwrap().join(" ");
        assert_eq!(
            ours,
            "/usr/bin/firehose serve --proto radius --radius-clients /tmp/c.conf \
             --radius-users /tmp/users --listen 127.0.0.1:18120 --workers 2 --cpus auto"
        );
        s.kind = &ServerKind::FreeRadius;
        let theirs = s.argv().unwrap();
        assert_eq!(theirs[0], "freeradius");
        let conf = std::fs::read_to_string(dir.join("radiusd.conf")).unwrap();
        assert!(conf.contains("$INCLUDE /tmp/c.conf\n") && conf.contains("max_servers = 2\n"));
        s.kind = &ServerKind::Nsd;
        assert!(s.argv().is_err());
    }
}
