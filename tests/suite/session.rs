//! Session setup and settings: initialize, auth required without a provider, session/new (no
//! network, setup updates after the response), modes, config options, close, `_meta` readers.

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::support::agent::{Agent, Options};
use crate::support::expect::{
    ANTHROPIC_MODELS, BLANK, GEMINI_MODELS, OPENAI_MODELS, all_models, blank, commands_update, config_options, ended,
    initialize_result, invalid_params, modes, new_session, not_found, result, text_usage, update,
};
use crate::support::mock_model::{MockModel, Reply};
use crate::support::options_for;

#[test]
fn initialize_answers_version_one_and_advertises_only_what_works() {
    let mut agent = Agent::in_process(Options::default());
    // Whatever is asked, the same answer: version 1, and only the capabilities that work.
    for asked in [json!(1), json!(2), json!(7), json!(0), json!("1.0.0")] {
        let id = agent.send_request(
            "initialize",
            json!({"protocolVersion": asked, "clientCapabilities": {"fs": {"readTextFile": true}}}),
        );
        let (_, r) = agent.until_response(id);
        assert_eq!(r, result(id, initialize_result(agent.home.path())), "asked {asked}");
    }
}

#[test]
fn without_a_provider_session_new_requires_auth_and_says_how() {
    // `authenticate` reads the configuration again from the environment: the process's own.
    let mut agent = Agent::spawn(Options::default());
    agent.initialize();
    let cwd = agent.home.path().display().to_string();
    let config = agent.home.path().join("config.toml");
    let how = format!(
        "no model provider is configured. Set ANTHROPIC_API_KEY, OPENAI_API_KEY or GEMINI_API_KEY in acp's environment (your \
         shell's, or the one your editor starts acp with), or add a provider to {} — for example\n\n[providers.ollama]\napi = \"openai-chat\"\n\
         base_url = \"http://localhost:11434/v1\"\nmodels = [\"qwen3:8b\"]\n\nthen choose it with \
         ACP_MODEL=ollama/qwen3:8b or `model = \"ollama/qwen3:8b\"` in that file. acp also looks for a model server \
         on this machine (Ollama at OLLAMA_HOST or 127.0.0.1:11434, llama.cpp, LM Studio, vLLM) and has found none so \
         far: one started now is found on the next try",
        config.display()
    );
    let r = agent.request("session/new", json!({"cwd": cwd, "mcpServers": []}));
    assert_eq!(
        r["error"],
        json!({
            "code": -32000,
            "message": format!("authentication required: {how}"),
            "data": {"configPath": config, "authMethods": ["anthropic-api-key", "openai-api-key", "config-file"]}
        })
    );
    let r = agent.request("authenticate", json!({"methodId": "config-file"}));
    assert_eq!(
        r["error"],
        json!({"code": -32000, "message": format!("{how} (then restart the agent)")}),
        "still nothing configured"
    );

    // The user adds a local provider to config.toml and authenticates again.
    let mock = MockModel::start();
    let config = format!(
        "model = \"local/qwen3:8b\"\n[providers.local]\napi = \"openai-chat\"\nbase_url = \"{}\"\nmodels = [\"qwen3:8b\"]\n",
        mock.base_v1()
    );
    std::fs::write(agent.home.path().join("config.toml"), config).unwrap();
    let r = agent.request("authenticate", json!({"methodId": "config-file"}));
    assert_eq!(r["result"], json!({}), "{r}");
    let session = agent.new_session();
    mock.push(Reply::fixture("openai-chat", "text"));
    let (_, response) = agent.prompt(&session, "hi");
    assert_eq!(response["result"], ended("end_turn", text_usage("openai-chat")));
    let req = &mock.requests()[0];
    assert_eq!(req.body["model"], "qwen3:8b");
    assert_eq!(req.header("authorization"), None, "a keyless local provider sends no key");
}

#[test]
fn a_broken_config_file_is_reported_on_session_new() {
    let mut agent = Agent::in_process(Options::default().env("ANTHROPIC_API_KEY", "k").config("model = [\n"));
    agent.initialize();
    let cwd = agent.home.path().display().to_string();
    let broken = |agent: &Agent, what: &str| {
        let config = agent.home.path().join("config.toml");
        json!({
            "code": -32000,
            "message": format!("the configuration file is broken: {}:{what}", config.display()),
            "data": {"configPath": config, "authMethods": ["anthropic-api-key", "openai-api-key", "config-file"]}
        })
    };
    let r = agent.request("session/new", json!({"cwd": cwd, "mcpServers": []}));
    assert_eq!(r["error"], broken(&agent, "1:10: unclosed array, expected `]`"));
    // Said as what it is (not as missing authentication), with the line, and the unknown key named.
    let mut agent = Agent::in_process(
        Options::default().env("ANTHROPIC_API_KEY", "k").config("model = \"anthropic/x\"\n\nmodle = 1\n"),
    );
    agent.initialize();
    let r = agent.request("session/new", json!({"cwd": cwd, "mcpServers": []}));
    let known = "`model`, `mode`, `reasoning`, `tools`, `max_turn_requests`, `max_reply_bytes`, `bootstrap_max_chars`, \
                 `compaction`, `permissions`, `max_line_bytes`, `timeouts`, `retry`, `sandbox`, `web_fetch`, `providers`, `mcp_servers`, `gateway`, `channels`, `session`, `messages`, `skills`, `subagents`, `memory`, `cron`, `heartbeat`, `hooks`, `fallbacks`, `models`, `lsp`, `agents`, `bindings`";
    assert_eq!(r["error"], broken(&agent, &format!("3:1: unknown field `modle`, expected one of {known}")));
}

#[test]
fn session_new_touches_no_network_and_sends_setup_after_the_response() {
    let mock = MockModel::start();
    let mut agent = Agent::in_process(options_for("anthropic", &mock));
    agent.initialize();
    let cwd = agent.home.path().display().to_string();
    let id = agent.send_request("session/new", json!({"cwd": cwd, "mcpServers": []}));
    // The response comes first, then the commands and the context's fill.
    let response = agent.recv();
    let session = response["result"]["sessionId"].as_str().unwrap_or_default().to_owned();
    assert!(session.starts_with("sess_"), "{response}");
    assert_eq!(response, result(id, new_session(&session, "anthropic/claude-sonnet-4-5", &ANTHROPIC_MODELS, "code")));
    assert_eq!(agent.recv(), update(&session, commands_update()));
    assert_eq!(agent.recv(), update(&session, json!({"sessionUpdate": "usage_update", "used": 0, "size": 200000})));
    // The first request the model sees is the first prompt's.
    mock.push(Reply::fixture("anthropic", "text"));
    agent.prompt(&session, "the first prompt");
    let requests = mock.requests();
    assert_eq!(requests.len(), 1, "session/new must not call the model");
    assert!(requests[0].body.to_string().contains("the first prompt"), "{}", requests[0].body);
}

/// `mode` in config.toml is the mode new sessions start in, as the editor is told.
#[test]
fn the_configured_mode_is_where_new_sessions_start() {
    let mock = MockModel::start();
    let mut agent = Agent::spawn(options_for("anthropic", &mock).config("mode = \"ask\"\n"));
    agent.initialize();
    let cwd = agent.home.path().display().to_string();
    let r = agent.request("session/new", json!({"cwd": cwd, "mcpServers": []}));
    assert_eq!(r["result"]["modes"]["currentModeId"], "ask", "{r}");
    let mode = r["result"]["configOptions"].as_array().unwrap().iter().find(|o| o["id"] == "mode").unwrap().clone();
    assert_eq!(mode["currentValue"], "ask", "{mode}");
    // `_meta.mode` still wins.
    let r = agent.request("session/new", json!({"cwd": cwd, "mcpServers": [], "_meta": {"mode": "auto"}}));
    assert_eq!(r["result"]["modes"]["currentModeId"], "auto", "{r}");
}

#[test]
fn modes_and_config_options_stay_in_sync() {
    let mock = MockModel::start();
    let mut agent = Agent::in_process(
        options_for("anthropic", &mock).env("OPENAI_API_KEY", "k2").env("OPENAI_BASE_URL", &mock.base_v1()),
    );
    agent.initialize();
    let session = agent.new_session();

    let models = all_models();
    let options = |model: &str, mode: &str| config_options(model, &models, mode, "default");
    let sonnet = "anthropic/claude-sonnet-4-5";

    let id = agent.send_request("session/set_mode", json!({"sessionId": session, "modeId": "auto"}));
    assert_eq!(agent.recv(), result(id, json!({})));
    assert_eq!(
        agent.recv(),
        update(&session, json!({"sessionUpdate": "config_option_update", "configOptions": options(sonnet, "auto")}))
    );

    let id = agent
        .send_request("session/set_config_option", json!({"sessionId": session, "configId": "mode", "value": "ask"}));
    assert_eq!(agent.recv(), result(id, json!({"configOptions": options(sonnet, "ask")})));
    assert_eq!(agent.recv(), update(&session, json!({"sessionUpdate": "current_mode_update", "currentModeId": "ask"})));

    // The complete list comes back.
    let r = agent.request(
        "session/set_config_option",
        json!({"sessionId": session, "configId": "model", "value": "openai/gpt-4.1"}),
    );
    assert_eq!(r["result"], json!({"configOptions": options("openai/gpt-4.1", "ask")}));
    mock.push(Reply::fixture("openai-chat", "text"));
    let (_, response) = agent.prompt(&session, "hi");
    assert_eq!(response["result"], ended("end_turn", text_usage("openai-chat")));
    let first = &mock.requests()[0];
    assert_eq!(
        (first.path.as_str(), &first.body["model"]),
        ("/v1/chat/completions", &json!("gpt-4.1")),
        "the next turn uses the new model"
    );

    let ghost = not_found("ghost");
    let bad = [
        (
            "session/set_mode",
            json!({"sessionId": session, "modeId": "yolo"}),
            invalid_params("`modeId`: unknown mode `yolo` (known: ask, code, auto)"),
        ),
        (
            "session/set_config_option",
            json!({"sessionId": session, "configId": "colour", "value": "x"}),
            invalid_params("`configId`: unknown config option `colour` (known: model, mode, thought_level)"),
        ),
        (
            "session/set_config_option",
            json!({"sessionId": session, "configId": "model", "value": "nope/x"}),
            invalid_params(
                "`value`: unknown provider `nope` in `nope/x`; known providers: anthropic, openai, openai-responses, gemini",
            ),
        ),
        (
            "session/set_config_option",
            json!({"sessionId": session, "configId": "mode", "type": "boolean", "value": true}),
            invalid_params("`value`: expected a value id (string)"),
        ),
        ("session/set_mode", json!({"sessionId": "ghost", "modeId": "ask"}), ghost.clone()),
        ("session/prompt", json!({"sessionId": "ghost", "prompt": [{"type": "text", "text": "x"}]}), ghost.clone()),
        ("session/close", json!({"sessionId": "ghost"}), ghost),
        (
            "session/prompt",
            json!({"sessionId": session, "prompt": []}),
            invalid_params("`prompt`: the prompt is empty"),
        ),
        (
            "session/prompt",
            json!({"sessionId": session, "prompt": [{"type": "audio", "mimeType": "audio/wav", "data": "AA=="}]}),
            invalid_params("`prompt[0]`: audio input is not supported (promptCapabilities.audio is false)"),
        ),
    ];
    for (method, params, expected) in bad {
        let r = agent.request(method, params.clone());
        assert_eq!(r["error"], expected, "{method} {params}");
    }
}

#[test]
fn meta_chooses_session_id_model_and_mode() {
    let mock = MockModel::start();
    let mut agent = Agent::in_process(options_for("openai-chat", &mock));
    agent.initialize();
    let cwd = agent.home.path().display().to_string();
    let r = agent.request(
        "session/new",
        json!({"cwd": cwd, "mcpServers": [], "_meta": {"session": "ignored", "sessionKey": "my-key", "model": "openai-responses/gpt-5", "mode": "auto"}}),
    );
    assert_eq!(r["result"], new_session("my-key", "openai-responses/gpt-5", &OPENAI_MODELS, "auto"));
    agent.expect_setup("my-key");
    let r = agent.request("session/new", json!({"cwd": cwd, "mcpServers": [], "_meta": {"key": "my-key"}}));
    assert_eq!(
        r["error"],
        invalid_params("`_meta.sessionKey`: session `my-key` is already open on this connection"),
        "a taken id is refused"
    );
    let r = agent.request("session/new", json!({"cwd": cwd, "mcpServers": [], "_meta": {"mode": "yolo"}}));
    assert_eq!(r["error"], invalid_params("`_meta.mode`: unknown mode `yolo`"));
}

#[test]
fn close_frees_the_session() {
    let mock = MockModel::start();
    let mut agent = Agent::in_process(options_for("anthropic", &mock));
    agent.initialize();
    let session = agent.new_session();
    let other = agent.new_session();
    assert_ne!(session, other);
    assert_eq!(agent.request("session/close", json!({"sessionId": session}))["result"], json!({}));
    let r = agent.request("session/set_mode", json!({"sessionId": session, "modeId": "ask"}));
    assert_eq!(r["error"], not_found(&session));
    let r: Value = agent.request("session/set_mode", json!({"sessionId": other, "modeId": "ask"}));
    assert_eq!(r["result"], json!({}), "other sessions are untouched");
}

#[test]
fn thought_level_reaches_every_wire_api() {
    for api in crate::support::APIS {
        let mock = MockModel::start();
        let mut agent = Agent::in_process(options_for(api, &mock));
        agent.initialize();
        let session = agent.new_session();
        mock.push(Reply::fixture(api, "text"));
        mock.push(Reply::fixture(api, "text"));
        agent.prompt(&session, "default level");
        let r = agent.request(
            "session/set_config_option",
            json!({"sessionId": session, "configId": "thought_level", "value": "high"}),
        );
        let (model, models): (&str, &[&str]) = match api {
            "anthropic" => ("anthropic/claude-sonnet-4-5", &ANTHROPIC_MODELS),
            "openai-chat" => ("openai/gpt-4.1", &OPENAI_MODELS),
            "gemini" => ("gemini/gemini-2.5-flash", &GEMINI_MODELS),
            _ => ("openai-responses/gpt-5-codex", &OPENAI_MODELS),
        };
        assert_eq!(r["result"], json!({"configOptions": config_options(model, models, "code", "high")}), "{api}");
        agent.prompt(&session, "think hard");
        let reqs = mock.requests();
        let (plain, thinking) = (&reqs[0].body, &reqs[1].body);
        match api {
            "anthropic" => {
                assert!(plain.get("thinking").is_none(), "no thinking by default");
                assert_eq!(thinking["thinking"], json!({"type": "enabled", "budget_tokens": 24576}));
                assert!(thinking["max_tokens"].as_u64().unwrap() > 24576, "max_tokens above the budget");
            }
            "openai-chat" => {
                assert!(plain.get("reasoning_effort").is_none());
                assert_eq!(thinking["reasoning_effort"], "high");
            }
            "gemini" => {
                assert!(plain["generationConfig"].get("thinkingConfig").is_none());
                assert_eq!(
                    thinking["generationConfig"]["thinkingConfig"],
                    json!({"thinkingBudget": 24576, "includeThoughts": true})
                );
            }
            _ => {
                assert!(plain.get("reasoning").is_none());
                assert_eq!(thinking["reasoning"], json!({"effort": "high", "summary": "auto"}));
                assert_eq!(thinking["include"], json!(["reasoning.encrypted_content"]));
            }
        }
        // A directive among the words holds for that message only, and the model never reads it.
        for (n, level) in [(2, "minimal"), (3, "xhigh")] {
            mock.push(Reply::fixture(api, "text"));
            agent.prompt(&session, &format!("why is the sky blue? /think {level}"));
            let body = &mock.requests()[n].body;
            let sent = body.to_string();
            assert!(!sent.contains("/think") && sent.contains("why is the sky blue?"), "{api}: {sent}");
            // OpenAI itself takes minimal and xhigh; a compatible server gets low and high.
            match (api, level) {
                ("anthropic", "minimal") => assert_eq!(body["thinking"]["budget_tokens"], 1024),
                ("anthropic", _) => assert_eq!(body["thinking"]["budget_tokens"], 32768),
                ("gemini", "minimal") => {
                    assert_eq!(body["generationConfig"]["thinkingConfig"]["thinkingBudget"], 1024)
                }
                ("gemini", _) => assert_eq!(body["generationConfig"]["thinkingConfig"]["thinkingBudget"], 32768),
                ("openai-chat", "minimal") => assert_eq!(body["reasoning_effort"], "low", "{sent}"),
                ("openai-chat", _) => assert_eq!(body["reasoning_effort"], "high", "{sent}"),
                (_, level) => assert_eq!(body["reasoning"]["effort"], level, "{sent}"),
            }
        }
        mock.push(Reply::fixture(api, "text"));
        agent.prompt(&session, "and now?");
        let body = &mock.requests()[4].body;
        let effort = match api {
            "anthropic" => body["thinking"]["budget_tokens"].clone(),
            "gemini" => body["generationConfig"]["thinkingConfig"]["thinkingBudget"].clone(),
            "openai-chat" => body["reasoning_effort"].clone(),
            _ => body["reasoning"]["effort"].clone(),
        };
        assert!(effort == json!(24576) || effort == json!("high"), "{api}: back to the session's level: {effort}");
    }
    // The starting level comes from config.toml or `_meta.thinking`.
    let mock = MockModel::start();
    let mut agent = Agent::in_process(options_for("anthropic", &mock).config("reasoning = \"low\"\n"));
    agent.initialize();
    let cwd = agent.home.path().display().to_string();
    let sonnet = "anthropic/claude-sonnet-4-5";
    for (meta, level) in [(json!({}), "low"), (json!({"thinkingLevel": "medium"}), "medium")] {
        let r = agent.request("session/new", json!({"cwd": cwd, "mcpServers": [], "_meta": meta}));
        assert_eq!(
            blank(&r["result"], &["sessionId"]),
            json!({"sessionId": BLANK, "modes": modes("code"), "configOptions": config_options(sonnet, &ANTHROPIC_MODELS, "code", level)}),
            "{meta}"
        );
    }
}

#[test]
fn the_default_model_and_every_model_used_stay_among_the_choices() {
    // A default no provider lists (a local model name, say): once the user switches away, clients
    // that only offer advertised values must still be able to switch back.
    let mock = MockModel::start();
    let mut agent = Agent::in_process(
        options_for("openai-chat", &mock)
            .env("ANTHROPIC_API_KEY", "k2")
            .env("ANTHROPIC_BASE_URL", &mock.base())
            .env("ACP_MODEL", "openai/mock-model"),
    );
    agent.initialize();
    let cwd = agent.home.path().display().to_string();
    let r = agent.request("session/new", json!({"cwd": cwd, "mcpServers": [], "_meta": {"model": "anthropic/x-1"}}));
    let session = r["result"]["sessionId"].as_str().unwrap().to_owned();
    // The configured default and the current model lead the list, each once, whatever is chosen.
    let choices: Vec<&str> = ["openai/mock-model", "anthropic/x-1"].into_iter().chain(all_models()).collect();
    assert_eq!(r["result"], new_session(&session, "anthropic/x-1", &choices, "code"));
    // Switching away and back to the default.
    for to in ["openai/gpt-5", "openai/gpt-4.1", "openai/mock-model"] {
        let r =
            agent.request("session/set_config_option", json!({"sessionId": session, "configId": "model", "value": to}));
        assert_eq!(r["result"], json!({"configOptions": config_options(to, &choices, "code", "default")}), "to {to}");
    }
}
