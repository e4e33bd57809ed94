//! This installation's device identity for gateways: an ed25519 key made once and kept in
//! `$ACP_HOME/identity/device.json` (0600), the device id (SHA-256 of the public key, hex), the
//! signed proof a `connect` carries (v3 as the reference signs it, v2 for older servers), and the
//! device tokens gateways hand out, kept per gateway URL.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use acp_protocol::gateway::DeviceProof;
use acp_protocol::gateway::methods::{ClientInfo, DeviceSignature};
use base64::Engine as _;
use ring::signature::{Ed25519KeyPair, KeyPair as _};
use serde::{Deserialize, Serialize};

const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::URL_SAFE_NO_PAD;

pub struct Identity {
    pair: Ed25519KeyPair,
    pub device_id: String,
    dir: PathBuf,
}

#[derive(Serialize, Deserialize)]
struct Stored {
    version: u32,
    #[serde(rename = "deviceId")]
    device_id: String,
    #[serde(rename = "publicKey")]
    public_key: String,
    /// The key pair, PKCS#8, base64url.
    pkcs8: String,
}

/// A device token a gateway issued, as kept.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeviceToken {
    pub token: String,
    pub role: String,
    #[serde(default)]
    pub scopes: Vec<String>,
}

impl Identity {
    /// Loads the identity under `home`, or makes and saves a new one.
    pub fn load_or_create(home: &Path) -> Result<Self, String> {
        let dir = home.join("identity");
        let path = dir.join("device.json");
        match std::fs::read_to_string(&path) {
            Ok(text) => {
                let stored: Stored = serde_json::from_str(&text)
                    .map_err(|e| format!("{}: not a device identity: {e}", path.display()))?;
                let pkcs8 = B64.decode(&stored.pkcs8).map_err(|e| format!("{}: {e}", path.display()))?;
                let pair = Ed25519KeyPair::from_pkcs8(&pkcs8)
                    .map_err(|_| format!("{}: the key is not an ed25519 key pair", path.display()))?;
                let device_id = device_id(pair.public_key().as_ref());
                if device_id != stored.device_id {
                    return Err(format!("{}: the device id does not match its key", path.display()));
                }
                Ok(Self { pair, device_id, dir })
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let rng = ring::rand::SystemRandom::new();
                let pkcs8 =
                    Ed25519KeyPair::generate_pkcs8(&rng).map_err(|_| "could not make a device key".to_owned())?;
                let pair =
                    Ed25519KeyPair::from_pkcs8(pkcs8.as_ref()).map_err(|_| "could not use the new device key")?;
                let public = pair.public_key().as_ref().to_vec();
                let stored = Stored {
                    version: 1,
                    device_id: device_id(&public),
                    public_key: B64.encode(&public),
                    pkcs8: B64.encode(pkcs8.as_ref()),
                };
                write_private(&dir, &path, &serde_json::to_string_pretty(&stored).unwrap_or_default())?;
                Ok(Self { device_id: stored.device_id, pair, dir })
            }
            Err(e) => Err(format!("{}: {e}", path.display())),
        }
    }

    /// The `device` object of a `connect`, signed: `v3|id|client|mode|role|scopes|signedAt|token|nonce|platform|family`
    /// (`v2` stops after the nonce).
    #[allow(clippy::too_many_arguments)]
    pub fn proof(
        &self,
        version: &str,
        client: &ClientInfo,
        role: &str,
        scopes: &[String],
        signed_at: i64,
        token: Option<&str>,
        nonce: &str,
    ) -> DeviceSignature {
        let payload = DeviceProof {
            version,
            device_id: &self.device_id,
            client_id: &client.id,
            client_mode: &client.mode,
            role,
            scopes,
            signed_at,
            token,
            nonce,
            platform: &client.platform,
            family: client.device_family.as_deref().unwrap_or_default(),
        }
        .payload();
        DeviceSignature {
            id: self.device_id.clone(),
            public_key: B64.encode(self.pair.public_key().as_ref()),
            signature: B64.encode(self.pair.sign(payload.as_bytes()).as_ref()),
            signed_at,
            nonce: nonce.to_owned(),
        }
    }

    fn tokens_path(&self) -> PathBuf {
        self.dir.join("device-tokens.json")
    }

    fn tokens(&self) -> BTreeMap<String, DeviceToken> {
        std::fs::read_to_string(self.tokens_path()).ok().and_then(|t| serde_json::from_str(&t).ok()).unwrap_or_default()
    }

    /// The device token the gateway at `url` gave this device, if any.
    pub fn device_token(&self, url: &str) -> Option<DeviceToken> {
        self.tokens().remove(url)
    }

    /// Keeps (or, with `None`, forgets) the device token of the gateway at `url`.
    pub fn set_device_token(&self, url: &str, token: Option<DeviceToken>) {
        let mut all = self.tokens();
        let changed = match token {
            Some(t) => all.insert(url.to_owned(), t.clone()).as_ref() != Some(&t),
            None => all.remove(url).is_some(),
        };
        if changed
            && let Err(e) =
                write_private(&self.dir, &self.tokens_path(), &serde_json::to_string_pretty(&all).unwrap_or_default())
        {
            tracing::warn!(error = %e, "could not keep the gateway's device token");
        }
    }
}

/// SHA-256 of the raw public key, hex.
pub fn device_id(public_key: &[u8]) -> String {
    ring::digest::digest(&ring::digest::SHA256, public_key).as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

/// Writes `text` to `path` readable by the owner only (through a temporary file, renamed).
fn write_private(dir: &Path, path: &Path, text: &str) -> Result<(), String> {
    use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _};
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?;
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)
        .map_err(|e| format!("{}: {e}", tmp.display()))?;
    file.write_all(text.as_bytes()).and_then(|()| file.sync_all()).map_err(|e| format!("{}: {e}", tmp.display()))?;
    std::fs::rename(&tmp, path).map_err(|e| format!("{}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_identity_is_made_once_kept_private_and_signs_verifiably() {
        use std::os::unix::fs::PermissionsExt as _;
        let home = tempfile::tempdir().unwrap();
        let first = Identity::load_or_create(home.path()).unwrap();
        let again = Identity::load_or_create(home.path()).unwrap();
        assert_eq!(first.device_id, again.device_id);
        assert_eq!(first.device_id.len(), 64);
        let mode = std::fs::metadata(home.path().join("identity/device.json")).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let client = ClientInfo {
            id: "cli".into(),
            mode: "cli".into(),
            platform: "Linux".into(),
            device_family: Some("Linux".into()),
            ..ClientInfo::default()
        };
        let scopes = vec!["operator.admin".to_owned()];
        let proof = first.proof("v3", &client, "operator", &scopes, 17, Some("T"), "n1");
        let key = B64.decode(&proof.public_key).unwrap();
        assert_eq!(device_id(&key), first.device_id);
        let signature = B64.decode(&proof.signature).unwrap();
        let payload = format!("v3|{}|cli|cli|operator|operator.admin|17|T|n1|linux|linux", first.device_id);
        let verifier = ring::signature::UnparsedPublicKey::new(&ring::signature::ED25519, &key);
        assert!(verifier.verify(payload.as_bytes(), &signature).is_ok());
        // Tokens per gateway.
        let t = DeviceToken { token: "dt".into(), role: "operator".into(), scopes: scopes.clone() };
        first.set_device_token("ws://a", Some(t.clone()));
        assert_eq!(again.device_token("ws://a"), Some(t));
        assert_eq!(again.device_token("ws://b"), None);
        first.set_device_token("ws://a", None);
        assert_eq!(again.device_token("ws://a"), None);
        // A damaged file is an error that names it, never a new identity over it.
        std::fs::write(home.path().join("identity/device.json"), "{").unwrap();
        assert!(Identity::load_or_create(home.path()).err().unwrap().contains("device.json"));
    }
}
