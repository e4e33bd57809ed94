//! Which model and credential answer each request of a turn, and what happens when one fails.
//!
//! A turn's candidates are the session's model, then `fallbacks` in order; each is tried with
//! one of its provider's credentials (auth profiles): the one the session holds, else the next in
//! turn (`round-robin`) or the last that answered (`last-good`). A failure is classified and acted
//! on ([`action`]): a refused, spent or rate-limited key cools down and the next credential is
//! tried; an overloaded, unknown or unreachable model cools down and the next model is tried; a
//! passing failure (a 5xx, a timeout, a cut stream) is retried once on the same model first; an
//! overflowing context is handed back to the turn (which compacts); a request the provider calls
//! wrong is given up on. Cool-downs grow with repeated failure and outlive the process
//! ([`crate::models::ModelState`]); a cooling candidate is passed over while another can answer,
//! and tried again once its time is up. With nothing else to try, the retry policy of one model
//! holds (`[retry]`), as it always did. Nothing is tried again once output reached the user.
//!
//! A turn that moves to another model says so once (a notice the surfaces mark as a failover),
//! stays on it for the rest of the turn, and records which model answered.

use std::collections::HashMap;
use std::sync::Mutex;

use tokio_util::sync::CancellationToken;

use super::event::{Emitter, EventKind, TurnError};
use super::shared::Shared;
use crate::config::models::AuthProfile;
use crate::config::{Config, ModelInfo, ModelRef, ProviderConfig, RetryConfig};
use crate::models::ModelState;
use crate::providers::retry::{self, Attempt, Failure, StreamSink};
use crate::providers::{ErrorKind, ModelRequest, ProviderClient, ProviderError, ResponseEvent};
use crate::store::now_ms;
use crate::sync::lock;

/// What is done after a failure of each kind (before anything reached the user).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// The key is at fault: the next credential, else the next model.
    NextProfile,
    /// The model or its provider is: the next model.
    NextModel,
    /// Perhaps a passing fault: once more on the same model, then the next model.
    RetryThenNext,
    /// The context overflowed: the turn compacts and sends again.
    Compact,
    /// The request itself is wrong; another model would not take it either.
    GiveUp,
}

/// The action for a failure of `kind` (docs/models.md has the table).
pub fn action(kind: ErrorKind) -> Action {
    match kind {
        ErrorKind::Auth | ErrorKind::PermissionDenied | ErrorKind::Billing | ErrorKind::RateLimited => {
            Action::NextProfile
        }
        ErrorKind::Overloaded | ErrorKind::NotFound => Action::NextModel,
        ErrorKind::Server | ErrorKind::Connect | ErrorKind::Timeout | ErrorKind::Truncated | ErrorKind::Protocol => {
            Action::RetryThenNext
        }
        ErrorKind::ContextLength => Action::Compact,
        ErrorKind::InvalidRequest => Action::GiveUp,
    }
}

/// The credentials a session holds, by provider (kept while it is open).
#[derive(Debug, Default)]
pub(crate) struct Held(Mutex<HashMap<String, String>>);

impl Held {
    pub(crate) fn get(&self, provider: &str) -> Option<String> {
        lock(&self.0).get(provider).cloned()
    }

    fn set(&self, provider: &str, profile: &str) {
        lock(&self.0).insert(provider.to_owned(), profile.to_owned());
    }
}

/// One candidate of the chain, with the credential to use.
struct Pick<'c> {
    index: usize,
    model: &'c ModelRef,
    provider: &'c ProviderConfig,
    profile: Option<&'c AuthProfile>,
}

/// What a request is sent to.
struct Target {
    index: usize,
    model: ModelRef,
    info: ModelInfo,
    client: ProviderClient,
    /// (profile id, key fingerprint).
    profile: Option<(String, String)>,
}

#[derive(Default)]
struct Route {
    /// The chain's candidate the turn is at (it never goes back within a turn).
    at: usize,
    /// Whether the user was told of a move to another model.
    told: bool,
    /// The model that last answered.
    answered: Option<ModelRef>,
    /// Where round-robin starts, by provider, for this turn.
    turn: HashMap<String, usize>,
    /// The models the last request tried and how each failed, in order.
    tried: Vec<(String, &'static str)>,
}

/// A turn's way to its models.
pub(crate) struct Router<'a> {
    shared: &'a Shared,
    config: &'a Config,
    state: &'a ModelState,
    held: &'a Held,
    events: &'a Emitter,
    /// The session's model, then the usable fallbacks.
    chain: Vec<ModelRef>,
    /// The session's model's limits (what the turn's context is measured against).
    primary: ModelInfo,
    route: Mutex<Route>,
}

impl<'a> Router<'a> {
    /// The chain for a session on `model`; an error when that model cannot be used.
    pub(crate) fn new(
        shared: &'a Shared,
        config: &'a Config,
        model: &ModelRef,
        held: &'a Held,
        events: &'a Emitter,
    ) -> Result<Self, TurnError> {
        let (first, provider) =
            config.resolve_model(&model.to_string()).map_err(|e| TurnError::config(e.to_string()))?;
        let primary = provider.model(&first.model);
        let mut chain = vec![first];
        for reference in &config.fallbacks {
            match config.resolve_model(reference) {
                Ok((r, _)) if !chain.contains(&r) => chain.push(r),
                Ok(_) => {}
                Err(e) => tracing::debug!(fallback = %reference, error = %e, "a fallback cannot be used now"),
            }
        }
        Ok(Self { shared, config, state: &shared.models, held, events, chain, primary, route: Mutex::default() })
    }

    /// The session's model's limits.
    pub(crate) fn primary(&self) -> &ModelInfo {
        &self.primary
    }

    /// The model that answered the turn's last request, when it was not the session's own.
    pub(crate) fn answered(&self) -> Option<ModelRef> {
        lock(&self.route).answered.clone()
    }

    /// Sends `request` to the best candidate, moving along the chain as failures say, and
    /// streams the reply into `sink`. `request.model` and its output limit are the candidate's
    /// (the limit at most `cap`).
    pub(crate) async fn stream(
        &self,
        request: &ModelRequest<'_>,
        cap: Option<u32>,
        policy: &RetryConfig,
        cancel: &CancellationToken,
        sink: &mut impl StreamSink,
    ) -> Result<(), Failure> {
        // Candidates (or one of their credentials: `Some(profile)`) this request gave up on.
        let mut excluded: Vec<(usize, Option<String>)> = Vec::new();
        // Those a failure was held against already: a retry's failure is not another in a row.
        let mut blamed: Vec<(usize, Option<String>)> = Vec::new();
        lock(&self.route).tried.clear();
        let mut retries = 0;
        let mut same: Option<Target> = None;
        let mut tries_here = 0;
        let mut last: Option<ProviderError> = None;
        loop {
            let target = match same.take() {
                Some(target) => target,
                None => {
                    let pick = self.pick(&excluded);
                    let Some(pick) = pick else {
                        let error = last.take().unwrap_or_else(|| {
                            ProviderError::new(ErrorKind::InvalidRequest, "no model could be tried")
                        });
                        return Err(Failure::Provider(error));
                    };
                    tries_here = 0;
                    match self.target(&pick).await {
                        Ok(target) => target,
                        Err(e) => {
                            return Err(Failure::Provider(ProviderError::new(ErrorKind::Connect, e.message)));
                        }
                    }
                }
            };
            self.announce(&target, last.as_ref());
            let mut sized = request.clone();
            sized.model = &target.info.id;
            sized.max_output_tokens = match cap {
                Some(cap) => Some(target.info.max_output_tokens.unwrap_or(cap).min(cap)),
                None => target.info.max_output_tokens,
            };
            let (error, emitted) = match retry::attempt(&target.client, &sized, cancel, sink).await {
                Attempt::Done => {
                    self.succeeded(&target).written().await;
                    return Ok(());
                }
                Attempt::Cancelled => return Err(Failure::Cancelled),
                Attempt::Failed { error, delivered, emitted } => {
                    let key = (target.index, target.profile.as_ref().map(|(id, _)| id.clone()));
                    if !blamed.contains(&key) {
                        blamed.push(key);
                        self.failed(&target, &error).written().await;
                    }
                    if delivered {
                        return Err(Failure::Provider(error));
                    }
                    (error, emitted)
                }
            };
            if emitted {
                sink.event(ResponseEvent::Restarted);
            }
            let action = action(error.kind);
            let key = match action {
                Action::Compact | Action::GiveUp => return Err(Failure::Provider(error)),
                Action::NextProfile if target.profile.is_some() => {
                    (target.index, target.profile.as_ref().map(|(id, _)| id.clone()))
                }
                _ => (target.index, None),
            };
            let mut without = excluded.clone();
            without.push(key);
            let other = self.pick(&without).is_some();
            tries_here += 1;
            let retry_first = action == Action::RetryThenNext && tries_here == 1;
            if !other || retry_first {
                match retry::delay_for(policy, &error, retries) {
                    Some(delay) => {
                        retries += 1;
                        retry::wait(&error, retries, delay, cancel).await?;
                        same = Some(target);
                        continue;
                    }
                    None if !other => return Err(Failure::Provider(error)),
                    None => {}
                }
            }
            tracing::warn!(model = %target.model, error = %error, action = ?action, "model request failed; moving on");
            excluded = without;
            last = Some(error);
        }
    }

    /// The first candidate from the turn's place on, not excluded and not cooling down; if every
    /// one is cooling, the one whose time is up first.
    fn pick(&self, excluded: &[(usize, Option<String>)]) -> Option<Pick<'_>> {
        let now = now_ms();
        let mut route = lock(&self.route);
        let mut best: Option<(i64, Pick<'_>)> = None;
        for (index, model) in self.chain.iter().enumerate().skip(route.at) {
            if excluded.contains(&(index, None)) {
                continue;
            }
            let Some(provider) = self.config.provider(&model.provider) else { continue };
            let model_until = self.state.model(&provider.id, &model.model).map_or(0, |e| e.until_ms);
            let profiles: Vec<Option<&AuthProfile>> = if provider.profiles.is_empty() {
                vec![None]
            } else {
                self.ordered(provider, &mut route)
                    .into_iter()
                    .filter(|p| !excluded.contains(&(index, Some(p.id.clone()))))
                    .map(Some)
                    .collect()
            };
            for profile in profiles {
                let profile_until = profile
                    .and_then(|p| self.state.profile(&provider.id, &p.id, &p.fingerprint))
                    .map_or(0, |e| e.until_ms);
                let until = model_until.max(profile_until);
                let pick = Pick { index, model, provider, profile };
                if until <= now {
                    return Some(pick);
                }
                if best.as_ref().is_none_or(|(b, _)| until < *b) {
                    best = Some((until, pick));
                }
            }
        }
        best.map(|(_, pick)| pick)
    }

    /// A provider's usable credentials, the session's first, then in the provider's rotation.
    fn ordered<'p>(&self, provider: &'p ProviderConfig, route: &mut Route) -> Vec<&'p AuthProfile> {
        let usable: Vec<&AuthProfile> = provider.profiles.iter().filter(|p| p.key.is_some()).collect();
        if usable.is_empty() {
            return usable;
        }
        let held = self.held.get(&provider.id);
        let start = match held.as_deref().and_then(|h| usable.iter().position(|p| p.id == h)) {
            Some(at) => at,
            None => match provider.rotation {
                crate::config::models::Rotation::LastGood => self
                    .state
                    .last_good(&provider.id)
                    .and_then(|good| usable.iter().position(|p| p.id == good))
                    .unwrap_or(0),
                crate::config::models::Rotation::RoundRobin => *route
                    .turn
                    .entry(provider.id.clone())
                    .or_insert_with(|| self.state.next_turn(&provider.id, usable.len())),
            },
        };
        let mut ordered = usable;
        let last = ordered.len() - 1;
        ordered.rotate_left(start.min(last));
        ordered
    }

    async fn target(&self, pick: &Pick<'_>) -> Result<Target, TurnError> {
        let mut provider = pick.provider.clone();
        if let Some(profile) = pick.profile {
            provider.api_key.clone_from(&profile.key);
            provider.api_key_env.clone_from(&profile.key_env);
        }
        let http = if crate::http::is_plain(&provider.base_url) {
            self.shared.plain_http()?
        } else {
            self.shared.http().await?
        };
        let info = provider.model(&pick.model.model);
        Ok(Target {
            index: pick.index,
            model: pick.model.clone(),
            info,
            client: ProviderClient::new(http, provider, self.config.timeouts),
            profile: pick.profile.map(|p| (p.id.clone(), p.fingerprint.clone())),
        })
    }

    /// Tells the user, once a turn, that another model than the session's answers, and why.
    fn announce(&self, target: &Target, why: Option<&ProviderError>) {
        let from = &self.chain[0];
        if target.model == *from {
            return;
        }
        {
            let mut route = lock(&self.route);
            if route.told {
                return;
            }
            route.told = true;
        }
        let (reason, because) = match why {
            Some(e) => (e.kind.as_str().to_owned(), failure_words(e)),
            None => {
                let entry = self.state.model(&from.provider, &from.model);
                let reason = entry.as_ref().map_or_else(|| "cooling_down".to_owned(), |e| e.reason.clone());
                let left = entry.map_or(0, |e| e.until_ms - now_ms());
                (reason.clone(), format!("is cooling down for {} after failing ({reason})", crate::models::span(left)))
            }
        };
        let to = &target.model;
        tracing::warn!(%from, %to, %reason, "failing over to another model");
        self.events.emit(EventKind::Failover(super::event::Failover {
            from: from.to_string(),
            to: to.to_string(),
            reason,
            text: format!("`{from}` {because}: trying `{to}` instead."),
        }));
    }

    /// The target answered: the session holds its key, the turn stays on its model, and the
    /// state forgets their failures (on disk before the turn goes on, so a process that ends with
    /// the turn keeps it).
    fn succeeded(&self, target: &Target) -> crate::models::state::Written {
        let profile = target.profile.as_ref().map(|(id, _)| id.as_str());
        if let Some(profile) = profile {
            self.held.set(&target.model.provider, profile);
        }
        {
            let mut route = lock(&self.route);
            route.at = target.index;
            route.answered = Some(target.model.clone());
        }
        self.state.answered(&target.model.provider, &target.model.model, profile)
    }

    /// When the last request tried more than one model and all failed: which, and how.
    pub(crate) fn tried(&self) -> Option<String> {
        let route = lock(&self.route);
        let mut models: Vec<&str> = route.tried.iter().map(|(m, _)| m.as_str()).collect();
        models.dedup();
        if models.len() < 2 {
            return None;
        }
        let each: Vec<String> = route.tried.iter().map(|(model, kind)| format!("`{model}` ({kind})")).collect();
        Some(format!(" Every model was tried, in turn: {}.", each.join(", ")))
    }

    /// The target failed: its key or model cools down.
    fn failed(&self, target: &Target, error: &ProviderError) -> crate::models::state::Written {
        lock(&self.route).tried.push((target.model.to_string(), error.kind.as_str()));
        let profile = target.profile.as_ref().map(|(id, key)| (id.as_str(), key.as_str()));
        let (blamed, written) =
            self.state.failed(&target.model.provider, &target.model.model, profile, error, now_ms());
        if let Some((blame, cool)) = blamed {
            tracing::info!(model = %target.model, profile = ?profile.map(|p| p.0), ?blame, cooldown_s = cool.as_secs(), "cooling down");
        }
        written
    }
}

/// A failure in a few words: `is overloaded (HTTP 529)`.
fn failure_words(e: &ProviderError) -> String {
    let status = e.status.map(|s| format!(" (HTTP {s})")).unwrap_or_default();
    let what = match e.kind {
        ErrorKind::Auth => "refused its key",
        ErrorKind::PermissionDenied => "is not allowed with its key",
        ErrorKind::Billing => "is out of credit",
        ErrorKind::RateLimited => "is rate limited",
        ErrorKind::Overloaded => "is overloaded",
        ErrorKind::Server => "failed on the provider's side",
        ErrorKind::NotFound => "was not found",
        ErrorKind::Connect => "could not be reached",
        ErrorKind::Timeout => "stopped answering",
        ErrorKind::Truncated | ErrorKind::Protocol => "sent a broken reply",
        ErrorKind::ContextLength | ErrorKind::InvalidRequest => "refused the request",
    };
    format!("{what}{status}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_has_its_stated_action() {
        use ErrorKind::*;
        let table = [
            (Auth, Action::NextProfile),
            (PermissionDenied, Action::NextProfile),
            (Billing, Action::NextProfile),
            (RateLimited, Action::NextProfile),
            (Overloaded, Action::NextModel),
            (NotFound, Action::NextModel),
            (Server, Action::RetryThenNext),
            (Connect, Action::RetryThenNext),
            (Timeout, Action::RetryThenNext),
            (Truncated, Action::RetryThenNext),
            (Protocol, Action::RetryThenNext),
            (ContextLength, Action::Compact),
            (InvalidRequest, Action::GiveUp),
        ];
        for (kind, expected) in table {
            assert_eq!(action(kind), expected, "{kind:?}");
        }
    }
}
