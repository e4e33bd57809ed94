//! Slash commands end to end: each answers as agent text and ends the prompt with `end_turn`;
//! wrong arguments get the usage; settings changes reach the editor as config updates and the
//! next request; `/stop` stops a running turn; none but `/compact` calls the model.

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::support::agent::Agent;
use crate::support::expect::{
    ANTHROPIC_MODELS, chunk, config_options, ended, result, turn, usage_update, without_usage,
};
use crate::support::mock_model::{MockModel, Reply};
use crate::support::options_for;
use crate::support::script::text;

fn said(updates: &[Value]) -> String {
    updates
        .iter()
        .filter(|u| u["sessionUpdate"] == "agent_message_chunk")
        .map(|u| u["content"]["text"].as_str().unwrap())
        .collect()
}

/// Runs a command; returns (the text it answered, every update).
fn command(agent: &mut Agent, session: &str, line: &str) -> (String, Vec<Value>) {
    let (updates, response) = agent.prompt(session, line);
    assert_eq!(response["result"], json!({"stopReason": "end_turn"}), "{line}\n{}", agent.stderr());
    (said(&updates), updates)
}

/// The `config_option_update` a settings change sends (the Anthropic models on offer).
fn config_update(model: &str, thought: &str) -> Value {
    json!({"sessionUpdate": "config_option_update", "configOptions": config_options(model, &ANTHROPIC_MODELS, "code", thought)})
}

#[test]
fn every_command_once() {
    let mock = MockModel::start();
    let mut agent = Agent::in_process(options_for("anthropic", &mock));
    agent.initialize();
    let session = agent.new_session();
    mock.push(text("anthropic", "Hi!"));
    agent.prompt(&session, "hello");
    let requests = || mock.requests().len();
    assert_eq!(requests(), 1);

    let (help, _) = command(&mut agent, &session, "/help");
    assert_eq!(
        help,
        "**Commands**\n\n\
         - `/help` — List the slash commands\n\
         - `/status` — Model, mode, context-window fill, tokens and session id\n\
         - `/context [list|detail]` — What the context holds: instruction files, tool schemas, system prompt, history\n\
         - `/compact [instructions for the summary]` — Summarise the conversation so far to free the context window\n\
         - `/model [provider/model]` — Show or switch the model\n\
         - `/think off|minimal|low|medium|high|xhigh` — How much the model reasons before answering\n\
         - `/new [provider/model]` — Start over with an empty context (optionally with another model)\n\
         - `/reset` — Clear the conversation's context\n\
         - `/stop` — Stop the running turn and everything queued\n\
         - `/usage` — Tokens used by this session\n\
         - `/network [on|off]` — Let sandboxed commands use the network, or not (this session)\n\
         - `/mcp [restart NAME]` — MCP servers: their state, tools, prompts, resources and last error\n\
         - `/lsp` — Language servers: their state, open files and problems\n\
         - `/skills` — Skills: those offered to the model, where each comes from, and why others are not\n\
         - `/memory` — Memory: the files indexed for memory_search, and whether this session reads them\n\
         - `/hooks [allow]` — Hooks: those configured, the workspace's, and how each last went\n"
    );

    // Memory: where the files are, what the index holds (built already by the session's watcher,
    // or not yet), and the flush.
    let (memory, _) = command(&mut agent, &session, "/memory");
    let ws = agent.home.path().join("workspace");
    let index = agent.home.path().join("memory/main.sqlite");
    let index_line = memory.lines().nth(2).unwrap_or_default().to_owned();
    assert!(
        index_line == "Index: not built yet."
            || index_line == format!("Index: {} — 0 files, 0 pieces", index.display()),
        "{index_line}"
    );
    assert_eq!(
        memory.replace(&format!("{index_line}\n"), ""),
        format!(
            "Memory files: {} (MEMORY.md, memory/*.md)\n\
             This session reads MEMORY.md and today's and yesterday's logs, and may search the rest.\n\
             Flush before compaction: not yet in this session (it comes 4000 tokens before the context is compacted).\n",
            ws.display()
        )
    );

    // Every line but the sandbox's, which says what this machine's kernel offers.
    let (status, _) = command(&mut agent, &session, "/status");
    let home = agent.home.path().display().to_string();
    let lines: Vec<&str> = status.lines().filter(|l| !l.starts_with("- Sandbox: ")).collect();
    assert_eq!(
        lines,
        [
            format!("**Session** `{session}`"),
            String::new(),
            "- Model: `anthropic/claude-sonnet-4-5`".to_owned(),
            "- Mode: Code · Thinking: default".to_owned(),
            "- Context: ~70 of 200,000 tokens (1%)".to_owned(),
            "- Tokens: 50 in · 20 out".to_owned(),
            "- Turns: 1 · Messages in context: 2".to_owned(),
            format!("- Working directory: `{home}`"),
            format!("- Transcript: `{home}/sessions/{session}.jsonl`"),
        ]
    );

    let (usage, _) = command(&mut agent, &session, "/usage");
    assert_eq!(
        usage,
        "**Usage** (this session)\n\n- Input: 50 tokens (cache read 0, cache write 0)\n- Output: 20 tokens\n\
         - Read from the prompt cache: 0% of input\n- Total: 70 tokens\n- Context now: ~70 of 200,000 tokens (1%)\n"
    );

    let (context, _) = command(&mut agent, &session, "/context");
    assert!(context.contains("| System prompt |") && context.contains("Tool schemas (12 tools)"), "{context}");
    assert!(context.contains("Conversation (2 messages)"), "{context}");
    assert!(!context.contains("**System prompt**"));
    let (detail, _) = command(&mut agent, &session, "/context detail");
    assert!(detail.contains("- `update_plan`:") && detail.contains("**System prompt**"), "{detail}");
    assert!(detail.contains("You are acp"), "the system prompt itself: {detail}");

    let available = |current: &str| {
        let list: String = ANTHROPIC_MODELS
            .iter()
            .map(|m| if *m == current { format!("- `{m}` ← current\n") } else { format!("- `{m}`\n") })
            .collect();
        format!("Current model: `{current}`.\n\nAvailable (switch with `/model provider/model`):\n{list}")
    };
    let (models, updates) = command(&mut agent, &session, "/model");
    assert_eq!(turn(&updates), json!([chunk("agent_message_chunk", &available("anthropic/claude-sonnet-4-5"))]));
    assert_eq!(models, available("anthropic/claude-sonnet-4-5"));
    let (_, updates) = command(&mut agent, &session, "/model anthropic/claude-opus-4-6");
    let opus = "anthropic/claude-opus-4-6";
    assert_eq!(
        turn(&updates),
        json!([
            config_update(opus, "default"),
            chunk("agent_message_chunk", "Model: `anthropic/claude-opus-4-6`, from the next prompt on.")
        ])
    );
    // An unknown model changes nothing, and says what there is.
    let (_, updates) = command(&mut agent, &session, "/model nope/x");
    let unknown = format!(
        "unknown provider `nope` in `nope/x`; known providers: anthropic, openai, openai-responses, gemini\n\n{}",
        available(opus)
    );
    assert_eq!(turn(&updates), json!([chunk("agent_message_chunk", &unknown)]));

    let (_, updates) = command(&mut agent, &session, "/think high");
    assert_eq!(turn(&updates), json!([config_update(opus, "high"), chunk("agent_message_chunk", "Thinking: high.")]));
    let (_, updates) = command(&mut agent, &session, "/think off");
    assert_eq!(
        turn(&updates),
        json!([
            config_update(opus, "default"),
            chunk("agent_message_chunk", "Thinking: off (the provider's default).")
        ])
    );
    command(&mut agent, &session, "/think medium");
    assert_eq!(requests(), 1, "no command so far asked the model");

    // The settings reach the next request.
    mock.push(text("anthropic", "Sure."));
    agent.prompt(&session, "again");
    let body = mock.requests()[1].body.clone();
    assert_eq!(body["model"], "claude-opus-4-6");
    assert!(body["thinking"]["budget_tokens"].as_u64().unwrap() > 0, "{body}");
    assert_eq!(body["messages"].as_array().unwrap().len(), 3);

    // /compact summarises with the model and the next request starts from the summary.
    mock.push(text("anthropic", "The user said hello twice."));
    let (compacted, _) = command(&mut agent, &session, "/compact keep greetings");
    assert!(compacted.starts_with("Compacted the conversation"), "{compacted}");
    let summary_request = mock.requests()[2].body.clone();
    let ask = summary_request["messages"][0]["content"][0]["text"].as_str().unwrap();
    assert!(ask.contains("keep greetings") && ask.contains("<conversation>"), "{ask}");
    mock.push(text("anthropic", "Yes."));
    agent.prompt(&session, "after compaction");
    let body = mock.requests()[3].body.clone();
    let first = body["messages"][0]["content"][0]["text"].as_str().unwrap();
    assert!(first.contains("The user said hello twice."), "{body}");

    // `/reset` saves the ending conversation to the memory first, and says where.
    let (_, updates) = command(&mut agent, &session, "/reset");
    let updates = turn(&updates);
    let saved = updates[0]["content"]["text"].as_str().unwrap_or_default();
    assert!(saved.starts_with("Saved the conversation's gist to memory/") && saved.contains(".md"), "{saved}");
    let gist = std::fs::read_dir(agent.home.path().join("workspace/memory")).unwrap().count();
    assert_eq!(gist, 1);
    assert_eq!(
        json!(updates.as_array().unwrap()[1..]),
        json!([
            usage_update(0, 200_000),
            chunk("agent_message_chunk", "The context is cleared: the model sees an empty conversation from here on.")
        ])
    );
    mock.push(text("anthropic", "Fresh."));
    agent.prompt(&session, "fresh start");
    assert_eq!(mock.requests()[4].body["messages"].as_array().unwrap().len(), 1);

    let (_, updates) = command(&mut agent, &session, "/new anthropic/claude-haiku-4-5");
    let updates = turn(&updates);
    let saved = updates[0]["content"]["text"].as_str().unwrap_or_default();
    assert!(saved.contains("-fresh-start.md"), "{saved}");
    assert_eq!(std::fs::read_dir(agent.home.path().join("workspace/memory")).unwrap().count(), 2);
    assert_eq!(
        json!(updates.as_array().unwrap()[1..]),
        json!([
            usage_update(0, 200_000),
            config_update("anthropic/claude-haiku-4-5", "medium"),
            chunk(
                "agent_message_chunk",
                "Started over: the model sees an empty conversation from here on. Model: `anthropic/claude-haiku-4-5`."
            )
        ])
    );
    mock.push(text("anthropic", "New."));
    agent.prompt(&session, "brand new");
    let body = mock.requests()[5].body.clone();
    assert_eq!(body["model"], "claude-haiku-4-5");
    assert_eq!(body["messages"].as_array().unwrap().len(), 1);

    let (stop, _) = command(&mut agent, &session, "/stop");
    assert_eq!(stop, "Nothing is running.");
    assert_eq!(mock.requests().len(), 6);

    // Unknown commands and other slashes go to the model as typed.
    mock.push(text("anthropic", "That path is fine."));
    agent.prompt(&session, "/usr/bin/env");
    assert_eq!(mock.requests()[6].body["messages"][2]["content"][0]["text"], "/usr/bin/env");
}

#[test]
fn bad_arguments_get_the_usage_and_nothing_changes() {
    let mock = MockModel::start();
    let mut agent = Agent::in_process(options_for("anthropic", &mock));
    agent.initialize();
    let session = agent.new_session();
    let no_arguments = "This command takes no arguments.";
    let think = "`/think off|minimal|low|medium|high|xhigh` — How much the model reasons before answering";
    for (line, wrong, usage) in [
        ("/think hard", "Unknown level `hard`: use off, minimal, low, medium, high or xhigh.", think),
        ("/think", "Say how much: off, minimal, low, medium, high or xhigh.", think),
        (
            "/context everything",
            "Unknown argument `everything`: use `list` or `detail`.",
            "`/context [list|detail]` — What the context holds: instruction files, tool schemas, system prompt, history",
        ),
        ("/status please", no_arguments, "`/status` — Model, mode, context-window fill, tokens and session id"),
        (
            "/new a b",
            "Give at most one model, as `provider/model`.",
            "`/new [provider/model]` — Start over with an empty context (optionally with another model)",
        ),
        ("/help me", no_arguments, "`/help` — List the slash commands"),
        ("/reset now", no_arguments, "`/reset` — Clear the conversation's context"),
        ("/stop it", no_arguments, "`/stop` — Stop the running turn and everything queued"),
        ("/usage today", no_arguments, "`/usage` — Tokens used by this session"),
    ] {
        // The usage and nothing else: no settings change.
        let (_, updates) = command(&mut agent, &session, line);
        let answer = format!("{wrong}\n\nUsage: {usage}.");
        assert_eq!(turn(&updates), json!([chunk("agent_message_chunk", &answer)]), "{line}");
    }
    assert!(mock.requests().is_empty());
}

#[test]
fn stop_ends_the_running_turn_and_the_queue() {
    let mock = MockModel::start();
    mock.push(Reply::fixture("anthropic", "text").stall_after(3));
    let mut agent = Agent::in_process(options_for("anthropic", &mock));
    agent.initialize();
    let session = agent.new_session();
    let running = agent
        .send_request("session/prompt", json!({"sessionId": session, "prompt": [{"type": "text", "text": "long"}]}));
    let queued = agent
        .send_request("session/prompt", json!({"sessionId": session, "prompt": [{"type": "text", "text": "next"}]}));
    mock.wait_requests(1);
    // /help answers at once, while the turn runs.
    let help = agent
        .send_request("session/prompt", json!({"sessionId": session, "prompt": [{"type": "text", "text": "/help"}]}));
    let (_, r) = agent.until_response(help);
    assert_eq!(r, result(help, json!({"stopReason": "end_turn"})));
    // /status waits behind the running and queued prompts (its figures would miss them).
    let status = agent
        .send_request("session/prompt", json!({"sessionId": session, "prompt": [{"type": "text", "text": "/status"}]}));
    let stop = agent
        .send_request("session/prompt", json!({"sessionId": session, "prompt": [{"type": "text", "text": "/stop"}]}));
    let mut answers = Vec::new();
    while answers.len() < 4 {
        let msg = agent.recv();
        if msg.get("id").is_some() && msg.get("method").is_none() {
            answers.push(msg);
        }
    }
    // In order (what the running turn had counted when it was stopped depends on how far it got).
    answers[0] = without_usage(&answers[0]);
    assert_eq!(
        answers,
        [
            result(running, json!({"stopReason": "cancelled"})),
            result(queued, json!({"stopReason": "cancelled"})),
            result(status, json!({"stopReason": "cancelled"})),
            result(stop, json!({"stopReason": "end_turn"})),
        ]
    );
    assert_eq!(mock.requests().len(), 1, "the queued prompt never ran");
}

#[test]
fn usage_shows_the_share_of_input_the_provider_read_from_its_cache() {
    let mock = MockModel::start();
    let reply = |read: u64| {
        let usage = json!({"input_tokens": 100, "cache_read_input_tokens": read, "cache_creation_input_tokens": 0, "output_tokens": 5});
        let events = [
            json!({"type": "message_start", "message": {"id": "m", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5", "content": [], "usage": usage}}),
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "ok"}}),
            json!({"type": "content_block_stop", "index": 0}),
            json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 5}}),
            json!({"type": "message_stop"}),
        ];
        Reply::sse(
            events.iter().map(|e| format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap())).collect::<String>(),
        )
    };
    mock.push(reply(0));
    mock.push(reply(1900));
    let mut agent = Agent::in_process(options_for("anthropic", &mock));
    agent.initialize();
    let session = agent.new_session();
    agent.prompt(&session, "first");
    let (_, response) = agent.prompt(&session, "second");
    assert_eq!(
        response["result"],
        ended(
            "end_turn",
            json!({"totalTokens": 2005, "inputTokens": 2000, "outputTokens": 5, "cachedReadTokens": 1900})
        )
    );
    // 100 + (100 + 1900) input tokens, 1900 of them read from the cache: 90 %.
    let (usage, _) = command(&mut agent, &session, "/usage");
    assert_eq!(
        usage,
        "**Usage** (this session)\n\n- Input: 2,100 tokens (cache read 1,900, cache write 0)\n- Output: 10 tokens\n\
         - Read from the prompt cache: 90% of input\n- Total: 2,110 tokens\n- Context now: ~2,005 of 200,000 tokens (2%)\n"
    );
}
