//! One connection's state and its handles: the messages the peer sends (`Incoming`), the
//! `Connection` that sends ours and waits for the peer's answers (pending and in-flight requests,
//! cancellation both ways), and the `Responder` a request is answered through exactly once.

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};

use acp_protocol::acp::CANCEL_REQUEST;
use acp_protocol::jsonrpc::{self, ErrorObject, RequestId};
use serde::Serialize;
use serde_json::Value;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use super::writer;
use crate::sync::lock;

/// A message from the peer that the dispatcher must handle.
#[derive(Debug)]
pub enum Incoming {
    Request(IncomingRequest),
    Notification { method: String, params: Option<Value> },
}

/// A request from the peer; answer it through its [`Responder`] exactly once.
#[derive(Debug)]
pub struct IncomingRequest {
    pub method: String,
    pub params: Option<Value>,
    pub responder: Responder,
}

/// Why one of our own requests to the peer did not get a result.
#[derive(Debug, Clone, PartialEq)]
pub enum RequestError {
    /// The peer answered with an error.
    Remote(ErrorObject),
    /// We cancelled it, or the peer's input ended (so no answer can come).
    Cancelled,
    /// No answer came within the time given (the peer is told with `$/cancel_request`).
    TimedOut(std::time::Duration),
    /// The request could not be serialized.
    Internal(String),
}

impl std::fmt::Display for RequestError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Remote(e) => write!(f, "the client answered with an error: {e}"),
            Self::Cancelled => f.write_str("the request was cancelled"),
            Self::TimedOut(limit) => write!(f, "no answer within {} s", limit.as_secs()),
            Self::Internal(e) => write!(f, "could not send the request: {e}"),
        }
    }
}

impl std::error::Error for RequestError {}

/// What the reader hands over, in input order.
#[derive(Debug)]
pub(super) enum FromReader {
    Message(Incoming),
    /// A line that could not be accepted: answer it in turn, so answers keep the input's order.
    Reject {
        line: String,
    },
}

/// A new connection writing to `output`.
pub(super) fn new(output: impl std::io::Write + Send + 'static) -> Connection {
    Connection {
        inner: Arc::new(Inner {
            out: writer::Writer::new(output),
            pending: Mutex::default(),
            inflight: Mutex::default(),
            next_id: AtomicI64::new(0),
            input_closed: CancellationToken::new(),
            first_input: FirstInput::default(),
        }),
    }
}

type PendingAnswer = oneshot::Sender<Result<Value, ErrorObject>>;

struct Inner {
    out: writer::Writer,
    /// Our requests to the peer that await an answer.
    pending: Mutex<HashMap<RequestId, PendingAnswer>>,
    /// The peer's requests to us that are not answered yet (for `$/cancel_request`).
    inflight: Mutex<HashMap<RequestId, CancellationToken>>,
    next_id: AtomicI64,
    input_closed: CancellationToken,
    first_input: FirstInput,
}

type Hook = Box<dyn FnOnce() + Send>;

/// What runs once the first input arrives ([`Connection::after_first_input`]).
#[derive(Default)]
struct FirstInput {
    arrived: std::sync::atomic::AtomicBool,
    hook: Mutex<Option<Hook>>,
}

impl FirstInput {
    fn register(&self, hook: Hook) {
        let mut slot = lock(&self.hook);
        if self.arrived.load(Ordering::Acquire) {
            drop(slot);
            hook();
        } else {
            *slot = Some(hook);
        }
    }

    /// Input arrived (or ended): runs the hook, the first time.
    fn arrived(&self) {
        if self.arrived.load(Ordering::Relaxed) {
            return;
        }
        let hook = {
            let mut slot = lock(&self.hook);
            self.arrived.store(true, Ordering::Release);
            slot.take()
        };
        if let Some(hook) = hook {
            hook();
        }
    }
}

/// A cheap, cloneable handle for sending to the peer.
#[derive(Clone)]
pub struct Connection {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection").finish_non_exhaustive()
    }
}

impl Connection {
    /// Sends a notification.
    pub fn notify<P: Serialize>(&self, method: &str, params: &P) {
        self.notify_inner(method, params, true);
    }

    /// Sends a notification without flushing it: part of a batch that ends with [`Self::flush`]
    /// (or with any flushed send).
    pub fn notify_batched<P: Serialize>(&self, method: &str, params: &P) {
        self.notify_inner(method, params, false);
    }

    /// Flushes batched notifications.
    pub fn flush(&self) {
        self.inner.out.flush();
    }

    /// Runs `hook` once, on the reader thread, as soon as the first input arrives (or input ends),
    /// before it is handled — at once if it arrived already: for work that must not wait on the
    /// async runtime and should not delay the first answer.
    pub fn after_first_input(&self, hook: impl FnOnce() + Send + 'static) {
        self.inner.first_input.register(Box::new(hook));
    }

    fn notify_inner<P: Serialize>(&self, method: &str, params: &P, flush: bool) {
        match jsonrpc::notification_line(method, params) {
            Ok(line) => self.inner.out.line(&line, flush),
            Err(e) => tracing::error!(method, error = %e, "could not serialize a notification"),
        }
    }

    /// Sends a request to the peer and waits for its answer. Resolves to `Cancelled` when `cancel`
    /// fires (the peer is told with `$/cancel_request`) or when the peer's input has ended.
    pub async fn request<P: Serialize>(
        &self,
        method: &str,
        params: &P,
        cancel: &CancellationToken,
    ) -> Result<Value, RequestError> {
        self.request_within(method, params, cancel, None).await
    }

    /// [`Self::request`], giving up (`TimedOut`) after `limit`. However the wait ends — cancelled,
    /// timed out, or the future dropped — an unanswered request is withdrawn with
    /// `$/cancel_request`, and its answer, should it still come, is ignored.
    pub async fn request_within<P: Serialize>(
        &self,
        method: &str,
        params: &P,
        cancel: &CancellationToken,
        limit: Option<std::time::Duration>,
    ) -> Result<Value, RequestError> {
        if self.input_closed() {
            return Err(RequestError::Cancelled);
        }
        let id = RequestId::Number(self.inner.next_id.fetch_add(1, Ordering::Relaxed));
        let line = jsonrpc::request_line(&id, method, params).map_err(|e| RequestError::Internal(e.to_string()))?;
        let (tx, rx) = oneshot::channel();
        lock(&self.inner.pending).insert(id.clone(), tx);
        let mut waiting = Waiting { conn: self, id: Some(id) };
        self.send_line(line);
        let expired = async {
            match limit {
                Some(limit) => tokio::time::sleep(limit).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            answer = rx => {
                waiting.id = None;
                match answer {
                    Ok(Ok(value)) => Ok(value),
                    Ok(Err(error)) => Err(RequestError::Remote(error)),
                    Err(_) => Err(RequestError::Cancelled),
                }
            }
            () = cancel.cancelled() => Err(RequestError::Cancelled),
            () = expired => Err(RequestError::TimedOut(limit.unwrap_or_default())),
            () = self.inner.input_closed.cancelled() => Err(RequestError::Cancelled),
        }
    }

    /// True once the peer's input has ended (EOF or a read error).
    pub fn input_closed(&self) -> bool {
        self.inner.input_closed.is_cancelled()
    }

    /// A token that fires when the peer's input ends.
    pub fn input_closed_token(&self) -> CancellationToken {
        self.inner.input_closed.clone()
    }

    pub(super) fn send_line(&self, line: String) {
        self.inner.out.line(&line, true);
    }

    /// Registers an incoming request id; `None` if that id is already in flight.
    pub(super) fn begin_inflight(&self, id: &RequestId) -> Option<CancellationToken> {
        let mut inflight = lock(&self.inner.inflight);
        if inflight.contains_key(id) {
            return None;
        }
        let token = CancellationToken::new();
        inflight.insert(id.clone(), token.clone());
        Some(token)
    }

    fn end_inflight(&self, id: &RequestId) {
        lock(&self.inner.inflight).remove(id);
    }

    pub(super) fn cancel_inflight(&self, id: &RequestId) -> bool {
        match lock(&self.inner.inflight).get(id) {
            Some(token) => {
                token.cancel();
                true
            }
            None => false,
        }
    }

    pub(super) fn resolve_pending(&self, id: &RequestId, result: Result<Value, ErrorObject>) -> bool {
        match lock(&self.inner.pending).remove(id) {
            Some(tx) => {
                let _ = tx.send(result);
                true
            }
            None => false,
        }
    }

    /// Input arrived (or ended): see [`Self::after_first_input`].
    pub(super) fn input_arrived(&self) {
        self.inner.first_input.arrived();
    }

    /// Marks input as ended and fails every pending outgoing request as cancelled.
    pub(super) fn close_input(&self) {
        self.inner.input_closed.cancel();
        lock(&self.inner.pending).clear();
    }
}

/// One of our requests still waiting for its answer; withdrawn when the wait ends without one.
struct Waiting<'a> {
    conn: &'a Connection,
    id: Option<RequestId>,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        let Some(id) = self.id.take() else { return };
        if lock(&self.conn.inner.pending).remove(&id).is_some() && !self.conn.input_closed() {
            self.conn.notify(CANCEL_REQUEST, &serde_json::json!({ "requestId": id }));
        }
    }
}

/// Answers one incoming request. Dropping it unanswered sends an internal error, so every request
/// gets exactly one response.
pub struct Responder {
    pub(super) id: RequestId,
    pub(super) conn: Connection,
    pub(super) cancel: CancellationToken,
    pub(super) answered: bool,
}

impl std::fmt::Debug for Responder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Responder").field("id", &self.id).finish_non_exhaustive()
    }
}

impl Responder {
    pub fn id(&self) -> &RequestId {
        &self.id
    }

    /// Fires when the peer sends `$/cancel_request` for this request.
    pub fn cancel_token(&self) -> &CancellationToken {
        &self.cancel
    }

    pub fn respond<T: Serialize>(mut self, result: Result<T, ErrorObject>) {
        self.answered = true;
        let line = match result {
            Ok(value) => jsonrpc::result_line(&self.id, &value)
                .unwrap_or_else(|e| jsonrpc::error_line(&self.id, &ErrorObject::internal(e))),
            Err(error) => jsonrpc::error_line(&self.id, &error),
        };
        // Free the id before the answer leaves, so the peer may reuse it at once.
        self.conn.end_inflight(&self.id);
        self.conn.send_line(line);
    }

    pub fn respond_error(self, error: ErrorObject) {
        self.respond::<()>(Err(error));
    }
}

impl Drop for Responder {
    fn drop(&mut self) {
        if !self.answered {
            tracing::error!(id = %self.id, "request dropped without an answer");
            self.conn.end_inflight(&self.id);
            let error = ErrorObject::internal("the request was dropped without an answer");
            self.conn.send_line(jsonrpc::error_line(&self.id, &error));
        }
    }
}
