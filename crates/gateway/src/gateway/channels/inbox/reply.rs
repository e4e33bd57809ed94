//! A run's reply, streamed into the chat: its text in messages the chunker cuts (a pause in the
//! reply sends what has gathered), and — as the chat chose with `/verbose` and `/reasoning` — a
//! line for each tool call (or each with its output) and the model's reasoning, in the order
//! they happened. [`Replier`] decides what is sent when; [`Inbox::reply`] sends it.

use std::time::Duration;

use tokio::sync::{mpsc, watch};

use super::{Channel, Inbox, Route};
use crate::gateway::channels::chunker::{Chunker, Limits};
use crate::gateway::channels::policy::{Show, ShowReasoning, Verbose};
use crate::gateway::hub::{Heard, RunEnd};

/// The most of a tool call's output `/verbose full` shows.
const OUTPUT_SHOWN: usize = 1_500;

/// What to send of a run, as it streams.
pub(super) struct Replier {
    show: Show,
    /// The reply goes out in pieces as it streams (`block_streaming`), not when it ends.
    streaming: bool,
    text: Chunker,
    /// The whole reply so far (a reply of just `NO_REPLY` is not sent).
    whole: String,
    /// Reply text not handed to the chunker yet (when not streaming).
    held: String,
    /// Some reply text was sent.
    sent_any: bool,
    /// The reasoning being gathered, from its first delta until what follows it.
    reasoning: Option<Chunker>,
}

impl Replier {
    pub(super) fn new(show: Show, streaming: bool, limits: Limits) -> Self {
        Self {
            show,
            streaming,
            text: Chunker::new(limits),
            whole: String::new(),
            held: String::new(),
            sent_any: false,
            reasoning: None,
        }
    }

    /// Something the run showed: the messages to send now, and whether a pause from here on
    /// should send what has gathered.
    pub(super) fn heard(&mut self, heard: Heard) -> (Vec<String>, bool) {
        let mut out = Vec::new();
        match heard {
            Heard::Text(delta) => {
                out.extend(self.end_reasoning());
                self.whole.push_str(&delta);
                if self.streaming {
                    let ready = self.text.push(&delta);
                    self.sent_any |= !ready.is_empty();
                    out.extend(ready);
                    return (out, true);
                }
                self.held.push_str(&delta);
            }
            Heard::Thinking(delta) if self.show.reasoning != ShowReasoning::Off => {
                if self.reasoning.is_none() {
                    // What the model wrote before it is sent first.
                    out.extend(self.flush_text());
                }
                let limits = self.text.limits();
                let reasoning = self.reasoning.get_or_insert_with(|| {
                    let mut chunker = Chunker::new(limits);
                    chunker.push_held("Reasoning: ");
                    chunker
                });
                if self.show.reasoning == ShowReasoning::Stream {
                    out.extend(reasoning.push(&delta));
                    return (out, true);
                }
                reasoning.push_held(&delta);
            }
            Heard::Thinking(_) => {}
            Heard::ToolStarted { title } => {
                out.extend(self.end_reasoning());
                if self.show.verbose == Verbose::On {
                    out.extend(self.flush_text());
                    out.push(format!("🔧 {title}"));
                }
            }
            Heard::ToolEnded { title, failed, content } => {
                out.extend(self.end_reasoning());
                if self.show.verbose == Verbose::Full {
                    out.extend(self.flush_text());
                    out.push(tool_message(&title, failed, &shown_output(&content)));
                }
            }
        }
        (out, false)
    }

    /// The run paused: what has gathered, unless it could still become `NO_REPLY`.
    pub(super) fn paused(&mut self) -> Vec<String> {
        let mut out = Vec::new();
        if self.show.reasoning == ShowReasoning::Stream
            && let Some(reasoning) = self.reasoning.as_mut()
        {
            out.extend(reasoning.idle());
        }
        if self.streaming && !could_be_silent(&self.whole) {
            let ready = self.text.idle();
            self.sent_any |= !ready.is_empty();
            out.extend(ready);
        }
        out
    }

    /// The run ended: the rest. A stopped run (`interrupt`, `/stop`) sends nothing more.
    pub(super) fn ended(&mut self, end: Option<&RunEnd>) -> Vec<String> {
        if matches!(end, Some(RunEnd::Aborted { .. })) {
            return Vec::new();
        }
        let mut out = self.end_reasoning();
        if self.sent_any || self.whole.trim() != "NO_REPLY" {
            out.extend(self.flush_text());
        }
        if let Some(RunEnd::Error { message }) = end {
            out.push(format!("(The run failed: {message})"));
        }
        out
    }

    /// The reasoning gathered, now that something else follows it.
    fn end_reasoning(&mut self) -> Vec<String> {
        self.reasoning.take().map(|mut r| r.finish()).unwrap_or_default()
    }

    /// The reply text gathered, sent before something else is.
    fn flush_text(&mut self) -> Vec<String> {
        if could_be_silent(&self.whole) && !self.sent_any {
            return Vec::new();
        }
        let held = std::mem::take(&mut self.held);
        self.text.push_held(&held);
        let ready: Vec<String> = self.text.finish().into_iter().map(|m| m.trim_start().to_owned()).collect();
        self.sent_any |= !ready.is_empty();
        ready
    }
}

/// `NO_REPLY`, or the start of it: not sent (yet).
fn could_be_silent(whole: &str) -> bool {
    let t = whole.trim();
    !t.is_empty() && "NO_REPLY".starts_with(t)
}

/// A finished call's output as a chat shows it: its text, else the unified diff of what it changed.
fn shown_output(content: &[crate::runtime::ToolContent]) -> String {
    let text = crate::gateway::hub::result_text(content);
    if !text.trim().is_empty() {
        return text;
    }
    let diffs: Vec<String> = content
        .iter()
        .filter_map(|c| match c {
            crate::runtime::ToolContent::Diff { path, old_text, new_text } => {
                let name = path.display().to_string();
                let diff = similar::TextDiffConfig::default()
                    .timeout(Duration::from_secs(1))
                    .diff_lines(old_text.as_deref().unwrap_or(""), new_text.as_str());
                Some(diff.unified_diff().context_radius(2).header(&name, &name).to_string())
            }
            _ => None,
        })
        .collect();
    diffs.join("\n")
}

/// A finished tool call as `/verbose full` shows it.
fn tool_message(title: &str, failed: bool, output: &str) -> String {
    let head = if failed { format!("🔧 {title} (failed)") } else { format!("🔧 {title}") };
    let output = output.trim();
    if output.is_empty() {
        return head;
    }
    let mut shown: String = output.chars().take(OUTPUT_SHOWN).collect();
    if shown.len() < output.len() {
        shown.push('…');
    }
    let lang = if shown.starts_with("--- ") { "diff" } else { "" };
    format!("{head}\n```{lang}\n{}\n```", shown.replace("```", "'''"))
}

impl<C: Channel> Inbox<C> {
    /// Streams a run into the chat (undelivered, but run, when the send policy says so).
    pub(super) async fn reply(
        &self,
        route: &Route,
        allowed: bool,
        show: Show,
        mut heard: mpsc::UnboundedReceiver<Heard>,
        mut ended: watch::Receiver<Option<RunEnd>>,
    ) {
        if !allowed {
            while heard.recv().await.is_some() {}
            let _ = ended.wait_for(Option::is_some).await;
            return;
        }
        let (peer, thread) = (route.peer.as_str(), route.thread.as_deref());
        let mut replier = Replier::new(show, self.settings.block_streaming, self.settings.limits);
        let mut typing = tokio::time::interval(Duration::from_secs(4));
        let far = || tokio::time::Instant::now() + Duration::MAX / 4;
        let pause = tokio::time::sleep_until(far());
        tokio::pin!(pause);
        loop {
            let messages = tokio::select! {
                next = heard.recv() => match next {
                    Some(next) => {
                        let (messages, wait) = replier.heard(next);
                        if wait {
                            pause.as_mut().reset(tokio::time::Instant::now() + self.settings.idle);
                        }
                        messages
                    }
                    None => break,
                },
                () = &mut pause => {
                    pause.as_mut().reset(far());
                    replier.paused()
                }
                _ = typing.tick() => {
                    // Beside the reply, never before it: a slow "typing…" call holds nothing up.
                    let (channel, peer, thread) = (self.channel.clone(), peer.to_owned(), thread.map(str::to_owned));
                    tokio::spawn(async move { channel.typing(&peer, thread.as_deref()).await });
                    Vec::new()
                }
            };
            for message in messages {
                self.deliver(peer, thread, &message).await;
            }
        }
        let end = ended.wait_for(Option::is_some).await.ok().and_then(|e| e.clone());
        for message in replier.ended(end.as_ref()) {
            self.deliver(peer, thread, &message).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> Limits {
        Limits::new(10, 200, 4096)
    }

    fn run(show: Show, streaming: bool, events: Vec<Heard>, end: RunEnd) -> Vec<String> {
        // Messages of at least 100 characters: only what comes between them cuts the reply.
        let mut r = Replier::new(show, streaming, Limits::new(100, 200, 4096));
        let mut out = Vec::new();
        for e in events {
            out.extend(r.heard(e).0);
        }
        out.extend(r.ended(Some(&end)));
        out
    }

    fn events() -> Vec<Heard> {
        vec![
            Heard::Thinking("I should list ".into()),
            Heard::Thinking("the files.".into()),
            Heard::Text("Let me look.".into()),
            Heard::ToolStarted { title: "Run `ls`".into() },
            Heard::ToolEnded {
                title: "Run `ls`".into(),
                failed: false,
                content: vec![crate::runtime::ToolContent::Text("a.txt\nb.txt".into())],
            },
            Heard::Text("\n\n".into()),
            Heard::Text("There are two files.".into()),
        ]
    }

    fn done() -> RunEnd {
        RunEnd::Final { text: String::new(), stop_reason: "stop".into() }
    }

    #[test]
    fn by_default_only_the_reply_is_sent() {
        for streaming in [true, false] {
            let out = run(Show::default(), streaming, events(), done());
            assert_eq!(out.join("|"), "Let me look.\n\nThere are two files.", "streaming {streaming}");
        }
    }

    #[test]
    fn verbose_shows_each_tool_call_in_order_with_the_text_around_it() {
        let on = Show { verbose: Verbose::On, ..Show::default() };
        assert_eq!(run(on, false, events(), done()), ["Let me look.", "🔧 Run `ls`", "There are two files."]);
        let full = Show { verbose: Verbose::Full, ..Show::default() };
        assert_eq!(
            run(full, true, events(), done()),
            ["Let me look.", "🔧 Run `ls`\n```\na.txt\nb.txt\n```", "There are two files."]
        );
        let failed = tool_message("Run `x`", true, &"y".repeat(2000));
        assert!(failed.starts_with("🔧 Run `x` (failed)\n```\nyyy") && failed.ends_with("…\n```"), "{failed}");
    }

    #[test]
    fn reasoning_comes_before_the_text_it_led_to() {
        let on = Show { reasoning: ShowReasoning::On, ..Show::default() };
        assert_eq!(
            run(on, false, events(), done()),
            ["Reasoning: I should list the files.", "Let me look.\n\nThere are two files."]
        );
        // Streamed, the reasoning goes out as it comes (here once it passes the chunker's minimum).
        let stream = Show { reasoning: ShowReasoning::Stream, ..Show::default() };
        let mut r = Replier::new(stream, true, limits());
        let (first, wait) = r.heard(Heard::Thinking("I should list the files. ".into()));
        assert!(wait);
        assert_eq!(first, ["Reasoning: I should list the files."]);
    }

    #[test]
    fn a_long_reply_sent_when_it_ends_loses_nothing() {
        let paragraph = "word ".repeat(20);
        let text = [paragraph.trim(), paragraph.trim(), paragraph.trim()].join("\n\n");
        let out = run(Show::default(), false, vec![Heard::Text(text.clone())], done());
        assert!(out.len() > 1, "{out:?}");
        assert_eq!(out.join("\n\n"), text);
    }

    #[test]
    fn a_stopped_run_sends_nothing_more_and_a_failed_one_says_so() {
        let on = Show { verbose: Verbose::On, reasoning: ShowReasoning::On };
        assert!(
            run(on, false, events(), RunEnd::Aborted { text: String::new() })
                .iter()
                .all(|m| m != "There are two files.")
        );
        let out =
            run(Show::default(), false, vec![Heard::Text("Half".into())], RunEnd::Error { message: "boom".into() });
        assert_eq!(out, ["Half", "(The run failed: boom)"]);
        assert!(run(Show::default(), true, vec![Heard::Text("NO_REPLY".into())], done()).is_empty());
    }
}
