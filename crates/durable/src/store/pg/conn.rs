//! A connection that comes back: connected on first use, and again after it broke (the next
//! use reconnects; the caller's error says what happened meanwhile).

use postgres::{Client, Config, NoTls};

use crate::error::{OpenError, StoreError};

pub(super) struct Conn {
    config: Config,
    client: Option<Client>,
}

/// The connection settings of `conninfo`, named `tickwheel-durable/<node>` in the server's
/// `pg_stat_activity` (so an operator can tell a node's connections apart).
pub(super) fn config(conninfo: &str, node: &str) -> Result<Config, OpenError> {
    let mut config: Config = conninfo
        .parse()
        .map_err(|e: postgres::Error| OpenError::Io(std::io::Error::other(e.to_string())))?;
    let name: String = format!("tickwheel-durable/{node}")
        .chars()
        .take(63)
        .collect();
    config.application_name(&name);
    Ok(config)
}

impl Conn {
    pub(super) fn new(config: &Config) -> Conn {
        Conn {
            config: config.clone(),
            client: None,
        }
    }

    /// The client, connected now if it was not (or had broken).
    pub(super) fn get(&mut self) -> Result<&mut Client, StoreError> {
        if self.client.as_ref().is_none_or(Client::is_closed) {
            self.client = None;
            let client = self.config.connect(NoTls).map_err(pg)?;
            self.client = Some(client);
        }
        Ok(self.client.as_mut().expect("connected just above"))
    }

    /// Drops the connection if `e` says it broke, so the next use reconnects.
    pub(super) fn check(&mut self, e: &postgres::Error) {
        if e.is_closed() || self.client.as_ref().is_some_and(Client::is_closed) {
            self.client = None;
        }
    }
}

/// A PostgreSQL error as a store error: a lost connection or an I/O failure is `Io` (retried by
/// whoever retries), a server's refusal `Other` with its message.
pub(super) fn pg(e: postgres::Error) -> StoreError {
    if e.is_closed() {
        return StoreError::Io(std::io::Error::new(
            std::io::ErrorKind::ConnectionAborted,
            e.to_string(),
        ));
    }
    match e.as_db_error() {
        Some(db) => StoreError::Other(format!("PostgreSQL: {}", db.message()).into()),
        None => StoreError::Io(std::io::Error::other(e.to_string())),
    }
}
