//! Keeping long sessions inside the model's context window.
//!
//! **Accounting.** The provider reports the tokens of every request (input + output = the context
//! after the reply); that figure is the base, and only what was added since is estimated. The
//! estimate is characters ÷ a characters-per-token ratio that calibrates itself against each
//! report (starting at 3.5, conservative for code and English). A tokenizer would be exact for one
//! model family only, and heavy; the provider's own count corrects the estimate at every request.
//!
//! **Compaction.** When a request would pass `threshold` of the window (output reserve included), or
//! the provider says the prompt is too long, the older part of the conversation is summarised by the
//! model and replaced by the summary; the most recent messages (up to `keep_recent` of the window)
//! stay verbatim, and tool calls stay paired with their results. The summary is recorded in the
//! transcript, so a reloaded session continues from it. `/compact` does the same on demand.
//!
//! **Pruning.** Past half the window, old large tool results (before the last three prompts) are
//! replaced in the request by a one-line note — in the request only; the conversation and the
//! transcript keep them.

use std::collections::HashMap;

use tokio_util::sync::CancellationToken;

use super::event::{CompactionEvent, CompactionPhase, Emitter, EventKind, TurnError};
use crate::config::{CompactionConfig, ModelInfo, RetryConfig};
use crate::history::conversation::{Conversation, is_tool_results};
use crate::providers::retry::{Failure, StreamSink};
use crate::providers::{AssistantPart, Message, ModelRequest, ResponseEvent, UserPart};

/// The characters-per-token ratio before any report calibrates it.
pub const DEFAULT_CHARS_PER_TOKEN: f64 = 3.5;
/// What an image costs in the estimate (Anthropic bills a typical screenshot at ~1,600 tokens).
const IMAGE_TOKENS: u64 = 1_600;
/// Tool results below this size are never pruned.
const PRUNE_MIN_CHARS: usize = 2_000;
/// Prompts whose tool results are never pruned.
const PRUNE_KEEP_PROMPTS: usize = 3;

/// Token accounting for one session.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Accounting {
    /// Tokens the provider reported for the context after the last request, and how many messages
    /// that context held.
    pub reported: Option<(u64, usize)>,
    pub chars_per_token: f64,
}

impl Default for Accounting {
    fn default() -> Self {
        Self { reported: None, chars_per_token: DEFAULT_CHARS_PER_TOKEN }
    }
}

/// Characters a message puts in the context (images count apart, see [`message_tokens`]).
fn message_chars(message: &Message) -> (usize, u64) {
    let mut chars = 0;
    let mut images = 0;
    match message {
        Message::User(parts) => {
            for p in parts {
                match p {
                    UserPart::Text(t) => chars += t.len(),
                    UserPart::Image { .. } => images += 1,
                    UserPart::ToolResult(r) => chars += r.content.len() + r.call_id.len() + 16,
                }
            }
        }
        Message::Assistant(parts) => {
            for p in parts {
                chars += match p {
                    AssistantPart::Text(t) => t.len(),
                    AssistantPart::Thinking { text, .. } => text.len(),
                    AssistantPart::RedactedThinking { data } => data.len() / 4,
                    AssistantPart::Signature { signature } => signature.len() / 4,
                    AssistantPart::Reasoning { summary, encrypted_content, .. } => {
                        summary.iter().map(String::len).sum::<usize>()
                            + encrypted_content.as_ref().map_or(0, |e| e.len() / 4)
                    }
                    AssistantPart::ToolCall { name, arguments, id } => name.len() + arguments.len() + id.len() + 16,
                };
            }
        }
    }
    (chars + 8, images)
}

impl Accounting {
    fn tokens(&self, chars: usize, images: u64) -> u64 {
        (chars as f64 / self.chars_per_token).ceil() as u64 + images * IMAGE_TOKENS
    }

    /// The estimated tokens of a request: `fixed_chars` (system prompt and tool schemas) and the
    /// messages.
    pub fn estimate(&self, fixed_chars: usize, messages: &[Message]) -> u64 {
        match self.reported {
            Some((tokens, covered)) if covered <= messages.len() => {
                let (chars, images) = sum_chars(&messages[covered..]);
                tokens + self.tokens(chars, images)
            }
            _ => {
                let (chars, images) = sum_chars(messages);
                self.tokens(chars + fixed_chars, images)
            }
        }
    }

    /// The provider reported `tokens` for the context made of `fixed_chars` and `messages`.
    pub fn observe(&mut self, tokens: u64, fixed_chars: usize, messages: &[Message]) {
        if tokens == 0 {
            return;
        }
        let (chars, images) = sum_chars(messages);
        let text_tokens = tokens.saturating_sub(images * IMAGE_TOKENS).max(1);
        let ratio = (chars + fixed_chars) as f64 / text_tokens as f64;
        if ratio.is_finite() {
            self.chars_per_token = ratio.clamp(1.5, 8.0);
        }
        self.reported = Some((tokens, messages.len()));
    }

    /// The conversation changed other than by appending: the last report no longer applies.
    pub fn forget_report(&mut self) {
        self.reported = None;
    }
}

fn sum_chars(messages: &[Message]) -> (usize, u64) {
    messages.iter().map(message_chars).fold((0, 0), |(c, i), (mc, mi)| (c + mc, i + mi))
}

/// Whether a request of `estimate` tokens should compact first.
pub fn over_threshold(config: &CompactionConfig, model: &ModelInfo, estimate: u64) -> bool {
    let window = model.context_window;
    let reserve = reserve(model);
    estimate + reserve > (window as f64 * config.threshold) as u64
}

/// Whether a request of `estimate` tokens is within `margin` tokens of compacting (the margin at
/// most a quarter of the threshold): when the memory is flushed.
pub fn near_threshold(config: &CompactionConfig, model: &ModelInfo, estimate: u64, margin: u64) -> bool {
    let limit = (model.context_window as f64 * config.threshold) as u64;
    estimate + reserve(model) + margin.min(limit / 4) > limit
}

fn reserve(model: &ModelInfo) -> u64 {
    u64::from(model.max_output_tokens.unwrap_or(4_096)).min(model.context_window / 4)
}

/// The first line of a heartbeat turn's prompt (the gateway's), by which a quiet one is known.
pub const HEARTBEAT_MARK: &str = "[heartbeat]";

/// The heartbeat turns before `before` that came to nothing — the prompt, then only
/// `HEARTBEAT_OK` or `NO_REPLY` (or nothing) —: left out of what the model is sent, so that a
/// heartbeat every half hour does not fill the context with them. The transcript keeps them.
pub fn quiet_heartbeats(messages: &[Message], before: usize) -> std::collections::HashSet<usize> {
    let mut quiet = std::collections::HashSet::new();
    let end = before.min(messages.len());
    for i in 0..end.saturating_sub(1) {
        let Message::User(parts) = &messages[i] else { continue };
        let [UserPart::Text(prompt)] = parts.as_slice() else { continue };
        if !prompt.starts_with(HEARTBEAT_MARK) {
            continue;
        }
        let Message::Assistant(reply) = &messages[i + 1] else { continue };
        if reply.iter().any(|part| matches!(part, AssistantPart::ToolCall { .. })) {
            continue;
        }
        let said: String = reply
            .iter()
            .filter_map(|part| if let AssistantPart::Text(text) = part { Some(text.as_str()) } else { None })
            .collect();
        let said = said.trim();
        let rest = said.strip_prefix("HEARTBEAT_OK").or_else(|| said.strip_suffix("HEARTBEAT_OK"));
        if said.is_empty() || said == "NO_REPLY" || rest.is_some_and(|r| r.trim().chars().count() <= 300) {
            quiet.insert(i);
            quiet.insert(i + 1);
        }
    }
    quiet
}

/// Replacements for old large tool results, by message index, when the context is past half the
/// window; empty otherwise.
pub fn prune(messages: &[Message], estimate: u64, window: u64) -> HashMap<usize, Message> {
    let mut out = HashMap::new();
    if estimate * 2 < window {
        return out;
    }
    // Messages from the third-last prompt on keep everything.
    let prompts: Vec<usize> = messages
        .iter()
        .enumerate()
        .filter(|(_, m)| matches!(m, Message::User(_)) && !is_tool_results(m))
        .map(|(i, _)| i)
        .collect();
    let Some(&keep_from) = prompts.len().checked_sub(PRUNE_KEEP_PROMPTS).and_then(|i| prompts.get(i)) else {
        return out;
    };
    for (i, m) in messages[..keep_from].iter().enumerate() {
        let Message::User(parts) = m else { continue };
        if !parts.iter().any(|p| matches!(p, UserPart::ToolResult(r) if r.content.len() > PRUNE_MIN_CHARS)) {
            continue;
        }
        let parts = parts
            .iter()
            .map(|p| match p {
                UserPart::ToolResult(r) if r.content.len() > PRUNE_MIN_CHARS => {
                    let mut r = r.clone();
                    r.content = format!(
                        "[{} characters of `{}` output pruned from the context to save space; run the tool again if you need it]",
                        r.content.len(),
                        r.name
                    );
                    UserPart::ToolResult(r)
                }
                other => other.clone(),
            })
            .collect();
        out.insert(i, Message::User(parts));
    }
    out
}

/// Where the kept part of the conversation starts: the earliest message boundary whose tail fits
/// `keep_tokens` (a boundary never falls on tool results), but never after `turn_start` — the
/// running turn's prompt stays verbatim unless the turn is all there is. `None` if nothing could be
/// summarised.
pub fn choose_cut(accounting: &Accounting, messages: &[Message], keep_tokens: u64, turn_start: usize) -> Option<usize> {
    let valid = |i: usize| i == messages.len() || !is_tool_results(&messages[i]);
    let mut kept = 0u64;
    let mut cut = messages.len();
    for i in (1..=messages.len()).rev() {
        let (c, im) = message_chars(&messages[i - 1]);
        kept += accounting.tokens(c, im);
        if kept > keep_tokens {
            break;
        }
        if valid(i - 1) {
            cut = i - 1;
        }
    }
    if cut == 0 {
        // Everything fits the budget: summarise all before the last prompt (or the last reply).
        cut = (1..messages.len())
            .rev()
            .find(|&i| valid(i) && matches!(messages[i], Message::User(_)))
            .or_else(|| (1..messages.len()).rev().find(|&i| valid(i)))?;
    }
    if turn_start > 0 && cut > turn_start {
        cut = turn_start;
    }
    (cut > 0).then_some(cut)
}

/// What a compaction needs.
pub(crate) struct CompactEnv<'a> {
    pub router: &'a super::failover::Router<'a>,
    pub model: &'a ModelInfo,
    pub retry: &'a RetryConfig,
    pub config: &'a CompactionConfig,
    pub cancel: &'a CancellationToken,
    pub events: &'a Emitter,
    pub fixed_chars: usize,
    /// Where the session's hooks run (`PreCompact`).
    pub hooks: &'a super::hooks::Place,
    /// Asked for (`/compact`), not automatic.
    pub manual: bool,
}

/// What a compaction did.
#[derive(Debug, Clone, PartialEq)]
pub struct Compacted {
    pub id: String,
    pub tokens_before: u64,
    pub tokens_after: u64,
    pub summarised: usize,
    pub kept: usize,
}

/// Summarises the older part of `conversation` and replaces it (recorded in the transcript).
pub(crate) async fn compact(
    env: &CompactEnv<'_>,
    conversation: &mut Conversation,
    accounting: &mut Accounting,
    instructions: Option<&str>,
) -> Result<Compacted, TurnError> {
    let id = format!("cmp_{}", uuid::Uuid::new_v4().simple());
    let messages = conversation.messages();
    let keep_tokens = (env.model.context_window as f64 * env.config.keep_recent) as u64;
    let Some(cut) = choose_cut(accounting, messages, keep_tokens, conversation.turn_start()) else {
        return Err(TurnError::new(
            "compaction",
            "there is nothing to compact yet: the conversation is a single message",
        ));
    };
    let before = accounting.estimate(env.fixed_chars, messages);
    // The user's `PreCompact` hooks: what they say goes to the summary's instructions.
    let trigger = if env.manual { "manual" } else { "auto" };
    let from_hooks = super::hooks::pre_compact(env.hooks, env.events, env.cancel, trigger, instructions).await;
    let messages = conversation.messages();
    env.events.emit(EventKind::Compaction(CompactionEvent { id: id.clone(), phase: CompactionPhase::Started }));
    env.events.flush();

    // The summary request must itself fit: bound the transcript it reads.
    let budget_tokens = env.model.context_window.saturating_sub(reserve(env.model) + 2_000).max(1_000);
    let budget_chars = (budget_tokens as f64 * accounting.chars_per_token * 0.8) as usize;
    let text = render_for_summary(&messages[..cut], budget_chars);
    let mut ask = String::with_capacity(text.len() + 1024);
    ask.push_str(
        "Summarise the conversation below so the work can continue from the summary alone. Keep: the user's \
         goals and requests, decisions and their reasons, files read or changed (paths) and what changed, \
         commands run and their outcome, errors still open, and the next steps. Be specific and brief; use \
         Markdown lists.",
    );
    if let Some(extra) = instructions {
        ask.push_str("\n\nThe user asks the summary to: ");
        ask.push_str(extra);
    }
    if let Some(extra) = from_hooks {
        ask.push_str("\n\nThe user's hooks ask the summary to keep in mind: ");
        ask.push_str(&extra);
    }
    ask.push_str("\n\n<conversation>\n");
    ask.push_str(&text);
    ask.push_str("\n</conversation>");
    let request_messages = [Message::User(vec![UserPart::Text(ask)])];
    let request = ModelRequest {
        model: &env.model.id,
        system: "You write precise summaries of conversations between a user and an AI coding assistant.",
        messages: request_messages.iter().collect(),
        max_output_tokens: None,
        reasoning: None,
        tools: &[],
        cache_key: None,
    };
    let mut sink = Collect::default();
    let result = env.router.stream(&request, Some(4_096), env.retry, env.cancel, &mut sink).await;
    let failed = |message: String, error: Option<crate::providers::ProviderError>| {
        env.events.emit(EventKind::Compaction(CompactionEvent {
            id: id.clone(),
            phase: CompactionPhase::Failed { error: message.clone() },
        }));
        match error {
            Some(e) => TurnError::from_provider(e),
            None => TurnError::new("compaction", message),
        }
    };
    match result {
        Ok(()) => {}
        Err(Failure::Cancelled) => return Err(failed("cancelled".into(), None)),
        Err(Failure::Provider(e)) => {
            let message = format!("compaction failed: {}", e.user_message());
            return Err(failed(message, Some(e)));
        }
    }
    let summary = sink.text.trim().to_owned();
    if summary.is_empty() {
        return Err(failed("compaction failed: the model returned an empty summary".into(), None));
    }
    let kept = messages.len() - cut;
    let mut after_conv = conversation.clone();
    after_conv.set_journal(None);
    after_conv.compact(&id, &summary, kept, 0, 0);
    accounting.forget_report();
    let after = accounting.estimate(env.fixed_chars, after_conv.messages());
    conversation.compact(&id, &summary, kept, before, after);
    env.events.emit(EventKind::Compaction(CompactionEvent {
        id: id.clone(),
        phase: CompactionPhase::Completed { summary, tokens_before: before, tokens_after: after },
    }));
    env.events.flush();
    Ok(Compacted { id, tokens_before: before, tokens_after: after, summarised: cut, kept })
}

/// `/memory`'s line on the flush before compaction.
pub(crate) fn flush_line(config: &crate::config::Config, conversation: &Conversation) -> String {
    if !config.memory.flush || !config.compaction.auto {
        return "Flush before compaction: off.\n".into();
    }
    let when = conversation.flushed_at().and_then(|ms| jiff::Timestamp::from_millisecond(ms).ok());
    match when {
        Some(at) => format!(
            "Flush before compaction: last at {}{}.\n",
            at.strftime("%Y-%m-%d %H:%M:%S UTC"),
            if conversation.flushed() { " (not again before the next compaction)" } else { "" }
        ),
        None => format!(
            "Flush before compaction: not yet in this session (it comes {} tokens before the context is compacted).\n",
            config.memory.flush_margin
        ),
    }
}

/// Automatic compaction within one turn: before each request when the context nears the window's
/// threshold, and once more when the provider still finds the prompt too long.
#[derive(Debug, Default)]
pub(crate) struct AutoCompact {
    /// The conversation's length right after the last compaction: no point compacting it again
    /// before something new is added.
    compacted_at: Option<usize>,
    /// Whether the turn already compacted after an overflow (it does so once).
    after_overflow: bool,
}

/// The turn was cancelled while compacting.
#[derive(Debug)]
pub(crate) struct Cancelled;

impl AutoCompact {
    /// Compacts if the next request would pass the threshold. A failure is logged and the request
    /// goes out anyway (the provider may still take it); only a cancel stops the turn.
    pub(crate) async fn before_request(
        &mut self,
        env: &CompactEnv<'_>,
        conversation: &mut Conversation,
        accounting: &mut Accounting,
    ) -> Result<(), Cancelled> {
        let estimate = accounting.estimate(env.fixed_chars, conversation.messages());
        if !env.config.auto
            || self.compacted_at == Some(conversation.len())
            || !over_threshold(env.config, env.model, estimate)
        {
            return Ok(());
        }
        tracing::info!(estimate, window = env.model.context_window, "context nearly full; compacting");
        let done = compact(env, conversation, accounting, None).await;
        self.compacted_at = Some(conversation.len());
        match done {
            Ok(_) => Ok(()),
            Err(_) if env.cancel.is_cancelled() => Err(Cancelled),
            Err(e) => {
                tracing::warn!(error = %e.message, "automatic compaction failed; sending the request anyway");
                Ok(())
            }
        }
    }

    /// The provider said the prompt is too long and nothing of the reply was shown: compacts once
    /// per turn. True if the request should be sent again.
    pub(crate) async fn after_overflow(
        &mut self,
        env: &CompactEnv<'_>,
        conversation: &mut Conversation,
        accounting: &mut Accounting,
    ) -> bool {
        if !env.config.auto || self.after_overflow {
            return false;
        }
        self.after_overflow = true;
        tracing::info!("the provider says the prompt is too long; compacting and retrying");
        match compact(env, conversation, accounting, None).await {
            Ok(_) => true,
            Err(e) => {
                tracing::warn!(error = %e.message, "compaction after an overflow failed");
                false
            }
        }
    }
}

/// The messages as plain text for the summariser, each tool result cut to a few lines, the whole cut
/// to `budget` characters (head and tail).
fn render_for_summary(messages: &[Message], budget: usize) -> String {
    let mut out = String::new();
    for m in messages {
        match m {
            Message::User(parts) => {
                for p in parts {
                    match p {
                        UserPart::Text(t) => {
                            out.push_str("\n[user]\n");
                            out.push_str(t);
                            out.push('\n');
                        }
                        UserPart::Image { .. } => out.push_str("\n[user sent an image]\n"),
                        UserPart::ToolResult(r) => {
                            out.push_str(&format!(
                                "[result of {}{}]\n",
                                r.name,
                                if r.is_error { ", failed" } else { "" }
                            ));
                            out.push_str(&clip(&r.content, 1_500));
                            out.push('\n');
                        }
                    }
                }
            }
            Message::Assistant(parts) => {
                for p in parts {
                    match p {
                        AssistantPart::Text(t) => {
                            out.push_str("\n[assistant]\n");
                            out.push_str(t);
                            out.push('\n');
                        }
                        AssistantPart::ToolCall { name, arguments, .. } => {
                            out.push_str(&format!("[assistant called {name} {}]\n", clip(arguments, 500)));
                        }
                        _ => {}
                    }
                }
            }
        }
    }
    if out.len() <= budget {
        return out;
    }
    let head = floor_boundary(&out, budget * 3 / 10);
    let tail = ceil_boundary(&out, out.len() - budget * 7 / 10);
    format!("{}\n\n[… the middle of the conversation is omitted …]\n\n{}", &out[..head], &out[tail..])
}

fn clip(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let end = floor_boundary(text, max);
    format!("{}… [{} more characters]", &text[..end], text.len() - end)
}

fn floor_boundary(s: &str, mut i: usize) -> usize {
    i = i.min(s.len());
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn ceil_boundary(s: &str, mut i: usize) -> usize {
    i = i.min(s.len());
    while !s.is_char_boundary(i) {
        i += 1;
    }
    i
}

/// Collects the summary's text.
#[derive(Default)]
struct Collect {
    text: String,
}

impl StreamSink for Collect {
    fn event(&mut self, event: ResponseEvent) {
        match event {
            ResponseEvent::TextDelta(t) => self.text.push_str(&t),
            ResponseEvent::Restarted => self.text.clear(),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quiet_heartbeats_are_left_out_and_those_that_spoke_or_acted_stay() {
        let user = |t: &str| Message::User(vec![UserPart::Text(t.into())]);
        let said = |t: &str| Message::Assistant(vec![AssistantPart::Text(t.into())]);
        let beat = format!("{HEARTBEAT_MARK}\ncheck");
        let messages = vec![
            user("hello"),
            said("hi"),
            user(&beat),
            said("HEARTBEAT_OK"),
            user(&beat),
            said("The build is red."),
            user(&beat),
            said("All quiet. HEARTBEAT_OK"),
            user(&beat),
            said("NO_REPLY"),
            // The running turn: never left out.
            user(&beat),
            said("HEARTBEAT_OK"),
        ];
        let quiet = quiet_heartbeats(&messages, 10);
        let mut quiet: Vec<usize> = quiet.into_iter().collect();
        quiet.sort_unstable();
        assert_eq!(quiet, [2, 3, 6, 7, 8, 9]);
        // A user's own message that looks like one is kept unless the reply was silent.
        assert!(quiet_heartbeats(&[user("[heartbeat] mine"), said("Sure, here it is.")], 2).is_empty());
    }
    use crate::providers::ToolResult;

    fn user(t: &str) -> Message {
        Message::User(vec![UserPart::Text(t.into())])
    }

    fn call(id: &str) -> Message {
        Message::Assistant(vec![AssistantPart::ToolCall { id: id.into(), name: "read".into(), arguments: "{}".into() }])
    }

    fn result(id: &str, size: usize) -> Message {
        Message::User(vec![UserPart::ToolResult(ToolResult {
            call_id: id.into(),
            name: "read".into(),
            content: "x".repeat(size),
            is_error: false,
        })])
    }

    #[test]
    fn estimates_start_from_the_last_report_and_calibrate() {
        let mut a = Accounting::default();
        let msgs = vec![user(&"a".repeat(3_492))];
        assert_eq!(a.estimate(0, &msgs), 1_000);
        a.observe(500, 0, &msgs);
        assert!((a.chars_per_token - 7.0).abs() < 0.01, "{}", a.chars_per_token);
        let mut more = msgs.clone();
        more.push(user(&"b".repeat(692)));
        // 500 reported + 700 chars at 7 chars per token.
        assert_eq!(a.estimate(0, &more), 600);
        a.forget_report();
        assert_eq!(a.estimate(0, &more), 600);
    }

    #[test]
    fn threshold_counts_the_output_reserve() {
        let model = ModelInfo { id: "m".into(), name: None, context_window: 10_000, max_output_tokens: Some(1_000) };
        let c = CompactionConfig { auto: true, threshold: 0.8, keep_recent: 0.25 };
        assert!(!over_threshold(&c, &model, 7_000));
        assert!(over_threshold(&c, &model, 7_001));
    }

    #[test]
    fn cuts_keep_recent_messages_and_never_orphan_results() {
        let a = Accounting::default();
        let msgs = vec![user("a"), call("1"), result("1", 7_000), call("2"), result("2", 350), user("b")];
        // Budget for ~ the last three messages: the cut lands on call("2"), not on its result.
        let cut = choose_cut(&a, &msgs, 150, 0).unwrap();
        assert_eq!(cut, 3);
        // A single message cannot be summarised.
        assert_eq!(choose_cut(&a, &[user("only")], 10, 0), None);
        // The running turn's prompt is kept even when it alone is over the budget.
        let big = vec![user("a"), call("1"), result("1", 10), user(&"q".repeat(10_000))];
        assert_eq!(choose_cut(&a, &big, 100, 3), Some(3));
    }

    #[test]
    fn pruning_spares_recent_and_small_results() {
        let msgs = vec![
            user("1"),
            call("a"),
            result("a", 5_000),
            call("s"),
            result("s", 100),
            user("2"),
            user("3"),
            call("b"),
            result("b", 5_000),
            user("4"),
        ];
        assert!(prune(&msgs, 10, 1_000).is_empty(), "below half the window nothing is pruned");
        let pruned = prune(&msgs, 600, 1_000);
        assert_eq!(pruned.keys().copied().collect::<Vec<_>>(), vec![2]);
        let Message::User(parts) = &pruned[&2] else { panic!() };
        let UserPart::ToolResult(r) = &parts[0] else { panic!() };
        assert!(r.content.contains("5000 characters of `read` output pruned"));
    }

    #[test]
    fn the_summary_input_is_bounded() {
        let msgs = vec![user(&"q".repeat(10_000)), call("1"), result("1", 50_000)];
        let text = render_for_summary(&msgs, 4_000);
        assert!(text.len() < 4_200);
        assert!(text.contains("middle of the conversation is omitted"));
    }
}
