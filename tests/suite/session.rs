//! Session setup and settings: initialize, auth required without a provider, session/new (no
//! network, setup updates after the response), modes, config options, close, `_meta` readers.

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::agent::{Agent, Options};
use crate::support::mock_model::{MockModel, Reply};
use crate::support::options_for;

#[test]
fn initialize_answers_version_one_and_advertises_only_what_works() {
    let mut agent = Agent::spawn(Options::default());
    for asked in [json!(1), json!(2), json!(7), json!(0), json!("1.0.0")] {
        let r = agent.request(
            "initialize",
            json!({"protocolVersion": asked, "clientCapabilities": {"fs": {"readTextFile": true}}}),
        );
        assert_eq!(r["result"]["protocolVersion"], 1, "asked {asked}: {r}");
    }
    let r = agent.request("initialize", json!({"protocolVersion": 1}))["result"].clone();
    assert_eq!(r["agentInfo"], json!({"name": "acp", "title": "acp", "version": env!("CARGO_PKG_VERSION")}));
    let caps = &r["agentCapabilities"];
    assert_eq!(caps["loadSession"], true);
    assert_eq!(caps["promptCapabilities"], json!({"image": true, "audio": false, "embeddedContext": true}));
    assert_eq!(
        caps["sessionCapabilities"],
        json!({"list": {}, "resume": {}, "close": {}, "delete": {}, "additionalDirectories": {}})
    );
    assert_eq!(caps["mcpCapabilities"], json!({"http": false, "sse": false}));
    let ids: Vec<&str> = r["authMethods"].as_array().unwrap().iter().map(|m| m["id"].as_str().unwrap()).collect();
    assert_eq!(ids, vec!["anthropic-api-key", "openai-api-key", "config-file"]);
}

#[test]
fn without_a_provider_session_new_requires_auth_and_says_how() {
    let mut agent = Agent::spawn(Options::default());
    agent.initialize();
    let cwd = agent.home.path().display().to_string();
    let r = agent.request("session/new", json!({"cwd": cwd, "mcpServers": []}));
    assert_eq!(r["error"]["code"], -32000, "{r}");
    let message = r["error"]["message"].as_str().unwrap();
    for needle in ["ANTHROPIC_API_KEY", "OPENAI_API_KEY", "config.toml", "[providers."] {
        assert!(message.contains(needle), "{needle} missing from: {message}");
    }
    let r = agent.request("authenticate", json!({"methodId": "config-file"}));
    assert_eq!(r["error"]["code"], -32000, "still nothing configured: {r}");

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
    assert_eq!(response["result"]["stopReason"], "end_turn");
    let req = &mock.requests()[0];
    assert_eq!(req.body["model"], "qwen3:8b");
    assert_eq!(req.header("authorization"), None, "a keyless local provider sends no key");
}

#[test]
fn a_broken_config_file_is_reported_on_session_new() {
    let mut agent = Agent::spawn(Options::default().env("ANTHROPIC_API_KEY", "k").config("model = [\n"));
    agent.initialize();
    let cwd = agent.home.path().display().to_string();
    let r = agent.request("session/new", json!({"cwd": cwd, "mcpServers": []}));
    assert_eq!(r["error"]["code"], -32000);
    assert!(r["error"]["message"].as_str().unwrap().contains("config.toml"), "{r}");
    // Said as what it is, with the line, and the unknown key named.
    let mut agent =
        Agent::spawn(Options::default().env("ANTHROPIC_API_KEY", "k").config("model = \"anthropic/x\"\n\nmodle = 1\n"));
    agent.initialize();
    let r = agent.request("session/new", json!({"cwd": cwd, "mcpServers": []}));
    let message = r["error"]["message"].as_str().unwrap();
    assert!(message.starts_with("the configuration file is broken: "), "{r}");
    assert!(message.contains("config.toml:3:1: unknown field `modle`"), "{r}");
    assert!(!message.contains("authentication required"), "{r}");
}

#[test]
fn session_new_touches_no_network_and_sends_setup_after_the_response() {
    let mock = MockModel::start();
    let mut agent = Agent::spawn(options_for("anthropic", &mock));
    agent.initialize();
    let cwd = agent.home.path().display().to_string();
    let id = agent.send_request("session/new", json!({"cwd": cwd, "mcpServers": []}));
    let response = agent.recv();
    assert_eq!(response["id"], id, "the response comes first: {response}");
    let session = response["result"]["sessionId"].as_str().unwrap().to_owned();
    assert_eq!(response["result"]["modes"]["currentModeId"], "code");
    let options = response["result"]["configOptions"].as_array().unwrap();
    assert_eq!(options[0]["id"], "model");
    assert_eq!(options[0]["category"], "model");
    assert_eq!(options[0]["currentValue"], "anthropic/claude-sonnet-4-5");
    assert_eq!(options[1]["id"], "mode");
    assert_eq!(options[1]["category"], "mode");
    assert_eq!(options[2]["id"], "thought_level");
    assert_eq!(options[2]["category"], "thought_level");
    assert_eq!(options[2]["currentValue"], "default");
    let commands = agent.recv();
    assert_eq!(commands["method"], "session/update");
    assert_eq!(commands["params"]["sessionId"], session);
    assert_eq!(commands["params"]["update"]["sessionUpdate"], "available_commands_update");
    let names: Vec<&str> = commands["params"]["update"]["availableCommands"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["help", "status", "context", "compact", "model", "think", "new", "reset", "stop", "usage", "network"]
    );
    let setup = agent.recv();
    assert_eq!(setup["params"]["sessionId"], session);
    assert_eq!(setup["params"]["update"], json!({"sessionUpdate": "usage_update", "used": 0, "size": 200000}));
    std::thread::sleep(Duration::from_millis(200));
    assert!(mock.requests().is_empty(), "session/new must not call the model");
}

#[test]
fn modes_and_config_options_stay_in_sync() {
    let mock = MockModel::start();
    let mut agent = Agent::spawn(
        options_for("anthropic", &mock).env("OPENAI_API_KEY", "k2").env("OPENAI_BASE_URL", &mock.base_v1()),
    );
    agent.initialize();
    let session = agent.new_session();

    let id = agent.send_request("session/set_mode", json!({"sessionId": session, "modeId": "auto"}));
    assert_eq!(agent.recv(), json!({"jsonrpc": "2.0", "id": id, "result": {}}));
    let update = agent.recv();
    assert_eq!(update["params"]["update"]["sessionUpdate"], "config_option_update");
    assert_eq!(update["params"]["update"]["configOptions"][1]["currentValue"], "auto");

    let id = agent
        .send_request("session/set_config_option", json!({"sessionId": session, "configId": "mode", "value": "ask"}));
    let r = agent.recv();
    assert_eq!(r["id"], id);
    assert_eq!(r["result"]["configOptions"][1]["currentValue"], "ask");
    let update = agent.recv();
    assert_eq!(update["params"]["update"], json!({"sessionUpdate": "current_mode_update", "currentModeId": "ask"}));

    let r = agent.request(
        "session/set_config_option",
        json!({"sessionId": session, "configId": "model", "value": "openai/gpt-4.1"}),
    );
    let list = r["result"]["configOptions"].as_array().unwrap();
    assert_eq!(list.len(), 3, "the complete list comes back");
    assert_eq!(list[0]["currentValue"], "openai/gpt-4.1");
    let values: Vec<&str> =
        list[0]["options"].as_array().unwrap().iter().map(|o| o["value"].as_str().unwrap()).collect();
    assert!(
        values.contains(&"anthropic/claude-sonnet-4-5") && values.contains(&"openai-responses/gpt-5-codex"),
        "{values:?}"
    );
    mock.push(Reply::fixture("openai-chat", "text"));
    let (_, response) = agent.prompt(&session, "hi");
    assert_eq!(response["result"]["stopReason"], "end_turn");
    assert_eq!(mock.requests()[0].path, "/v1/chat/completions", "the next turn uses the new model");
    assert_eq!(mock.requests()[0].body["model"], "gpt-4.1");

    let bad = [
        ("session/set_mode", json!({"sessionId": session, "modeId": "yolo"}), -32602, "yolo"),
        (
            "session/set_config_option",
            json!({"sessionId": session, "configId": "colour", "value": "x"}),
            -32602,
            "colour",
        ),
        (
            "session/set_config_option",
            json!({"sessionId": session, "configId": "model", "value": "nope/x"}),
            -32602,
            "nope",
        ),
        (
            "session/set_config_option",
            json!({"sessionId": session, "configId": "mode", "type": "boolean", "value": true}),
            -32602,
            "value",
        ),
        ("session/set_mode", json!({"sessionId": "ghost", "modeId": "ask"}), -32002, "ghost"),
        ("session/prompt", json!({"sessionId": "ghost", "prompt": [{"type": "text", "text": "x"}]}), -32002, "ghost"),
        ("session/close", json!({"sessionId": "ghost"}), -32002, "ghost"),
        ("session/prompt", json!({"sessionId": session, "prompt": []}), -32602, "empty"),
        (
            "session/prompt",
            json!({"sessionId": session, "prompt": [{"type": "audio", "mimeType": "audio/wav", "data": "AA=="}]}),
            -32602,
            "audio",
        ),
    ];
    for (method, params, code, words) in bad {
        let r = agent.request(method, params.clone());
        assert_eq!(r["error"]["code"], code, "{method} {params}: {r}");
        assert!(r["error"]["message"].as_str().unwrap().contains(words), "{method}: {r}");
        if code == -32002 {
            assert_eq!(r["error"]["data"]["sessionId"], "ghost");
        }
    }
}

#[test]
fn meta_chooses_session_id_model_and_mode() {
    let mock = MockModel::start();
    let mut agent = Agent::spawn(options_for("openai-chat", &mock));
    agent.initialize();
    let cwd = agent.home.path().display().to_string();
    let r = agent.request(
        "session/new",
        json!({"cwd": cwd, "mcpServers": [], "_meta": {"session": "ignored", "sessionKey": "my-key", "model": "openai-responses/gpt-5", "mode": "auto"}}),
    );
    assert_eq!(r["result"]["sessionId"], "my-key", "{r}");
    assert_eq!(r["result"]["configOptions"][0]["currentValue"], "openai-responses/gpt-5");
    assert_eq!(r["result"]["modes"]["currentModeId"], "auto");
    let r = agent.request("session/new", json!({"cwd": cwd, "mcpServers": [], "_meta": {"key": "my-key"}}));
    assert_eq!(r["error"]["code"], -32602, "a taken id is refused: {r}");
    let r = agent.request("session/new", json!({"cwd": cwd, "mcpServers": [], "_meta": {"mode": "yolo"}}));
    assert_eq!(r["error"]["code"], -32602);
}

#[test]
fn close_frees_the_session() {
    let mock = MockModel::start();
    let mut agent = Agent::spawn(options_for("anthropic", &mock));
    agent.initialize();
    let session = agent.new_session();
    let other = agent.new_session();
    assert_ne!(session, other);
    assert_eq!(agent.request("session/close", json!({"sessionId": session}))["result"], json!({}));
    let r = agent.request("session/set_mode", json!({"sessionId": session, "modeId": "ask"}));
    assert_eq!(r["error"]["code"], -32002);
    let r: Value = agent.request("session/set_mode", json!({"sessionId": other, "modeId": "ask"}));
    assert_eq!(r["result"], json!({}), "other sessions are untouched");
}

#[test]
fn thought_level_reaches_every_wire_api() {
    for api in crate::support::APIS {
        let mock = MockModel::start();
        let mut agent = Agent::spawn(options_for(api, &mock));
        agent.initialize();
        let session = agent.new_session();
        mock.push(Reply::fixture(api, "text"));
        mock.push(Reply::fixture(api, "text"));
        agent.prompt(&session, "default level");
        let r = agent.request(
            "session/set_config_option",
            json!({"sessionId": session, "configId": "thought_level", "value": "high"}),
        );
        assert_eq!(r["result"]["configOptions"][2]["currentValue"], "high", "{api}: {r}");
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
            _ => {
                assert!(plain.get("reasoning").is_none());
                assert_eq!(thinking["reasoning"], json!({"effort": "high", "summary": "auto"}));
                assert_eq!(thinking["include"], json!(["reasoning.encrypted_content"]));
            }
        }
    }
    // The starting level comes from config.toml or `_meta.thinking`.
    let mock = MockModel::start();
    let mut agent = Agent::spawn(options_for("anthropic", &mock).config("reasoning = \"low\"\n"));
    agent.initialize();
    let cwd = agent.home.path().display().to_string();
    let r = agent.request("session/new", json!({"cwd": cwd, "mcpServers": []}));
    assert_eq!(r["result"]["configOptions"][2]["currentValue"], "low");
    let r = agent.request("session/new", json!({"cwd": cwd, "mcpServers": [], "_meta": {"thinkingLevel": "medium"}}));
    assert_eq!(r["result"]["configOptions"][2]["currentValue"], "medium");
}

#[test]
fn the_default_model_and_every_model_used_stay_among_the_choices() {
    // A default no provider lists (a local model name, say): once the user switches away, clients
    // that only offer advertised values must still be able to switch back.
    let mock = MockModel::start();
    let mut agent = Agent::spawn(
        options_for("openai-chat", &mock)
            .env("ANTHROPIC_API_KEY", "k2")
            .env("ANTHROPIC_BASE_URL", &mock.base())
            .env("ACP_MODEL", "openai/mock-model"),
    );
    agent.initialize();
    let cwd = agent.home.path().display().to_string();
    let r = agent.request("session/new", json!({"cwd": cwd, "mcpServers": [], "_meta": {"model": "anthropic/x-1"}}));
    let session = r["result"]["sessionId"].as_str().unwrap().to_owned();
    let values = |r: &Value| -> Vec<String> {
        let list = r["configOptions"].as_array().unwrap();
        list[0]["options"].as_array().unwrap().iter().map(|o| o["value"].as_str().unwrap().to_owned()).collect()
    };
    let first = values(&r["result"]);
    assert!(first.contains(&"openai/mock-model".to_owned()), "the configured default: {first:?}");
    assert!(first.contains(&"anthropic/x-1".to_owned()), "the current model: {first:?}");
    for (to, kept) in [
        ("openai/gpt-5", ["openai/mock-model", "anthropic/x-1"]),
        ("openai/gpt-4.1", ["openai/gpt-5", "anthropic/x-1"]),
    ] {
        let r =
            agent.request("session/set_config_option", json!({"sessionId": session, "configId": "model", "value": to}));
        let now = values(&r["result"]);
        for model in kept {
            assert!(now.contains(&model.to_owned()), "after switching to {to}, {model} is gone: {now:?}");
        }
        let unique: std::collections::HashSet<&String> = now.iter().collect();
        assert_eq!(unique.len(), now.len(), "no duplicates: {now:?}");
    }
    // And back to the default.
    let r = agent.request(
        "session/set_config_option",
        json!({"sessionId": session, "configId": "model", "value": "openai/mock-model"}),
    );
    assert_eq!(r["result"]["configOptions"][0]["currentValue"], "openai/mock-model", "{r}");
}
