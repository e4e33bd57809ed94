//! Several agents behind one real `acp gateway` (`[[agents]]`, `[[bindings]]`), with two
//! Telegram bots (accounts) against the Bot API stand-in and the mock model: a DM bound by peer
//! reaches `work`, a bot bound by account reaches `family`, an unbound DM the default `home`, each
//! with its own workspace, model and tools (checked in what the model is sent); the account is in
//! the session key; `agents.list`, `agent.identity.get`, `channels.status` and the CLI
//! (`acp agents`, `acp sessions list --agent`, `acp channels status`) show them; `sessions_spawn`
//! with an `agentId` is refused unless allowed, and when allowed runs as that agent.

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::support::gateway::{Gateway, TOKEN};
use crate::support::mock_model::{MockModel, Recorded};
use crate::support::script::{calls, offered_tools, result_for, text};
use crate::support::telegram::FakeTelegram;

const WORK: i64 = 111;
const STRANGER: i64 = 222;
const MUM: i64 = 333;

struct Setup {
    gw: Gateway,
    dirs: Vec<tempfile::TempDir>,
}

fn start(mock: &MockModel, work_bot: &FakeTelegram, family_bot: &FakeTelegram, more: &str) -> Setup {
    let home = tempfile::tempdir().unwrap();
    let dirs: Vec<tempfile::TempDir> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let config = format!(
        r#"
fallbacks = ["anthropic/claude-sonnet-4-5"]

[session]
dm_scope = "per-account-channel-peer"

[channels.telegram]
bot_token = "1:WORK"
api_base_url = "{work}"
allow_from = ["{WORK}", "{STRANGER}", "{MUM}"]

[channels.telegram.accounts.family]
bot_token = "2:FAMILY"
api_base_url = "{family}"

[[agents]]
id = "home"
default = true
workspace = "{home_ws}"
model = "anthropic/claude-opus-4-6"
identity = {{ name = "Homer", emoji = "🏠" }}

[[agents]]
id = "work"
workspace = "{work_ws}"
model = "anthropic/claude-haiku-4-5"
fallbacks = []
{more}

[[agents]]
id = "family"
workspace = "{family_ws}"
model = "anthropic/claude-sonnet-4-5"
tools = {{ deny = ["exec", "web_fetch"] }}

[[bindings]]
agent = "family"
channel = "telegram"
account = "family"

[[bindings]]
agent = "work"
channel = "telegram"
peer = "{WORK}"
"#,
        work = work_bot.base,
        family = family_bot.base,
        home_ws = dirs[0].path().display(),
        work_ws = dirs[1].path().display(),
        family_ws = dirs[2].path().display(),
    );
    std::fs::write(home.path().join("config.toml"), config).unwrap();
    let gw = Gateway::start_in(home, &mock.base(), &[]);
    Setup { gw, dirs }
}

/// The request whose messages carry `marker`.
fn request_with(mock: &MockModel, marker: &str) -> Recorded {
    request_where(mock, marker, |r| r.body["messages"].to_string().contains(marker))
}

/// The first request `pick` picks (waiting for it).
fn request_where(mock: &MockModel, what: &str, pick: impl Fn(&Recorded) -> bool) -> Recorded {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        if let Some(r) = mock.requests().into_iter().find(|r| pick(r)) {
            return r;
        }
        assert!(std::time::Instant::now() < deadline, "no request: {what}");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

fn system(r: &Recorded) -> String {
    r.body["system"].to_string()
}

#[test]
fn each_message_reaches_the_agent_its_binding_names_with_that_agents_workspace_model_and_tools() {
    let mock = MockModel::start();
    let (work_bot, family_bot) = (FakeTelegram::start(), FakeTelegram::start());
    let s = start(&mock, &work_bot, &family_bot, "");
    let gw = &s.gw;
    mock.push(text("anthropic", "Work reply.").when("MSG-WORK"));
    mock.push(text("anthropic", "Home reply.").when("MSG-STRANGER"));
    mock.push(text("anthropic", "Family reply.").when("MSG-MUM"));

    work_bot.message(WORK, "private", WORK, "MSG-WORK hello");
    work_bot.message(STRANGER, "private", STRANGER, "MSG-STRANGER hello");
    family_bot.message(MUM, "private", MUM, "MSG-MUM hello");
    assert_eq!(work_bot.wait_sent(WORK, 1), ["Work reply."]);
    assert_eq!(work_bot.wait_sent(STRANGER, 1), ["Home reply."]);
    assert_eq!(family_bot.wait_sent(MUM, 1), ["Family reply."]);
    // Nothing went out through the other bot.
    assert!(family_bot.sent().iter().all(|m| m["chat_id"].to_string().contains(&MUM.to_string())));

    // Each ran as its agent: its model, its workspace, its tools.
    let work = request_with(&mock, "MSG-WORK");
    let home = request_with(&mock, "MSG-STRANGER");
    let family = request_with(&mock, "MSG-MUM");
    assert_eq!(work.body["model"], "claude-haiku-4-5");
    assert_eq!(home.body["model"], "claude-opus-4-6");
    assert_eq!(family.body["model"], "claude-sonnet-4-5");
    for (r, dir) in [(&home, &s.dirs[0]), (&work, &s.dirs[1]), (&family, &s.dirs[2])] {
        let wd = format!("Working directory: {}", dir.path().display());
        assert!(system(r).contains(&wd), "{wd} not in {}", system(r));
    }
    assert!(system(&home).contains("You are Homer 🏠, an AI assistant (agent `home`"), "{}", system(&home));
    assert!(!system(&home).contains("You are acp"));
    assert!(system(&work).contains("You are acp"));
    let (work_tools, family_tools) = (offered_tools("anthropic", &work.body), offered_tools("anthropic", &family.body));
    assert!(work_tools.contains(&"exec".to_owned()) && work_tools.contains(&"web_fetch".to_owned()), "{work_tools:?}");
    assert!(!family_tools.contains(&"exec".to_owned()) && !family_tools.contains(&"web_fetch".to_owned()));
    assert!(family_tools.contains(&"read".to_owned()), "{family_tools:?}");

    // Keys carry the agent, and the account where dmScope says so.
    let mut admin = gw.client(&["operator.admin"]);
    let listed = admin.request("sessions.list", json!({}));
    // (A malformed agent key is refused, not run as no agent.)
    let bad =
        admin.request("chat.send", json!({"sessionKey": "agent:work", "message": "x", "idempotencyKey": "k-bad"}));
    assert!(bad.to_string().contains("not a valid session key"), "{bad}");
    let mut keys: Vec<String> = listed["payload"]["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["key"].as_str().unwrap().to_owned())
        .collect();
    keys.sort();
    assert_eq!(
        keys,
        [
            "agent:family:telegram:family:dm:333",
            "agent:home:telegram:default:dm:222",
            "agent:work:telegram:default:dm:111"
        ]
    );
    let only_work = admin.request("sessions.list", json!({"agentId": "work"}));
    assert_eq!(only_work["payload"]["sessions"].as_array().unwrap().len(), 1, "{only_work}");

    // The agents, as the reference shapes them.
    let agents = admin.request("agents.list", json!({}));
    let p = &agents["payload"];
    assert_eq!(p["defaultId"], "home");
    assert_eq!(p["ownership"], "explicit");
    let ids: Vec<&str> = p["agents"].as_array().unwrap().iter().map(|a| a["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["home", "work", "family"]);
    assert_eq!(p["agents"][1]["model"], json!({"primary": "anthropic/claude-haiku-4-5", "fallbacks": []}));
    assert_eq!(p["agents"][0]["model"]["fallbacks"], json!(["anthropic/claude-sonnet-4-5"]));
    assert_eq!(p["agents"][0]["identity"], json!({"name": "Homer", "emoji": "🏠"}));
    assert_eq!(p["agents"][2]["workspace"], s.dirs[2].path().display().to_string());
    let who = admin.request("agent.identity.get", json!({}));
    assert_eq!(who["payload"]["agentId"], "home");
    assert_eq!(who["payload"]["name"], "Homer");
    assert_eq!(who["payload"]["avatar"], "🏠");
    let who = admin.request("agent.identity.get", json!({"sessionKey": "agent:work:x"}));
    assert_eq!(who["payload"], json!({"agentId": "work", "name": "Assistant", "nameSource": "default", "avatar": "A"}));
    let bad = admin.request("agent.identity.get", json!({"agentId": "home", "sessionKey": "agent:work:x"}));
    assert!(bad["error"]["message"].as_str().unwrap().contains("does not match"), "{bad}");
    let none = admin.request("agent.identity.get", json!({"agentId": "nobody"}));
    assert!(none["error"]["message"].as_str().unwrap().contains("not found"), "{none}");
    let (mut socket, _) = gw.socket();
    let hello = socket.request("connect", crate::support::gateway::connect_params(Some(TOKEN), &["operator.read"]));
    assert_eq!(hello["payload"]["snapshot"]["sessionDefaults"]["mainSessionKey"], "agent:home:main", "{hello}");
    assert_eq!(hello["payload"]["snapshot"]["health"]["defaultAgentId"], "home");

    // A key without an agent is the default's; one naming no agent is refused, not run.
    let before = mock.requests().len();
    let refused = admin.request(
        "chat.send",
        json!({"sessionKey": "agent:nobody:main", "message": "hi", "idempotencyKey": "k-nobody"}),
    );
    assert!(refused.to_string().contains("no agent `nobody`"), "{refused}");
    assert_eq!(mock.requests().len(), before);

    // A stranger on the second bot is paired on that account, approved by the name it gives.
    let newcomer = 444;
    family_bot.message(newcomer, "private", newcomer, "hello?");
    let told = family_bot.wait_sent(newcomer, 1).remove(0);
    let code = told.split("approve telegram:family ").nth(1).unwrap_or_else(|| panic!("{told}"))[..8].to_owned();
    let (ok, out) = gw.cli(&["pairing", "approve", "telegram:family", &code]);
    assert!(ok, "{out}");
    mock.push(text("anthropic", "Welcome.").when("MSG-NEWCOMER"));
    family_bot.message(newcomer, "private", newcomer, "MSG-NEWCOMER hi");
    assert_eq!(family_bot.wait_sent(newcomer, 2)[1], "Welcome.");

    // Every account of the channel is reported.
    let status = admin.request("channels.status", json!({}));
    let accounts = &status["payload"]["channelAccounts"]["telegram"];
    let names: Vec<&str> = accounts.as_array().unwrap().iter().map(|a| a["accountId"].as_str().unwrap()).collect();
    assert_eq!(names, ["default", "family"], "{status}");
    assert_eq!(status["payload"]["channels"]["telegram"]["accounts"], 2);
    let (ok, out) = gw.cli(&["channels", "status"]);
    assert!(ok && out.contains("telegram: polling") && out.contains("telegram (family): polling"), "{out}");

    // The command line.
    let (ok, out) = gw.cli(&["agents", "list"]);
    assert!(ok, "{out}");
    let lines: Vec<&str> = out.lines().collect();
    assert!(lines[1].starts_with("home*") && lines[1].contains("anthropic/claude-opus-4-6"), "{out}");
    assert!(lines[2].starts_with("work ") && lines[2].contains("claude-haiku-4-5"), "{out}");
    let (ok, out) = gw.cli(&["agents", "bindings"]);
    assert!(ok, "{out}");
    assert_eq!(
        out.lines().collect::<Vec<_>>(),
        [
            "peer     channel=telegram peer=111 → work",
            "account  channel=telegram account=family → family",
            "default  everything else → home"
        ]
    );
    let (ok, out) = gw.cli(&["sessions", "list", "--agent", "family", "--json"]);
    assert!(ok, "{out}");
    let rows: Vec<Value> = out.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let mut ids: Vec<&str> = rows.iter().map(|r| r["id"].as_str().unwrap()).collect();
    ids.sort_unstable();
    assert_eq!(ids, ["agent:family:telegram:family:dm:333", "agent:family:telegram:family:dm:444"], "{out}");
    let (ok, out) = gw.cli(&["sessions", "list", "--agent", "nobody"]);
    assert!(!ok && out.contains("no agent `nobody`"), "{out}");
}

#[test]
fn a_subagent_of_another_agent_is_refused_unless_allowed_and_then_runs_as_that_agent() {
    let mock = MockModel::start();
    let (work_bot, family_bot) = (FakeTelegram::start(), FakeTelegram::start());
    // `work` may start `family`'s subagents, not `home`'s.
    let s = start(&mock, &work_bot, &family_bot, "subagents = { allow_agents = [\"family\"] }");
    const PARENT: &str = "\"name\":\"sessions_spawn\"";
    mock.push(
        calls(
            "anthropic",
            &[
                ("s1", "sessions_spawn", json!({"task": "TASK-HOME: look", "agentId": "home"})),
                ("s2", "sessions_spawn", json!({"task": "TASK-FAMILY: look", "agentId": "family"})),
                ("s3", "agents_list", json!({})),
                ("s4", "sessions_history", json!({"sessionKey": "agent:home:telegram:default:dm:222"})),
            ],
        )
        .when("MSG-SPAWN"),
    );
    mock.push(text("anthropic", "Spawned.").when("\"tool_use_id\":\"s3\""));
    mock.push(text("anthropic", "Family child done.").when("TASK-FAMILY").unless(PARENT));
    mock.push(text("anthropic", "Noted.").when("Subagent announcement"));

    work_bot.message(WORK, "private", WORK, "MSG-SPAWN please");
    assert_eq!(work_bot.wait_sent(WORK, 1), ["Spawned."]);
    let parent = request_with(&mock, "MSG-SPAWN");
    let offered = offered_tools("anthropic", &parent.body);
    assert!(offered.contains(&"agents_list".to_owned()), "{offered:?}");
    let with_results = request_with(&mock, "\"tool_use_id\":\"s3\"");
    let refused = result_for("anthropic", &with_results.body, "s1");
    assert!(refused.contains("may not start subagents of agent `home`"), "{refused}");
    let started = result_for("anthropic", &with_results.body, "s2");
    assert!(started.contains("agent:family:subagent:"), "{started}");
    // Another agent's sessions are not this one's to read.
    let other = result_for("anthropic", &with_results.body, "s4");
    assert!(other.contains("is another agent's"), "{other}");
    let listed = result_for("anthropic", &with_results.body, "s3");
    let listed: Value = serde_json::from_str(&listed).unwrap();
    let ids: Vec<&str> = listed.as_array().unwrap().iter().map(|a| a["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["work", "family"], "{listed}");
    // The child ran as `family`: its model, its workspace, without the tools it is denied (and
    // without session tools, as any subagent).
    // (The parent's own later requests carry the task too, in its call.)
    let child = request_where(&mock, "the child's", |r| {
        r.body["messages"][0].to_string().contains("TASK-FAMILY") && !r.body.to_string().contains(PARENT)
    });
    assert_eq!(child.body["model"], "claude-sonnet-4-5");
    assert!(system(&child).contains(&format!("Working directory: {}", s.dirs[2].path().display())));
    let child_tools = offered_tools("anthropic", &child.body);
    assert!(!child_tools.contains(&"exec".to_owned()) && !child_tools.contains(&"sessions_spawn".to_owned()));
    assert!(mock.requests().iter().all(|r| !r.body["messages"][0].to_string().contains("TASK-HOME")));

    // `home` may start no other agent's: it is not offered agents_list.
    mock.push(text("anthropic", "Home here.").when("MSG-HOME"));
    work_bot.message(STRANGER, "private", STRANGER, "MSG-HOME hi");
    assert_eq!(work_bot.wait_sent(STRANGER, 1), ["Home here."]);
    let home = request_with(&mock, "MSG-HOME");
    let offered = offered_tools("anthropic", &home.body);
    assert!(offered.contains(&"sessions_spawn".to_owned()) && !offered.contains(&"agents_list".to_owned()));
    drop(s);
}
