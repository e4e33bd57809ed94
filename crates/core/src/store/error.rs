//! The store's errors: what failed, with the context a user needs, and why a session could not be
//! created.

/// An error of the store, with the context a user needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreError(pub String);

impl std::fmt::Display for StoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for StoreError {}

/// Why a session could not be created.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CreateError {
    /// A session with this id is stored already.
    Exists,
    /// Another process is creating, or has open, a session with this id.
    Busy(StoreError),
    /// The store failed.
    Store(StoreError),
}

impl From<StoreError> for CreateError {
    fn from(e: StoreError) -> Self {
        Self::Store(e)
    }
}

impl From<rusqlite::Error> for CreateError {
    fn from(e: rusqlite::Error) -> Self {
        Self::Store(e.into())
    }
}

impl std::fmt::Display for CreateError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Exists => f.write_str("a session with this id exists"),
            Self::Busy(e) | Self::Store(e) => e.fmt(f),
        }
    }
}

impl From<rusqlite::Error> for StoreError {
    fn from(e: rusqlite::Error) -> Self {
        Self(format!("session database: {e}"))
    }
}
