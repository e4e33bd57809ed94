//! The chat side of a channel's inbox: its own commands (`/queue`, `/send`, `/pair`, `/verbose`,
//! `/reasoning`), and permission questions asked in the chat and answered there.

use super::{Channel, Inbox, Question, Route};
use crate::clock::now_ms;
use crate::gateway::approvals::{ChatAsker, ChatQuestion};
use crate::gateway::channels::policy::{Prefs, Show, ShowReasoning, Verbose};
use crate::gateway::channels::queue;
use crate::gateway::channels::routing::PeerKind;
use crate::runtime::directives;
use crate::runtime::host::{OptionKind, PermissionOption};
use crate::sync::lock;

impl<C: Channel> Inbox<C> {
    /// The channel's own commands; `None` for the runtime's (and unknown ones, which the
    /// runtime answers or passes to the model).
    pub(super) fn chat_command(&self, key: &str, sender: &str, text: &str, route: &Route) -> Option<String> {
        let (name, args) = text.split_once(char::is_whitespace).unwrap_or((text, ""));
        let args = args.trim();
        match name.to_lowercase().as_str() {
            "/queue" => Some(self.queue_command(key, args)),
            "/send" => Some(self.send_command(key, sender, args, route)),
            "/pair" => Some(self.pair_command(sender, args)),
            "/verbose" | "/reasoning" | "/reason" => self.show_command(key, sender, text, route),
            "/approve" | "/deny" | "/reject" => Some("No question is waiting.".into()),
            "/help" if args.is_empty() => Some(format!(
                "{}\n**In this chat**\n\n\
                 - `/queue [mode] [debounce:2s cap:20 drop:old|new|summarize]` — what happens to messages sent during a run\n\
                 - `/send on|off|inherit` — whether replies are delivered here\n\
                 - `/verbose on|full|off` — a line for each tool call, or each with its output\n\
                 - `/reasoning on|off|stream` — the model's reasoning, when it ends or as it comes\n\
                 (`/think`, `/model`, `/verbose` and `/reasoning` among other words hold for that message only)\n\
                 - `/approve N`, `/deny` — answer a permission question (or just the number)\n\
                 - `/pair`, `/pair approve CODE`, `/pair reject CODE` — pairing requests (owners)\n",
                crate::runtime::commands::help_text()
            )),
            _ => None,
        }
    }

    /// `/verbose` and `/reasoning` alone (owners, and the person of a direct chat): what this
    /// chat is shown of its runs. `None` when they come with other words: then they are that
    /// message's (see `run_once`).
    fn show_command(&self, key: &str, sender: &str, text: &str, route: &Route) -> Option<String> {
        let found = directives::scan(text, directives::CHAT, |name, arg| Show::default().take(name, arg));
        if !found.directives.is_empty() && !found.rest.is_empty() {
            return None;
        }
        let prefs = self.prefs.get(key);
        let show = |prefs: &Prefs| {
            let s = Show::of(prefs);
            format!("Verbose: {}. Reasoning: {}.", s.verbose.as_str(), s.reasoning.as_str())
        };
        if found.directives.is_empty() {
            let args = text.split_once(char::is_whitespace).map_or("", |(_, a)| a.trim());
            return Some(if args.is_empty() {
                show(&prefs)
            } else {
                format!("Unknown setting `{args}`: use /verbose on|full|off or /reasoning on|off|stream.")
            });
        }
        if !self.may_change(sender, route) {
            return Some("Only the owner can change what this chat is shown.".into());
        }
        self.prefs.change(key, |p| {
            for d in &found.directives {
                match d.name {
                    "verbose" => p.verbose = Verbose::parse(&d.arg),
                    _ => p.reasoning = ShowReasoning::parse(&d.arg),
                }
            }
        });
        Some(show(&self.prefs.get(key)))
    }

    /// Whether `sender` may change this chat's settings: an owner, or the person of a direct chat.
    pub(super) fn may_change(&self, sender: &str, route: &Route) -> bool {
        self.is_owner(sender) || (route.kind == PeerKind::Direct && route.peer == sender)
    }

    fn queue_command(&self, key: &str, args: &str) -> String {
        let current = self.queue_settings(key);
        match queue::parse_command(args, current) {
            Ok(queue::Asked::Show) => format!(
                "Queue: {}. Set with /queue collect|followup|steer|steer-backlog|interrupt debounce:1s cap:20 drop:old|new|summarize; /queue default resets it.",
                current.describe()
            ),
            Ok(queue::Asked::Reset) => {
                self.prefs.change(key, |p| p.queue = None);
                format!("Queue: {} (the default).", self.settings.queue.describe())
            }
            Ok(queue::Asked::Set(s)) => {
                self.prefs.change(key, |p| p.queue = Some(s));
                format!("Queue: {}.", s.describe())
            }
            Err(e) => format!("{e}."),
        }
    }

    /// `/send on|off|inherit`: whether this session's replies are delivered (owners, and the
    /// person of a direct chat).
    fn send_command(&self, key: &str, sender: &str, args: &str, route: &Route) -> String {
        let may = self.may_change(sender, route);
        let current = self.prefs.get(key).send;
        let show = |own: Option<bool>| {
            let on = self.settings.send_policy.allows(self.channel.id(), route.kind, key, own);
            let from = if own.is_some() { "set for this chat" } else { "from the send policy" };
            format!("Replies here: {} ({from}).", if on { "on" } else { "off" })
        };
        let value = match args.to_lowercase().as_str() {
            "" => return show(current),
            "on" | "allow" => Some(true),
            "off" | "deny" => Some(false),
            "inherit" | "default" => None,
            other => return format!("Unknown setting `{other}`: use /send on, off or inherit."),
        };
        // Only an owner overrides a policy that denies this chat.
        let denied = !self.settings.send_policy.allows(self.channel.id(), route.kind, key, None);
        if !may || (denied && value == Some(true) && !self.is_owner(sender)) {
            return "Only the owner can change where replies go.".into();
        }
        self.prefs.change(key, |p| p.send = value);
        show(value)
    }

    /// `/pair` (owners): the pairing requests waiting and who is approved; `/pair approve CODE`,
    /// `/pair reject CODE`.
    fn pair_command(&self, sender: &str, args: &str) -> String {
        let channel = self.scope.as_str();
        if !self.is_owner(sender) {
            return format!(
                "Only the owner can manage pairing (a sender listed in allow_from of [channels.{channel}])."
            );
        }
        let mut words = args.split_whitespace();
        match (words.next().map(str::to_lowercase).as_deref(), words.next()) {
            (Some("approve"), Some(code)) => match self.pairings.approve(channel, code) {
                Ok(p) => format!("Approved {} ({}).", p.name, p.peer),
                Err(e) => format!("{e}."),
            },
            (Some("reject"), Some(code)) => match self.pairings.reject(channel, code) {
                Ok(p) => format!("Rejected {} ({}).", p.name, p.peer),
                Err(e) => format!("{e}."),
            },
            (None, _) => {
                let now = now_ms();
                let waiting: Vec<String> = self
                    .pairings
                    .pending()
                    .into_iter()
                    .filter(|p| p.channel == channel)
                    .map(|p| {
                        let left =
                            (crate::gateway::channels::access::CODE_TTL_MS - (now - p.created_ms)).max(0) / 60_000;
                        format!("- {} from {} ({}), {left} min left", p.code, p.name, p.peer)
                    })
                    .collect();
                let policy = self.policy_name();
                let approved = self.pairings.approved(channel);
                if waiting.is_empty() {
                    format!("Pairing ({policy}): no requests waiting; {approved} approved.")
                } else {
                    format!(
                        "Pairing ({policy}): {} waiting; {approved} approved.\n{}\nApprove with /pair approve CODE.",
                        waiting.len(),
                        waiting.join("\n")
                    )
                }
            }
            _ => "Use /pair, /pair approve CODE or /pair reject CODE.".into(),
        }
    }

    /// An answer to the question waiting in session `key`'s chat: the option's number (alone or
    /// after `/approve`), `/approve` (allow once) or `/deny`. Only the person whose message
    /// started the run, or an owner, answers. False if the message is not an answer.
    /// `addressed`: a direct chat, or the bot was mentioned (else a group member's stray number
    /// is not taken as a refused answer).
    pub(super) async fn answered(
        &self,
        key: &str,
        sender: &str,
        name: &str,
        text: &str,
        route: &Route,
        addressed: bool,
    ) -> bool {
        let lower = text.to_lowercase();
        let (command, arg) = lower.split_once(char::is_whitespace).map_or((lower.as_str(), ""), |(c, a)| (c, a.trim()));
        let pick = |options: &[PermissionOption]| -> Option<Option<String>> {
            let by_number =
                |n: &str| n.parse::<usize>().ok().map(|n| options.get(n.wrapping_sub(1)).map(|o| o.id.clone()));
            let of_kind = |kinds: &[OptionKind]| options.iter().find(|o| kinds.contains(&o.kind)).map(|o| o.id.clone());
            match command {
                "/approve" if arg.is_empty() => Some(of_kind(&[OptionKind::AllowOnce])),
                "/approve" => by_number(arg).or(Some(None)),
                "/deny" | "/reject" => Some(of_kind(&[OptionKind::RejectOnce, OptionKind::RejectAlways])),
                n if arg.is_empty() => by_number(n),
                _ => None,
            }
        };
        enum Answer {
            Chosen(String, String),
            /// Not theirs to answer (a guest's run: an owner's).
            NotTheirs(bool),
            OutOfRange(usize),
        }
        let answer = {
            let mut lanes = lock(&self.lanes);
            let Some(lane) = lanes.get_mut(key) else { return false };
            let Some(question) = &lane.question else { return false };
            let Some(chosen) = pick(&question.options) else { return false };
            // The person who started the run answers, or an owner; a run with a guest's words in
            // it under the default `guest_mode = "ask"`, only an owner.
            let owners_only = lane.guest_run && self.settings.guest_mode == crate::runtime::Mode::Ask;
            let may = self.is_owner(sender) || (sender == lane.starter && !owners_only);
            if !may {
                if !addressed && !command.starts_with('/') {
                    return false;
                }
                Answer::NotTheirs(owners_only)
            } else if let Some(chosen) = chosen {
                let id = question.id.clone();
                lane.question = None;
                Answer::Chosen(id, chosen)
            } else {
                Answer::OutOfRange(question.options.len())
            }
        };
        let (id, chosen) = match answer {
            Answer::Chosen(id, chosen) => (id, chosen),
            Answer::NotTheirs(guest) => {
                let who = if guest {
                    "Only an owner can answer this (someone in allow_from, or a gateway approver)."
                } else {
                    "Only the person whose message started this can answer it."
                };
                self.say(route, who).await;
                return true;
            }
            Answer::OutOfRange(n) => {
                self.say(route, &format!("Answer with a number from 1 to {n}, or /deny.")).await;
                return true;
            }
        };
        let who = format!("{name} on {}", self.channel.id());
        // The next question waiting, if any, is posted after this answer.
        let next = {
            let mut lanes = lock(&self.lanes);
            lanes.get_mut(key).and_then(|lane| {
                lane.question = lane.later.pop_front();
                lane.question.as_ref().map(|q| q.text.clone())
            })
        };
        match self.host.answer_question(&id, &chosen, &who) {
            Ok(label) => self.say(route, &format!("{label}.")).await,
            Err(e) => self.say(route, &format!("That question is no longer waiting ({e}).")).await,
        }
        if let Some(next) = next {
            self.say(route, &next).await;
        }
        true
    }
}

impl<C: Channel> ChatAsker for Inbox<C> {
    fn ask(&self, key: &str, id: &str, q: &ChatQuestion) -> bool {
        let mut text = format!("Permission needed: {}\n", q.title);
        if let Some(command) = &q.command {
            text.push_str(&format!("\n```\n{command}\n```\n"));
        }
        for file in &q.files {
            text.push_str(&format!("File: `{file}`\n"));
        }
        for shown in &q.texts {
            // Quoted whole, up to what one message holds.
            let mut shown = shown.clone();
            if shown.chars().count() > 1500 {
                shown = shown.chars().take(1500).collect::<String>() + "…";
            }
            text.push_str(&format!("\n```\n{}\n```\n", shown.replace("```", "'''")));
        }
        text.push('\n');
        for (n, option) in q.options.iter().enumerate() {
            text.push_str(&format!("{}. {}\n", n + 1, option.label));
        }
        let secs = q.timeout.as_secs();
        let within = if secs < 120 { format!("{secs} s") } else { format!("{} min", secs.div_ceil(60)) };
        let route = {
            let mut lanes = lock(&self.lanes);
            let Some(lane) = lanes.get_mut(key) else { return false };
            let owners_only = lane.guest_run && self.settings.guest_mode == crate::runtime::Mode::Ask;
            let who = if owners_only { "An owner replies" } else { "Reply" };
            text.push_str(&format!(
                "\n{who} with the number (or /approve N, /deny). Without an answer in {within} it is not run."
            ));
            // A chat replies may not go to is not asked either.
            if !self.delivers(key, &lane.run_route) {
                return false;
            }
            let question = Question { id: id.to_owned(), options: q.options.clone(), text: text.clone() };
            if lane.question.is_some() {
                lane.later.push_back(question);
                return true;
            }
            lane.question = Some(question);
            lane.run_route.clone()
        };
        let Some(this) = self.me.upgrade() else { return false };
        tokio::spawn(async move { this.say(&route, &text).await });
        true
    }

    fn closed(&self, key: &str, id: &str, how: &str) {
        let route = {
            let mut lanes = lock(&self.lanes);
            let Some(lane) = lanes.get_mut(key) else { return };
            if lane.question.as_ref().is_none_or(|q| q.id != id) {
                // Answered here, or one that was never posted: it is simply dropped.
                lane.later.retain(|q| q.id != id);
                return;
            }
            lane.question = lane.later.pop_front();
            (lane.run_route.clone(), lane.question.as_ref().map(|q| q.text.clone()))
        };
        let how = how.to_owned();
        if let Some(this) = self.me.upgrade() {
            tokio::spawn(async move {
                this.say(&route.0, &how).await;
                if let Some(next) = route.1 {
                    this.say(&route.0, &next).await;
                }
            });
        }
    }
}
