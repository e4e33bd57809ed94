//! `message`: sends a message to a chat on a messaging channel (offered only where the agent
//! serves one: the gateway). Without `to` it goes to the chat the session talks in, which needs no
//! approval; any other chat is a message to someone else, asked about unless a rule allows it.
//! The send policy (`[session.send_policy]`, `/send`) has the last word either way. A `file` is
//! read as `read` reads (inside the workspace without a question, elsewhere asked), and goes
//! with the text as its caption.

use schemars::JsonSchema;
use serde::Deserialize;

use std::path::PathBuf;

use super::host::{ChatFile, ChatTarget};
use super::{Access, Action, Location, Prepared, Tool, ToolContent, ToolContext, ToolKind, ToolOutput, media, paths};

pub struct Message;

#[derive(Debug, Deserialize, JsonSchema)]
pub struct MessageArgs {
    /// The message (Markdown); with `file`, its caption
    text: Option<String>,
    /// A file to send (an image shows as a picture)
    file: Option<String>,
    /// The chat's id; default: the chat this conversation is in
    to: Option<String>,
    /// The channel, e.g. "telegram"; default: this conversation's
    channel: Option<String>,
    /// A forum topic's id in that chat
    thread: Option<String>,
}

/// Longest message accepted (channels cut long ones into several).
const MAX_CHARS: usize = 16_000;

impl Tool for Message {
    const NAME: &'static str = "message";
    type Args = MessageArgs;

    fn description(&self) -> String {
        "Send a message or a file to a chat on a messaging channel. Without `to` it goes to the chat \
         this conversation is in (use it to send something before you finish, e.g. progress on a \
         long task, or a file you made); with `to` (and `channel`) to another chat, which the user \
         is asked to approve."
            .into()
    }

    async fn prepare(&self, args: MessageArgs, ctx: &ToolContext) -> Result<Prepared, String> {
        let text = args.text.unwrap_or_default();
        let file = args.file.as_deref().map(str::trim).filter(|f| !f.is_empty()).map(|f| ctx.resolve(f));
        if text.trim().is_empty() && file.is_none() {
            return Err("`text` is empty".into());
        }
        if text.chars().count() > MAX_CHARS {
            return Err(format!("`text` is longer than {MAX_CHARS} characters; send less"));
        }
        // The file as it really is (links followed): that is what is asked about and read. Its
        // problems are told when it runs, not before a question (they would say what exists
        // where the agent may not look).
        let real = file.as_deref().map(super::paths::real);
        let seen = real.as_deref().and_then(|r| media::check(r).ok());
        let own = ctx.host.own_chat(&ctx.session);
        let target = match (args.to, own.clone()) {
            (None, Some(own)) => ChatTarget { thread: args.thread.or(own.thread), ..own },
            (None, None) => return Err("this conversation is not in a chat: give `to` and `channel`".into()),
            (Some(to), own) => {
                let channel =
                    args.channel.or(own.map(|o| o.channel)).ok_or("give `channel` (e.g. \"telegram\") with `to`")?;
                ChatTarget { channel, to: to.trim().to_owned(), thread: args.thread }
            }
        };
        let is_own = own.is_some_and(|o| o.channel == target.channel && o.to == target.to);
        let place = format!("{} chat {}", target.channel, target.to);
        let chat = if is_own { "this chat" } else { &place };
        let title = match &file {
            Some(path) => format!("Send {} to {chat}", ctx.display(path)),
            None => format!("Message {chat}"),
        };
        let access =
            Access { message: (!is_own).then_some(place), reads: real.iter().cloned().collect(), ..Access::default() };
        // The question shows exactly what will be sent: the file a link leads to as well.
        let mut preview = Vec::new();
        if let (Some(path), Some(real)) = (&file, &real) {
            let mut shown = ctx.display(path);
            if paths::normalize(path) != *real {
                shown.push_str(&format!(" → {}", ctx.display(real)));
            }
            let size = seen.map_or_else(String::new, |s| format!(" ({})", media::human_size(s.size)));
            preview.push(ToolContent::Text(format!("File: {shown}{size}")));
        }
        if !text.trim().is_empty() {
            preview.push(ToolContent::Text(text.clone()));
        }
        Ok(Prepared {
            title,
            kind: ToolKind::Other,
            locations: file.iter().map(|p| Location { path: p.clone(), line: None }).collect(),
            preview,
            access,
            action: Box::new(Send { target, text, file: file.zip(real).map(|(given, real)| (given, real, seen)) }),
        })
    }
}

struct Send {
    target: ChatTarget,
    text: String,
    /// The path given (its name is the file's name in the chat), the real one, and the file as
    /// it was when asked about.
    file: Option<(PathBuf, PathBuf, Option<media::Seen>)>,
}

/// The file approved: the very one asked about (a file that was not there then is checked now).
async fn read(given: &std::path::Path, real: &std::path::Path, seen: Option<media::Seen>) -> Result<ChatFile, String> {
    let seen = match seen {
        Some(seen) => seen,
        None => media::check(real)?,
    };
    let name = given.file_name().map_or_else(|| "file".into(), |n| n.to_string_lossy().into_owned());
    media::read(real, &name, Some(seen)).await
}

impl Action for Send {
    async fn run(self, ctx: &ToolContext) -> ToolOutput {
        let file = match &self.file {
            Some((given, real, seen)) => match read(given, real, *seen).await {
                Ok(file) => Some(file),
                Err(e) => return ToolOutput::error(format!("not sent: {e}")),
            },
            None => None,
        };
        let place = format!("{} chat {}", self.target.channel, self.target.to);
        match ctx.host.send_message(&ctx.session, &self.target, &self.text, file.as_ref()).await {
            Ok(()) => {
                let sent = match &file {
                    Some(file) => format!("Sent {} to {place}.", file.describe()),
                    None => format!("Sent to {place}."),
                };
                let mut shown = Vec::new();
                if let Some(file) = &file {
                    shown.push(ToolContent::Text(format!("File: {}", file.describe())));
                }
                if !self.text.trim().is_empty() {
                    shown.push(ToolContent::Text(self.text));
                }
                ToolOutput::ok(sent, shown)
            }
            Err(e) => ToolOutput::error(format!("not sent: {e}")),
        }
    }
}
