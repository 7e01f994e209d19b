//! A connection that comes back: connected on first use, and again after it broke (the next
//! use reconnects; the caller's error says what happened meanwhile).

use postgres::{Client, NoTls};

use crate::error::StoreError;

pub(super) struct Conn {
    conninfo: String,
    client: Option<Client>,
}

impl Conn {
    pub(super) fn new(conninfo: &str) -> Conn {
        Conn {
            conninfo: conninfo.to_owned(),
            client: None,
        }
    }

    /// The client, connected now if it was not (or had broken).
    pub(super) fn get(&mut self) -> Result<&mut Client, StoreError> {
        if self.client.as_ref().is_none_or(Client::is_closed) {
            self.client = None;
            let client = Client::connect(&self.conninfo, NoTls).map_err(pg)?;
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
