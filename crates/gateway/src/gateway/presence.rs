//! Who is present (the gateway itself, then every connected client but CLIs, as the reference
//! has it) and the `stateVersion` clients track it and `health` by.

use std::net::SocketAddr;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use acp_protocol::gateway::events::{PresenceEntry, StateVersion};

use super::handshake::Client;
use crate::clock::now_ms;
use crate::sync::lock;

pub struct Presence {
    boot_id: String,
    started: Instant,
    /// Connected clients other than CLIs, by connection id.
    present: Mutex<Vec<(String, PresenceEntry)>>,
    presence_version: AtomicU64,
    health_version: AtomicU64,
}

impl Default for Presence {
    fn default() -> Self {
        Self {
            boot_id: uuid::Uuid::new_v4().to_string(),
            started: Instant::now(),
            present: Mutex::default(),
            presence_version: 1.into(),
            health_version: 1.into(),
        }
    }
}

impl Presence {
    /// This run's id (`bootId`, the gateway's `instanceId`).
    pub fn boot_id(&self) -> &str {
        &self.boot_id
    }

    pub fn uptime_ms(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    pub fn state_version(&self) -> StateVersion {
        StateVersion {
            presence: self.presence_version.load(Ordering::Relaxed),
            health: self.health_version.load(Ordering::Relaxed),
        }
    }

    /// What `health` reports changed (connections, open sessions).
    pub fn health_changed(&self) {
        self.health_version.fetch_add(1, Ordering::Relaxed);
    }

    /// The gateway itself, then every present client.
    pub fn list(&self) -> Vec<PresenceEntry> {
        let version = env!("CARGO_PKG_VERSION");
        let mut list = vec![PresenceEntry {
            version: Some(version.into()),
            platform: Some(std::env::consts::OS.into()),
            mode: "gateway".into(),
            reason: "self".into(),
            instance_id: self.boot_id.clone(),
            text: format!("Gateway: acp {version}"),
            ts: now_ms(),
            ..PresenceEntry::default()
        }];
        list.extend(lock(&self.present).iter().map(|(_, entry)| entry.clone()));
        list
    }

    /// A client connected; whether the list changed (CLIs are not listed).
    pub fn joined(&self, client: &Client, peer: SocketAddr) -> bool {
        self.health_changed();
        if client.mode == "cli" {
            return false;
        }
        let info = &client.info;
        let name = info.display_name.as_deref().unwrap_or(&client.client_id);
        let entry = PresenceEntry {
            ip: Some(peer.ip().to_string()),
            version: Some(info.version.clone()),
            platform: Some(info.platform.clone()),
            device_family: info.device_family.clone(),
            mode: client.mode.clone(),
            reason: "connect".into(),
            text: format!("{name} ({})", client.mode),
            ts: now_ms(),
            device_id: client.device_id.clone(),
            roles: Some(vec![client.role.clone()]),
            scopes: Some(client.scopes.clone()),
            instance_id: info.instance_id.clone().unwrap_or_else(|| client.conn_id.clone()),
        };
        lock(&self.present).push((client.conn_id.clone(), entry));
        self.presence_version.fetch_add(1, Ordering::Relaxed);
        true
    }

    /// A client left; whether the list changed.
    pub fn left(&self, client: &Client) -> bool {
        self.health_changed();
        let mut present = lock(&self.present);
        let before = present.len();
        present.retain(|(id, _)| *id != client.conn_id);
        let changed = present.len() != before;
        if changed {
            self.presence_version.fetch_add(1, Ordering::Relaxed);
        }
        changed
    }
}
