//! `message`: sends a message to a chat on a messaging channel (offered only where the agent
//! serves one: the gateway). Without `to` it goes to the chat the session talks in, which needs no
//! approval; any other chat is a message to someone else, asked about unless a rule allows it.
//! The send policy (`[session.send_policy]`, `/send`) has the last word either way.

use schemars::JsonSchema;
use serde::Deserialize;

use super::host::ChatTarget;
use super::{Access, Action, Prepared, Tool, ToolContent, ToolContext, ToolKind, ToolOutput};

pub struct Message;

#[derive(Debug, Deserialize, JsonSchema)]
pub struct MessageArgs {
    /// The message (Markdown)
    text: String,
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
        "Send a message to a chat on a messaging channel. Without `to` it goes to the chat this \
         conversation is in (use it to send something before you finish, e.g. progress on a long \
         task); with `to` (and `channel`) to another chat, which the user is asked to approve."
            .into()
    }

    async fn prepare(&self, args: MessageArgs, ctx: &ToolContext) -> Result<Prepared, String> {
        if args.text.trim().is_empty() {
            return Err("`text` is empty".into());
        }
        if args.text.chars().count() > MAX_CHARS {
            return Err(format!("`text` is longer than {MAX_CHARS} characters; send less"));
        }
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
        let title = if is_own { "Message this chat".to_owned() } else { format!("Message {place}") };
        let access = Access { message: (!is_own).then_some(place), ..Access::default() };
        Ok(Prepared {
            title,
            kind: ToolKind::Other,
            locations: Vec::new(),
            // The question shows exactly what will be sent.
            preview: vec![ToolContent::Text(args.text.clone())],
            access,
            action: Box::new(Send { target, text: args.text }),
        })
    }
}

struct Send {
    target: ChatTarget,
    text: String,
}

impl Action for Send {
    async fn run(self, ctx: &ToolContext) -> ToolOutput {
        match ctx.host.send_message(&ctx.session, &self.target, &self.text).await {
            Ok(()) => ToolOutput::ok(
                format!("Sent to {} chat {}.", self.target.channel, self.target.to),
                vec![ToolContent::Text(self.text)],
            ),
            Err(e) => ToolOutput::error(format!("not sent: {e}")),
        }
    }
}
