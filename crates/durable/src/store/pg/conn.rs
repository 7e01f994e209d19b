//! A connection that comes back: connected on first use, and again after it broke (the next
//! use reconnects; the caller's error says what happened meanwhile).

use postgres::{Client, Config, NoTls};

use super::apply::Prepared;
use crate::error::{OpenError, StoreError};

pub(super) struct Conn {
    config: Config,
    client: Option<Client>,
    /// The statements prepared on this connection (gone with it).
    prepared: Prepared,
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
            prepared: Prepared::default(),
        }
    }

    /// The client, connected now if it was not (or had broken).
    pub(super) fn get(&mut self) -> Result<&mut Client, StoreError> {
        Ok(self.parts()?.0)
    }

    /// The client (connected now if need be) and its prepared statements.
    pub(super) fn parts(&mut self) -> Result<(&mut Client, &mut Prepared), StoreError> {
        if self.client.as_ref().is_none_or(Client::is_closed) {
            self.client = None;
            self.prepared = Prepared::default();
            let client = self.config.connect(NoTls).map_err(pg)?;
            self.client = Some(client);
        }
        let client = self.client.as_mut().expect("connected just above");
        Ok((client, &mut self.prepared))
    }

    /// Runs `sql` (prepared on this connection the first time), counting its round trips.
    pub(super) fn query(
        &mut self,
        sql: &str,
        params: &[&(dyn postgres::types::ToSql + Sync)],
        trips: &mut u64,
    ) -> Result<Vec<postgres::Row>, postgres::Error> {
        let Some(client) = self.client.as_mut() else {
            unreachable!("`query` follows `get`");
        };
        let st = self.prepared.get(client, sql, trips)?;
        *trips += 1;
        client.query(&st, params)
    }

    /// Drops the connection if `e` says it broke, so the next use reconnects.
    pub(super) fn check(&mut self, e: &postgres::Error) {
        if lost(e) || self.client.as_ref().is_some_and(Client::is_closed) {
            self.client = None;
        }
    }
}

/// Whether `e` means the connection is gone: closed, or ended by the server (an administrator's
/// `pg_terminate_backend`, a shutdown: SQLSTATE class 57P; a connection exception: class 08).
pub(super) fn lost(e: &postgres::Error) -> bool {
    e.is_closed()
        || e.code().is_some_and(|c| {
            let c = c.code();
            c.starts_with("57P") || c.starts_with("08")
        })
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
