//! Typed dispatch. Each ACP method is a type naming its method string, its params and its result;
//! [`Requests`] matches one request against the table in `agent.rs` (one `.on::<Method>(handler)`
//! line per method), decodes the params once, and hands the serve loop the [`Work`] to schedule:
//! nothing (answered at once), a future to finish before the next message, or one that runs
//! alongside later messages (a prompt's turn).

use acp_protocol::acp::agent_methods as m;
use acp_protocol::acp::client_methods::SESSION_UPDATE;
use acp_protocol::acp::schema::{
    AuthenticateRequest, AuthenticateResponse, CancelNotification, CloseSessionRequest, CloseSessionResponse,
    DeleteSessionRequest, DeleteSessionResponse, InitializeRequest, InitializeResponse, ListSessionsRequest,
    ListSessionsResponse, LoadSessionRequest, LoadSessionResponse, NewSessionRequest, NewSessionResponse,
    PromptRequest, PromptResponse, ResumeSessionRequest, ResumeSessionResponse, SessionNotification,
    SetSessionConfigOptionRequest, SetSessionConfigOptionResponse, SetSessionModeRequest, SetSessionModeResponse,
};
use acp_protocol::jsonrpc::ErrorObject;
use futures_util::future::BoxFuture;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::rpc::{Connection, IncomingRequest, Responder};

pub(super) type Reply<T> = Result<T, ErrorObject>;

/// One ACP method: its name, what it takes, what it answers.
pub(super) trait Method {
    const NAME: &'static str;
    type Params: DeserializeOwned;
    type Result: Serialize + Send + 'static;

    /// Decodes the params; the error names the offending field.
    fn decode(params: Option<Value>) -> Reply<Self::Params> {
        parse(params)
    }
}

macro_rules! methods {
    ($($(#[$doc:meta])* $name:ident = $method:expr, $params:ty => $result:ty;)*) => {$(
        $(#[$doc])*
        pub(super) enum $name {}

        impl Method for $name {
            const NAME: &'static str = $method;
            type Params = $params;
            type Result = $result;
        }
    )*};
}

methods! {
    Authenticate = m::AUTHENTICATE, AuthenticateRequest => AuthenticateResponse;
    NewSession = m::SESSION_NEW, NewSessionRequest => NewSessionResponse;
    LoadSession = m::SESSION_LOAD, LoadSessionRequest => LoadSessionResponse;
    ResumeSession = m::SESSION_RESUME, ResumeSessionRequest => ResumeSessionResponse;
    ListSessions = m::SESSION_LIST, ListSessionsRequest => ListSessionsResponse;
    DeleteSession = m::SESSION_DELETE, DeleteSessionRequest => DeleteSessionResponse;
    CloseSession = m::SESSION_CLOSE, CloseSessionRequest => CloseSessionResponse;
    SetSessionMode = m::SESSION_SET_MODE, SetSessionModeRequest => SetSessionModeResponse;
    SetSessionConfigOption = m::SESSION_SET_CONFIG_OPTION, SetSessionConfigOptionRequest => SetSessionConfigOptionResponse;
    Prompt = m::SESSION_PROMPT, PromptRequest => PromptResponse;
    /// A notification; some clients send it as a request, which is answered `null`.
    Cancel = m::SESSION_CANCEL, CancelNotification => ();
}

/// `initialize`. Whatever version is asked, the answer is the one we speak (the spec's
/// negotiation rule), so any number or string is accepted.
pub(super) enum Initialize {}

impl Method for Initialize {
    const NAME: &'static str = m::INITIALIZE;
    type Params = InitializeRequest;
    type Result = InitializeResponse;

    fn decode(params: Option<Value>) -> Reply<InitializeRequest> {
        let mut params = params.unwrap_or_else(|| json!({}));
        match params.get("protocolVersion") {
            None => return Err(ErrorObject::invalid_params("missing field `protocolVersion`")),
            Some(Value::Number(_) | Value::String(_)) => params["protocolVersion"] = json!(1),
            Some(_) => return Err(ErrorObject::invalid_params("`protocolVersion`: expected an integer")),
        }
        parse(Some(params))
    }
}

/// How a handler answers (when it did not fail at once).
pub(super) enum Handled<T> {
    /// Now.
    Now(T),
    /// When the future resolves; the next message waits for it (it changes what later messages
    /// find: a session opened, a setting on disk).
    InOrder(BoxFuture<'static, Answer<T>>),
    /// When the future resolves, while later messages are handled (a prompt's turn).
    Alongside(BoxFuture<'static, Answer<T>>),
}

/// An answer, and the updates that must follow it (clients drop updates for a session they do
/// not know yet, so a new session is announced after the answer that names it).
pub(super) struct Answer<T> {
    pub reply: Reply<T>,
    pub then: Vec<SessionNotification>,
}

impl<T> Answer<T> {
    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> Answer<U> {
        Answer { reply: self.reply.map(f), then: self.then }
    }
}

impl<T> From<Reply<T>> for Answer<T> {
    fn from(reply: Reply<T>) -> Self {
        Self { reply, then: Vec::new() }
    }
}

/// What the serve loop schedules for one message.
pub enum Work {
    Done,
    /// Finish before the next message is handled.
    InOrder(BoxFuture<'static, ()>),
    /// Runs alongside later messages; the connection ends only after it.
    Alongside(BoxFuture<'static, ()>),
}

/// A method's handler: it decodes nothing (its params come decoded) and fails or says how it
/// answers.
pub(super) type Handler<S, M> = fn(&S, <M as Method>::Params) -> Reply<Handled<<M as Method>::Result>>;

/// Matches one request against the dispatch table.
pub(super) struct Requests<'a, S> {
    state: &'a S,
    conn: &'a Connection,
    request: Option<IncomingRequest>,
    work: Work,
}

impl<'a, S> Requests<'a, S> {
    pub fn new(state: &'a S, conn: &'a Connection, request: IncomingRequest) -> Self {
        Self { state, conn, request: Some(request), work: Work::Done }
    }

    /// Handles `M` with `handler`.
    pub fn on<M: Method>(self, handler: Handler<S, M>) -> Self {
        self.on_cancellable::<M>(|state, params, _| handler(state, params))
    }

    /// Handles `M` with `handler`, which also gets the token `$/cancel_request` for this request
    /// fires.
    pub fn on_cancellable<M: Method>(
        mut self,
        handler: impl FnOnce(&S, M::Params, CancellationToken) -> Reply<Handled<M::Result>>,
    ) -> Self {
        let Some(request) = self.request.take_if(|r| r.method == M::NAME) else { return self };
        let responder = request.responder;
        let params = match M::decode(request.params) {
            Ok(params) => params,
            Err(e) => {
                responder.respond_error(e);
                return self;
            }
        };
        let cancel = responder.cancel_token().clone();
        self.work = match handler(self.state, params, cancel) {
            Ok(Handled::Now(result)) => {
                responder.respond(Ok(result));
                Work::Done
            }
            Err(e) => {
                responder.respond_error(e);
                Work::Done
            }
            Ok(Handled::InOrder(future)) => Work::InOrder(answer_when_done(self.conn.clone(), responder, future)),
            Ok(Handled::Alongside(future)) => Work::Alongside(answer_when_done(self.conn.clone(), responder, future)),
        };
        self
    }

    /// Answers a method no line handled: `-32601`.
    pub fn finish(self) -> Work {
        if let Some(request) = self.request {
            request.responder.respond_error(ErrorObject::method_not_found(&request.method));
        }
        self.work
    }
}

fn answer_when_done<T: Serialize + Send + 'static>(
    conn: Connection,
    responder: Responder,
    future: BoxFuture<'static, Answer<T>>,
) -> BoxFuture<'static, ()> {
    Box::pin(async move {
        let Answer { reply, then } = future.await;
        responder.respond(reply);
        for update in then {
            conn.notify(SESSION_UPDATE, &update);
        }
    })
}

/// Deserializes params; the error names the offending field (`prompt[0].text: invalid type …`).
pub(super) fn parse<T: DeserializeOwned>(params: Option<Value>) -> Reply<T> {
    let value = params.unwrap_or_else(|| json!({}));
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        if path == "." {
            ErrorObject::invalid_params(inner)
        } else {
            ErrorObject::invalid_params(format!("`{path}`: {inner}"))
        }
    })
}
