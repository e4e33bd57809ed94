//! The handshake: a `connect` request checked as the reference gateway checks it — params, protocol
//! range, role, the shared token (compared in constant time, a mismatch answered late), and a
//! device identity proof when one is sent (ed25519 over the v3 or v2 payload, the device id the
//! SHA-256 of its key, the challenge's nonce, 120 s of skew) — then `hello-ok`.

use acp_protocol::gateway::{self, ErrorShape, Frame, PROTOCOL_VERSION, code};
use base64::Engine as _;
use serde_json::{Map, Value, json};

use super::Gateway;
use super::hub::now_ms;

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
    pub info: Value,
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

/// Checks a `connect`; `Ok` carries the client and the `hello-ok` payload.
pub async fn connect(
    gw: &Gateway,
    id: &str,
    params: &Value,
    challenge: &Challenge,
) -> Result<(Client, Value), Refusal> {
    let policy = gateway::close::POLICY;
    let params = gateway::check_params("connect", &gateway::connect_schema(), params)
        .map_err(|message| Refusal::answered(id, ErrorShape::invalid(message), policy))?;
    let int = |k: &str| params.get(k).and_then(Value::as_u64).unwrap_or(0);
    let (min, max) = (int("minProtocol"), int("maxProtocol"));
    if !(min..=max).contains(&PROTOCOL_VERSION) {
        let error = ErrorShape::invalid("protocol mismatch").with_details(json!({
            "code": "PROTOCOL_MISMATCH", "clientMinProtocol": min, "clientMaxProtocol": max,
            "expectedProtocol": PROTOCOL_VERSION, "minimumProbeProtocol": gateway::MIN_PROBE_PROTOCOL,
        }));
        return Err(Refusal::answered(id, error, gateway::close::PROTOCOL));
    }
    let role = params.get("role").and_then(Value::as_str).unwrap_or("operator").to_owned();
    if role != "operator" {
        return Err(Refusal::answered(id, ErrorShape::invalid("invalid role"), policy));
    }
    let client = params.get("client").cloned().unwrap_or_default();
    let field = |k: &str| client.get(k).and_then(Value::as_str).unwrap_or_default().to_owned();
    let scopes: Vec<String> = match params.get("scopes").and_then(Value::as_array) {
        Some(list) => list.iter().filter_map(Value::as_str).map(str::to_owned).collect(),
        None => vec![READ.to_owned(), WRITE.to_owned()],
    };
    let auth = params.get("auth").and_then(Value::as_object);
    let auth_text = |k: &str| auth.and_then(|a| a.get(k)).and_then(Value::as_str).filter(|t| !t.is_empty());
    let (token, device_token) = (auth_text("token"), auth_text("deviceToken"));
    let device = params.get("device").and_then(Value::as_object);
    // The device proof signs the token the client authenticates with: the shared one, else its
    // device token.
    let device_id = match device {
        None => None,
        Some(device) => {
            let signed = token.or(device_token);
            match verify_device(device, &field("id"), &field("mode"), &role, &scopes, signed, &client, challenge) {
                Ok(id) => Some(id),
                Err(why) => {
                    let error = ErrorShape::new(code::NOT_PAIRED, format!("device identity rejected: {why}"))
                        .with_details(json!({"code": "DEVICE_AUTH_INVALID", "reason": why}));
                    return Err(Refusal::answered(id, error, policy));
                }
            }
        }
    };
    if let Some(expected) = &gw.token {
        let shared = token.is_some_and(|given| same(expected, given));
        // A device token stands in for the shared token, for the signed device it was issued to.
        let paired = match (&device_id, device_token) {
            (Some(device), Some(given)) => same(&device_token_for(expected, device, &role), given),
            _ => false,
        };
        if !shared && !paired {
            if auth.is_none() && device.is_none() {
                let error = ErrorShape::new(code::NOT_PAIRED, "device identity required")
                    .with_details(json!({"code": "DEVICE_IDENTITY_REQUIRED"}));
                return Err(Refusal::answered(id, error, policy));
            }
            // Answered late, as the reference does: guessing tokens is slow.
            tokio::time::sleep(std::time::Duration::from_millis(300)).await;
            let error = ErrorShape::invalid(
                "unauthorized: gateway token mismatch (use this gateway's token: acp gateway --token, ACP_GATEWAY_TOKEN or [gateway] token)",
            )
            .with_details(json!({"code": "AUTH_TOKEN_MISMATCH", "authReason": "token_mismatch",
                "canRetryWithDeviceToken": false, "recommendedNextStep": "update_auth_credentials"}));
            return Err(Refusal::answered(id, error, policy));
        }
    }
    let conn_id = uuid::Uuid::new_v4().to_string();
    let accepted =
        Client { conn_id, client_id: field("id"), mode: field("mode"), role, scopes, device_id, info: client };
    let hello = gw.hello(&accepted);
    Ok((accepted, hello))
}

/// The device token a signed device gets in `hello-ok` and may present instead of the shared
/// token: an HMAC of its id and role under the shared token, so nothing is stored, and changing
/// the shared token revokes every device token at once.
pub fn device_token_for(shared: &str, device_id: &str, role: &str) -> String {
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, shared.as_bytes());
    let tag = ring::hmac::sign(&key, format!("acp-device-token|v1|{device_id}|{role}").as_bytes());
    format!("acpdt1.{}", base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(tag.as_ref()))
}

/// Compares without stopping at the first difference.
pub(crate) fn same(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().zip(b.bytes()).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The signed payload of a device proof, `v3` (with platform and family) or `v2`.
#[allow(clippy::too_many_arguments)]
pub fn proof_payload(
    version: &str,
    device_id: &str,
    client_id: &str,
    mode: &str,
    role: &str,
    scopes: &[String],
    signed_at: i64,
    token: Option<&str>,
    nonce: &str,
    platform: &str,
    family: &str,
) -> String {
    let mut text = format!(
        "{version}|{device_id}|{client_id}|{mode}|{role}|{}|{signed_at}|{}|{nonce}",
        scopes.join(","),
        token.unwrap_or("")
    );
    if version == "v3" {
        text.push_str(&format!("|{}|{}", platform.to_lowercase(), family.to_lowercase()));
    }
    text
}

/// How far a proof's time may be from ours.
const SKEW_MS: i64 = 120_000;

#[allow(clippy::too_many_arguments)]
fn verify_device(
    device: &Map<String, Value>,
    client_id: &str,
    mode: &str,
    role: &str,
    scopes: &[String],
    token: Option<&str>,
    client: &Value,
    challenge: &Challenge,
) -> Result<String, String> {
    let text = |k: &str| device.get(k).and_then(Value::as_str).unwrap_or_default();
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let key =
        b64.decode(text("publicKey").trim_end_matches('=')).map_err(|_| "publicKey is not base64url".to_owned())?;
    if key.len() != 32 {
        return Err("publicKey is not a 32-byte ed25519 key".into());
    }
    let digest = ring::digest::digest(&ring::digest::SHA256, &key);
    let id: String = digest.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    if id != text("id") {
        return Err("the device id is not the SHA-256 of its key".into());
    }
    if text("nonce") != challenge.nonce {
        return Err("the nonce is not this connection's challenge".into());
    }
    let signed_at = device.get("signedAt").and_then(Value::as_i64).unwrap_or_default();
    if (signed_at - now_ms()).abs() > SKEW_MS {
        return Err("the signature's time is too far from the gateway's".into());
    }
    let signature =
        b64.decode(text("signature").trim_end_matches('=')).map_err(|_| "signature is not base64url".to_owned())?;
    let platform = client.get("platform").and_then(Value::as_str).unwrap_or_default();
    let family = client.get("deviceFamily").and_then(Value::as_str).unwrap_or_default();
    let verifier = ring::signature::UnparsedPublicKey::new(&ring::signature::ED25519, &key);
    for version in ["v3", "v2"] {
        let payload = proof_payload(
            version,
            &id,
            client_id,
            mode,
            role,
            scopes,
            signed_at,
            token,
            &challenge.nonce,
            platform,
            family,
        );
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
        assert_eq!(
            proof_payload("v3", "abc", "cli", "cli", "operator", &scopes, 17, Some("T"), "n1", "Linux", "Linux"),
            "v3|abc|cli|cli|operator|operator.admin|17|T|n1|linux|linux"
        );
        assert_eq!(
            proof_payload("v2", "abc", "cli", "cli", "operator", &scopes, 17, None, "n1", "linux", ""),
            "v2|abc|cli|cli|operator|operator.admin|17||n1"
        );
        assert!(same("token", "token") && !same("token", "tokex") && !same("t", "to"));
    }

    #[test]
    fn device_tokens_are_per_device_and_role_and_die_with_the_shared_token() {
        let t = device_token_for("shared", "dev1", "operator");
        assert!(t.starts_with("acpdt1.") && t.len() > 40);
        assert_eq!(t, device_token_for("shared", "dev1", "operator"));
        assert_ne!(t, device_token_for("shared", "dev2", "operator"));
        assert_ne!(t, device_token_for("shared", "dev1", "node"));
        assert_ne!(t, device_token_for("rotated", "dev1", "operator"));
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
        let client = json!({"id": "cli", "mode": "cli", "platform": "linux", "deviceFamily": "Linux"});
        let sign = |version: &str, nonce: &str| {
            let payload = proof_payload(
                version,
                &id,
                "cli",
                "cli",
                "operator",
                &scopes,
                challenge.ts,
                Some("T"),
                nonce,
                "linux",
                "Linux",
            );
            b64.encode(pair.sign(payload.as_bytes()).as_ref())
        };
        let device = |signature: String, nonce: &str| {
            json!({"id": id, "publicKey": b64.encode(&public), "signature": signature, "signedAt": challenge.ts, "nonce": nonce})
                .as_object()
                .cloned()
                .unwrap()
        };
        let check = |d: &Map<String, Value>| {
            verify_device(d, "cli", "cli", "operator", &scopes, Some("T"), &client, &challenge)
        };
        assert_eq!(check(&device(sign("v3", "n1"), "n1")), Ok(id.clone()));
        assert_eq!(check(&device(sign("v2", "n1"), "n1")), Ok(id.clone()), "v2 is still accepted");
        assert_eq!(check(&device(sign("v3", "n2"), "n2")).unwrap_err(), "the nonce is not this connection's challenge");
        let mut other = device(sign("v3", "n1"), "n1");
        other.insert("id".into(), json!("00"));
        assert_eq!(check(&other).unwrap_err(), "the device id is not the SHA-256 of its key");
        let wrong = verify_device(
            &device(sign("v3", "n1"), "n1"),
            "cli",
            "cli",
            "operator",
            &scopes,
            Some("X"),
            &client,
            &challenge,
        );
        assert_eq!(wrong.unwrap_err(), "the signature does not match", "the token is part of what is signed");
    }
}
