//! The handshake: a `connect` request checked as the reference gateway checks it — params, protocol
//! range, role, the shared token (compared in constant time, a mismatch answered late), and a
//! device identity proof when one is sent (ed25519 over the v3 or v2 payload, the device id the
//! SHA-256 of its key, the challenge's nonce, 120 s of skew) — then `hello-ok`.

use acp_protocol::gateway::methods::{ClientInfo, ConnectParams, DeviceSignature};
use acp_protocol::gateway::{self, DeviceProof, ErrorShape, Frame, PROTOCOL_VERSION};
use base64::Engine as _;
use serde_json::Value;

use super::guard::Access;
use crate::clock::now_ms;

/// The scopes a connection may hold; each includes those after it.
pub const ADMIN: &str = "operator.admin";
pub const WRITE: &str = "operator.write";
pub const READ: &str = "operator.read";
pub const APPROVALS: &str = "operator.approvals";

/// Who connected, once accepted.
#[derive(Debug, Clone)]
pub struct Client {
    pub conn_id: String,
    pub client_id: String,
    pub mode: String,
    pub role: String,
    pub scopes: Vec<String>,
    /// The verified device identity, if it signed the connect.
    pub device_id: Option<String>,
    /// What it told about itself (`client.version`, `platform`, …), for presence.
    pub info: ClientInfo,
    /// The scopes a device token given to it covers (none on a gateway without a token).
    pub token_scopes: Option<Vec<String>>,
}

impl Client {
    /// Whether it holds `scope` (admin holds all, write holds read).
    pub fn may(&self, scope: &str) -> bool {
        let has = |s: &str| self.scopes.iter().any(|x| x == s);
        has(ADMIN) || has(scope) || (scope == READ && has(WRITE))
    }
}

/// A refused handshake: the response to send (if any), then the close.
#[derive(Debug)]
pub struct Refusal {
    pub response: Option<Frame>,
    pub close: u16,
    pub reason: String,
}

impl Refusal {
    fn answered(id: &str, error: ErrorShape, close: u16) -> Self {
        let reason = error.message.clone();
        Self { response: Some(Frame::err(id, error)), close, reason }
    }
}

/// The challenge sent on open.
pub struct Challenge {
    pub nonce: String,
    pub ts: i64,
}

/// Checks a `connect` against who may connect (`access`); `Ok` carries the client. `browser`:
/// the connection came from a web page, which needs a token even on a gateway without one (the
/// browser token, see `guard::browser_token`).
pub async fn connect(
    access: &Access,
    id: &str,
    params: &Value,
    challenge: &Challenge,
    browser: bool,
) -> Result<Client, Refusal> {
    let policy = gateway::close::POLICY;
    let params = gateway::check_params("connect", &gateway::connect_schema(), params)
        .map_err(|message| Refusal::answered(id, ErrorShape::invalid(message), policy))?;
    let asked_scopes = params.contains_key("scopes");
    let params: ConnectParams = serde_json::from_value(Value::Object(params))
        .map_err(|e| Refusal::answered(id, ErrorShape::invalid(format!("invalid connect params: {e}")), policy))?;
    let (min, max) = (params.min_protocol, params.max_protocol);
    if !(min..=max).contains(&PROTOCOL_VERSION) {
        return Err(Refusal::answered(id, ErrorShape::protocol_mismatch(min, max), gateway::close::PROTOCOL));
    }
    let role = params.role.clone().unwrap_or_else(|| "operator".into());
    if role != "operator" {
        return Err(Refusal::answered(id, ErrorShape::invalid("invalid role"), policy));
    }
    let client = params.client;
    let scopes: Vec<String> = params.scopes.unwrap_or_else(|| vec![READ.to_owned(), WRITE.to_owned()]);
    let auth = params.auth.as_ref();
    let (token, device_token) = (auth.and_then(|a| a.token()), auth.and_then(|a| a.device_token()));
    let device = params.device.as_ref();
    // The device proof signs the token the client authenticates with: the shared one, else its
    // device token.
    let device_id = match device {
        None => None,
        Some(device) => {
            let signed = token.or(device_token);
            match verify_device(device, &role, &scopes, signed, &client, challenge) {
                Ok(id) => Some(id),
                Err(why) => return Err(Refusal::answered(id, ErrorShape::device_rejected(&why), policy)),
            }
        }
    };
    let expected = match (&access.token, &access.browser_token) {
        (Some(shared), _) => Some(shared),
        (None, Some(for_browsers)) if browser => Some(for_browsers),
        _ => None,
    };
    let mut scopes = scopes;
    let mut issued = None;
    if let Some(expected) = expected {
        let shared = token.is_some_and(|given| {
            same(expected, given) || access.owner_token.as_deref().is_some_and(|owner| same(owner, given))
        });
        // A device token stands in for the shared token, for the signed device it was issued to,
        // and for no more than the scopes it was issued for.
        let paired = match (&device_id, device_token, &access.token) {
            (Some(device), Some(given), Some(secret)) if !shared => check_device_token(secret, device, &role, given),
            _ => None,
        };
        // Asking nothing in particular: what the token covers of the default.
        if !asked_scopes && let Some(granted) = &paired {
            scopes.retain(|s| granted.iter().any(|g| covers(g, s)));
        }
        if let Some(granted) = &paired
            && let Some(wider) = scopes.iter().find(|s| !granted.iter().any(|g| covers(g, s)))
        {
            let message = format!(
                "unauthorized: this device token was issued for {} and does not cover `{wider}`; \
                 connect with the gateway's token to get one that does",
                granted.join(", ")
            );
            let error = ErrorShape::scope_mismatch(message, granted, &scopes);
            return Err(Refusal::answered(id, error, policy));
        }
        if !shared && paired.is_none() {
            if auth.is_none() && device.is_none() {
                return Err(Refusal::answered(id, ErrorShape::identity_required(), policy));
            }
            // Answered late, as the reference does: guessing tokens is slow.
            tokio::time::sleep(std::time::Duration::from_millis(300)).await;
            let hint = if access.token.is_some() {
                "use this gateway's token: --token-file, ACP_GATEWAY_TOKEN or [gateway] token"
            } else {
                "open the web chat with the link acp gateway printed, or see $ACP_HOME/webchat.token"
            };
            // No token at all (a device alone, unknown here) is told apart from a wrong one.
            let sent_any = token.is_some() || device_token.is_some() || auth.and_then(|a| a.password()).is_some();
            return Err(Refusal::answered(id, ErrorShape::unauthorized(!sent_any, hint), policy));
        }
        // The device token it gets: the one it came with (its scopes, however few it asks for
        // now), else one for what it asked with the shared token.
        issued = Some(paired.unwrap_or_else(|| scopes.clone()));
    }
    let conn_id = uuid::Uuid::new_v4().to_string();
    let accepted = Client {
        conn_id,
        client_id: client.id.clone(),
        mode: client.mode.clone(),
        role,
        scopes,
        device_id,
        info: client,
        token_scopes: issued,
    };
    Ok(accepted)
}

/// Whether holding scope `held` grants `wanted` (admin grants all, write grants read).
pub fn covers(held: &str, wanted: &str) -> bool {
    held == wanted || held == ADMIN || (held == WRITE && wanted == READ)
}

/// The device token a signed device gets in `hello-ok` and may present instead of the shared
/// token: the scopes it was issued for, and an HMAC of them with the device's id and role under
/// the shared token — so nothing is stored, it is useless to any other device, it never grants
/// more than it was issued for, and changing the shared token revokes every device token at once.
pub fn device_token_for(shared: &str, device_id: &str, role: &str, scopes: &[String]) -> String {
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let mut scopes: Vec<&str> = scopes.iter().map(String::as_str).collect();
    scopes.sort_unstable();
    scopes.dedup();
    let scopes = scopes.join(",");
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, shared.as_bytes());
    let tag = ring::hmac::sign(&key, format!("acp-device-token|v2|{device_id}|{role}|{scopes}").as_bytes());
    format!("acpdt2.{}.{}", b64.encode(scopes), b64.encode(tag.as_ref()))
}

/// The scopes device token `given` was issued for, if it is this device's (and role's) under
/// `shared`.
pub fn check_device_token(shared: &str, device_id: &str, role: &str, given: &str) -> Option<Vec<String>> {
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let mut parts = given.strip_prefix("acpdt2.")?.split('.');
    let (Some(scopes), Some(_), None) = (parts.next(), parts.next(), parts.next()) else { return None };
    let scopes = String::from_utf8(b64.decode(scopes).ok()?).ok()?;
    let scopes: Vec<String> = scopes.split(',').filter(|s| !s.is_empty()).map(str::to_owned).collect();
    same(&device_token_for(shared, device_id, role, &scopes), given).then_some(scopes)
}

/// Compares without stopping at the first difference.
pub(crate) fn same(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().zip(b.bytes()).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// How far a proof's time may be from ours.
const SKEW_MS: i64 = 120_000;

fn verify_device(
    device: &DeviceSignature,
    role: &str,
    scopes: &[String],
    token: Option<&str>,
    client: &ClientInfo,
    challenge: &Challenge,
) -> Result<String, String> {
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let key =
        b64.decode(device.public_key.trim_end_matches('=')).map_err(|_| "publicKey is not base64url".to_owned())?;
    if key.len() != 32 {
        return Err("publicKey is not a 32-byte ed25519 key".into());
    }
    let digest = ring::digest::digest(&ring::digest::SHA256, &key);
    let id: String = digest.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    if id != device.id {
        return Err("the device id is not the SHA-256 of its key".into());
    }
    if device.nonce != challenge.nonce {
        return Err("the nonce is not this connection's challenge".into());
    }
    let signed_at = device.signed_at;
    if (signed_at - now_ms()).abs() > SKEW_MS {
        return Err("the signature's time is too far from the gateway's".into());
    }
    let signature =
        b64.decode(device.signature.trim_end_matches('=')).map_err(|_| "signature is not base64url".to_owned())?;
    let (platform, family) = (client.platform.as_str(), client.device_family.as_deref().unwrap_or_default());
    let verifier = ring::signature::UnparsedPublicKey::new(&ring::signature::ED25519, &key);
    for version in ["v3", "v2"] {
        let payload = DeviceProof {
            version,
            device_id: &id,
            client_id: &client.id,
            client_mode: &client.mode,
            role,
            scopes,
            signed_at,
            token,
            nonce: &challenge.nonce,
            platform,
            family,
        }
        .payload();
        if verifier.verify(payload.as_bytes(), &signature).is_ok() {
            return Ok(id);
        }
    }
    Err("the signature does not match".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proof_payloads_as_captured() {
        let scopes = vec!["operator.admin".to_owned()];
        let proof = |version, token, platform, family| DeviceProof {
            version,
            device_id: "abc",
            client_id: "cli",
            client_mode: "cli",
            role: "operator",
            scopes: &scopes,
            signed_at: 17,
            token,
            nonce: "n1",
            platform,
            family,
        };
        assert_eq!(
            proof("v3", Some("T"), "Linux", "Linux").payload(),
            "v3|abc|cli|cli|operator|operator.admin|17|T|n1|linux|linux"
        );
        assert_eq!(proof("v2", None, "linux", "").payload(), "v2|abc|cli|cli|operator|operator.admin|17||n1");
        assert!(same("token", "token") && !same("token", "tokex") && !same("t", "to"));
    }

    #[test]
    fn device_tokens_are_per_device_role_and_scopes_and_die_with_the_shared_token() {
        let scopes = vec![READ.to_owned(), WRITE.to_owned()];
        let t = device_token_for("shared", "dev1", "operator", &scopes);
        assert!(t.starts_with("acpdt2.") && t.len() > 40);
        assert_eq!(check_device_token("shared", "dev1", "operator", &t), Some(vec![READ.to_owned(), WRITE.to_owned()]));
        assert_eq!(check_device_token("shared", "dev2", "operator", &t), None);
        assert_eq!(check_device_token("shared", "dev1", "node", &t), None);
        assert_eq!(check_device_token("rotated", "dev1", "operator", &t), None);
        // Its scopes cannot be rewritten: the tag covers them.
        let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        let tag = t.rsplit('.').next().unwrap();
        let forged = format!("acpdt2.{}.{tag}", b64.encode(ADMIN));
        assert_eq!(check_device_token("shared", "dev1", "operator", &forged), None);
        assert_eq!(check_device_token("shared", "dev1", "operator", "acpdt1.old"), None);
        assert!(covers(ADMIN, APPROVALS) && covers(WRITE, READ) && !covers(READ, WRITE) && !covers(WRITE, ADMIN));
    }

    #[test]
    fn a_signed_device_is_verified() {
        use ring::signature::KeyPair as _;
        let rng = ring::rand::SystemRandom::new();
        let pkcs8 = ring::signature::Ed25519KeyPair::generate_pkcs8(&rng).unwrap();
        let pair = ring::signature::Ed25519KeyPair::from_pkcs8(pkcs8.as_ref()).unwrap();
        let public = pair.public_key().as_ref().to_vec();
        let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        let id: String =
            ring::digest::digest(&ring::digest::SHA256, &public).as_ref().iter().map(|b| format!("{b:02x}")).collect();
        let challenge = Challenge { nonce: "n1".into(), ts: now_ms() };
        let scopes = vec!["operator.admin".to_owned()];
        let client = ClientInfo {
            id: "cli".into(),
            mode: "cli".into(),
            platform: "linux".into(),
            device_family: Some("Linux".into()),
            ..ClientInfo::default()
        };
        let sign = |version: &str, nonce: &str| {
            let payload = DeviceProof {
                version,
                device_id: &id,
                client_id: "cli",
                client_mode: "cli",
                role: "operator",
                scopes: &scopes,
                signed_at: challenge.ts,
                token: Some("T"),
                nonce,
                platform: "linux",
                family: "Linux",
            }
            .payload();
            b64.encode(pair.sign(payload.as_bytes()).as_ref())
        };
        let device = |signature: String, nonce: &str| DeviceSignature {
            id: id.clone(),
            public_key: b64.encode(&public),
            signature,
            signed_at: challenge.ts,
            nonce: nonce.into(),
        };
        let check = |d: &DeviceSignature| verify_device(d, "operator", &scopes, Some("T"), &client, &challenge);
        assert_eq!(check(&device(sign("v3", "n1"), "n1")), Ok(id.clone()));
        assert_eq!(check(&device(sign("v2", "n1"), "n1")), Ok(id.clone()), "v2 is still accepted");
        assert_eq!(check(&device(sign("v3", "n2"), "n2")).unwrap_err(), "the nonce is not this connection's challenge");
        let mut other = device(sign("v3", "n1"), "n1");
        other.id = "00".into();
        assert_eq!(check(&other).unwrap_err(), "the device id is not the SHA-256 of its key");
        let wrong = verify_device(&device(sign("v3", "n1"), "n1"), "operator", &scopes, Some("X"), &client, &challenge);
        assert_eq!(wrong.unwrap_err(), "the signature does not match", "the token is part of what is signed");
    }
}
