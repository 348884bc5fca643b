//! Loading the clients and users files, and re-reading them while serving (SIGHUP).
//!
//! Both files are read and checked in full before anything changes; the new tables are
//! built aside and published in one step, so a request is answered entirely from the old
//! files or entirely from the new. A file that fails to load keeps its last good version
//! and the failure is reported.

use super::db::{Clients, RadiusDb, Users};
use super::LiveDb;
use firehose_radiuswire::{clients, users, ClientsFile, UsersFile};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// What was loaded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Loaded {
    pub clients: usize,
    pub users: usize,
    /// clients.conf settings read but not acted on ("line N: key").
    pub ignored: Vec<String>,
}

/// The two files, their last good contents, and where to publish.
pub struct Reloader {
    clients_path: PathBuf,
    users_path: PathBuf,
    require_all: bool,
    clients: ClientsFile,
    users: UsersFile,
    live: Arc<LiveDb>,
}

fn build(c: &ClientsFile, u: &UsersFile, require_all: bool) -> Arc<RadiusDb> {
    Arc::new(RadiusDb {
        clients: Clients::build(c, require_all),
        users: Users::build(u),
    })
}

impl Reloader {
    /// Loads both files for the first time; any failure is an error naming the file and
    /// line. `require_all`: every client must send a Message-Authenticator.
    pub fn load(
        clients_path: &Path,
        users_path: &Path,
        require_all: bool,
    ) -> Result<(Self, Loaded), String> {
        let c = clients::load(clients_path)?;
        if c.clients.is_empty() {
            return Err(format!(
                "{}: no client blocks (expected client NAME {{ ipaddr = ...  secret = ... }})",
                clients_path.display()
            ));
        }
        let u = users::load(users_path)?;
        let loaded = Loaded {
            clients: c.clients.len(),
            users: u.entries.len(),
            ignored: c.ignored.clone(),
        };
        let live = LiveDb::new(build(&c, &u, require_all));
        Ok((
            Reloader {
                clients_path: clients_path.to_path_buf(),
                users_path: users_path.to_path_buf(),
                require_all,
                clients: c,
                users: u,
                live,
            },
            loaded,
        ))
    }

    /// The tables being served, for handlers.
    pub fn live(&self) -> Arc<LiveDb> {
        self.live.clone()
    }

    /// The tables now published.
    pub fn db(&self) -> Arc<RadiusDb> {
        self.live.get().1
    }

    /// Re-reads both files and publishes the result: per file, the number of clients or
    /// entries loaded, or why its previous version stays.
    pub fn reload(&mut self) -> Vec<(PathBuf, Result<usize, String>)> {
        let c = clients::load(&self.clients_path).and_then(|c| {
            if c.clients.is_empty() {
                Err("no client blocks".into())
            } else {
                Ok(c)
            }
        });
        let u = users::load(&self.users_path);
        let out = vec![
            (
                self.clients_path.clone(),
                c.as_ref().map(|c| c.clients.len()).map_err(Clone::clone),
            ),
            (
                self.users_path.clone(),
                u.as_ref().map(|u| u.entries.len()).map_err(Clone::clone),
            ),
        ];
        if let Ok(c) = c {
            self.clients = c;
        }
        if let Ok(u) = u {
            self.users = u;
        }
        self.live
            .publish(build(&self.clients, &self.users, self.require_all));
        out
    }
}
