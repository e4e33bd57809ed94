//! Tests of configuration loading: file + environment precedence, model references, custom
//! providers, and errors that say what is wrong.

use std::collections::HashMap;

use super::*;

fn load(file: Option<&str>, vars: &[(&str, &str)]) -> Config {
    let dir = tempfile::tempdir().unwrap();
    if let Some(text) = file {
        std::fs::write(dir.path().join("config.toml"), text).unwrap();
    }
    let mut env: HashMap<String, String> = vars.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
    env.insert("ACP_HOME".into(), dir.path().display().to_string());
    let config = Config::load_with(&|name| env.get(name).cloned());
    drop(dir);
    config
}

#[test]
fn model_refs_split_at_the_first_slash() {
    let r = ModelRef::parse("openrouter/anthropic/claude-sonnet-4.5").unwrap();
    assert_eq!((r.provider.as_str(), r.model.as_str()), ("openrouter", "anthropic/claude-sonnet-4.5"));
    assert_eq!(ModelRef::parse("gpt-5"), None);
    assert_eq!(ModelRef::parse("/x"), None);
    assert_eq!(ModelRef::parse("x/"), None);
}

#[test]
fn no_keys_means_no_model_and_a_helpful_message() {
    let c = load(None, &[]);
    assert!(!c.any_usable());
    let err = c.default_model_ref().unwrap_err().to_string();
    assert!(err.contains("ANTHROPIC_API_KEY") && err.contains("OPENAI_API_KEY"), "{err}");
    assert!(err.contains("config.toml") && err.contains("[providers."), "{err}");
}

#[test]
fn env_keys_and_base_urls() {
    let c = load(None, &[("ANTHROPIC_API_KEY", "k"), ("ANTHROPIC_BASE_URL", "http://127.0.0.1:9/")]);
    let p = c.provider("anthropic").unwrap();
    assert_eq!(p.base_url, "http://127.0.0.1:9", "trailing slash trimmed; no /v1 added");
    assert_eq!(p.api_key.as_deref(), Some("k"));
    assert_eq!(c.default_model_ref().unwrap().to_string(), "anthropic/claude-sonnet-4-5");

    let c = load(None, &[("OPENAI_API_KEY", "k"), ("OPENAI_BASE_URL", "http://h/v1")]);
    assert_eq!(c.provider("openai").unwrap().base_url, "http://h/v1");
    assert_eq!(c.provider("openai-responses").unwrap().base_url, "http://h/v1");
    assert_eq!(c.default_model_ref().unwrap().provider, "openai");
}

#[test]
fn acp_model_beats_the_file_and_must_be_usable() {
    let file = "model = \"openai/gpt-4.1\"\n";
    let c = load(Some(file), &[("OPENAI_API_KEY", "k")]);
    assert_eq!(c.default_model_ref().unwrap().to_string(), "openai/gpt-4.1");
    let c = load(Some(file), &[("OPENAI_API_KEY", "k"), ("ACP_MODEL", "openai-responses/gpt-5-codex")]);
    assert_eq!(c.default_model_ref().unwrap().to_string(), "openai-responses/gpt-5-codex");
    let c = load(Some(file), &[("OPENAI_API_KEY", "k"), ("ACP_MODEL", "anthropic/claude-x")]);
    let err = c.default_model_ref().unwrap_err().to_string();
    assert!(err.contains("ANTHROPIC_API_KEY"), "{err}");
    let c = load(None, &[("OPENAI_API_KEY", "k"), ("ACP_MODEL", "nope/x")]);
    assert!(c.default_model_ref().unwrap_err().to_string().contains("unknown provider `nope`"));
}

#[test]
fn custom_providers_in_a_few_lines() {
    let file = r#"
model = "ollama/qwen3:8b"
[providers.ollama]
api = "openai-chat"
base_url = "http://localhost:11434/v1/"
models = ["qwen3:8b", { id = "llama3.3", context_window = 131072, max_tokens = 4096 }]

[providers.openrouter]
api = "openai-chat"
base_url = "https://openrouter.ai/api/v1"
api_key_env = "OPENROUTER_API_KEY"
headers = { "X-Title" = "acp" }
models = ["anthropic/claude-sonnet-4.5"]
"#;
    let c = load(Some(file), &[]);
    assert_eq!(c.load_error, None);
    let ollama = c.provider("ollama").unwrap();
    assert!(ollama.is_usable(), "no key needed when none is configured");
    assert_eq!(ollama.base_url, "http://localhost:11434/v1");
    assert_eq!(ollama.model("llama3.3").context_window, 131_072);
    assert_eq!(ollama.model("llama3.3").max_output_tokens, Some(4096));
    assert_eq!(c.default_model_ref().unwrap().to_string(), "ollama/qwen3:8b");
    let or = c.provider("openrouter").unwrap();
    assert!(!or.is_usable());
    assert_eq!(or.headers, vec![("X-Title".to_owned(), "acp".to_owned())]);
    assert!(or.unusable_reason().unwrap().contains("OPENROUTER_API_KEY"));
    let (r, _) = c.resolve_model("llama3.3").unwrap();
    assert_eq!(r.to_string(), "ollama/llama3.3", "bare names are looked up in model lists");
    let choices: Vec<String> = c.model_choices().into_iter().map(|(r, _)| r.to_string()).collect();
    assert_eq!(choices, vec!["ollama/qwen3:8b", "ollama/llama3.3"]);
}

#[test]
fn sections_override_builtins() {
    let file =
        "[providers.anthropic]\nbase_url = \"http://proxy\"\napi_key_env = \"MY_KEY\"\nmodels = [\"claude-z\"]\n";
    let c = load(Some(file), &[("MY_KEY", "secret")]);
    let p = c.provider("anthropic").unwrap();
    assert_eq!(p.base_url, "http://proxy");
    assert_eq!(p.api_key.as_deref(), Some("secret"));
    assert_eq!(p.models.iter().map(|m| m.id.as_str()).collect::<Vec<_>>(), vec!["claude-z"]);
    // The environment wins over the file for built-in base URLs.
    let c = load(Some(file), &[("MY_KEY", "s"), ("ANTHROPIC_BASE_URL", "http://env")]);
    assert_eq!(c.provider("anthropic").unwrap().base_url, "http://env");
}

#[test]
fn timeouts_and_retry_settings() {
    let c = load(Some("[timeouts]\nidle = 0.25\nfirst_event = 2\n[retry]\nmax_retries = 1\n"), &[]);
    assert_eq!(c.timeouts.idle, Duration::from_millis(250));
    assert_eq!(c.timeouts.first_event, Duration::from_secs(2));
    assert_eq!(c.timeouts.connect, Duration::from_secs(10));
    assert_eq!(c.retry.max_retries, 1);
}

#[test]
fn bad_files_are_reported_not_ignored() {
    let c = load(Some("model = 5\n"), &[("ANTHROPIC_API_KEY", "k")]);
    let err = c.load_error.clone().unwrap();
    assert!(err.contains("config.toml"), "{err}");
    assert!(c.default_model_ref().unwrap_err().to_string().contains("the configuration file is broken"));

    let c = load(Some("modle = \"x\"\n"), &[]);
    assert!(c.load_error.unwrap().contains("modle"), "unknown keys are typos, not silence");

    let c = load(Some("[providers.x]\napi = \"openai-chat\"\n"), &[]);
    assert!(c.load_error.unwrap().contains("[providers.x]: missing `base_url`"));

    let c = load(Some("[providers.x]\napi = \"grpc\"\nbase_url = \"http://h\"\nmodels = [\"m\"]\n"), &[]);
    assert!(c.load_error.unwrap().contains("grpc"));
}

#[test]
fn reasoning_default_level() {
    assert_eq!(load(None, &[]).reasoning, None);
    assert_eq!(load(Some("reasoning = \"high\"\n"), &[]).reasoning, Some(ReasoningEffort::High));
    assert_eq!(load(Some("reasoning = \"default\"\n"), &[]).reasoning, None);
    let c = load(Some("reasoning = \"extreme\"\n"), &[]);
    assert!(c.load_error.unwrap().contains("extreme"));
}

#[test]
fn the_prompt_cache_key_goes_to_openai_and_to_servers_that_ask_for_it() {
    let c = load(
        Some(concat!(
            "[providers.local]\napi = \"openai-chat\"\nbase_url = \"http://h/v1\"\nmodels = [\"m\"]\n",
            "[providers.proxy]\napi = \"openai-responses\"\nbase_url = \"http://p/v1\"\nmodels = [\"m\"]\nprompt_cache_key = true\n",
            "[providers.openai]\nprompt_cache_key = false\n",
        )),
        &[],
    );
    let on = |id: &str| c.provider(id).unwrap().prompt_cache_key;
    assert!(on("openai-responses"), "the built-in OpenAI providers send it");
    assert!(!on("openai"), "unless the file says not to");
    assert!(!on("local"), "other servers may refuse a field they do not know");
    assert!(on("proxy"));
    assert!(!on("anthropic"));
}

#[test]
fn absurd_durations_are_refused_with_the_key_that_has_them() {
    for (file, key) in [
        ("[timeouts]\nidle = 1e30\n", "[timeouts] idle"),
        ("[timeouts]\nconnect = 0\n", "[timeouts] connect"),
        ("[retry]\ninitial_delay = 1e300\n", "[retry] initial_delay"),
        ("[retry]\nmax_backoff = inf\n", "[retry] max_backoff"),
        ("[retry]\nmax_retry_after = -3\n", "[retry] max_retry_after"),
    ] {
        let c = load(Some(file), &[("ANTHROPIC_API_KEY", "k")]);
        let err = c.load_error.clone().unwrap_or_default();
        assert!(err.contains(key) && err.contains("config.toml"), "{file}: {err}");
        assert_eq!(c.timeouts, Timeouts::default(), "{file}");
    }
    let c = load(Some("[retry]\nmax_retries = 4000000000\n"), &[]);
    assert_eq!(c.retry.max_retries, 100);
}

#[test]
fn mcp_servers_from_the_file_codex_style() {
    let c = load(
        Some(
            r#"
[mcp_servers.files]
command = "npx"
args = ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"]
env = { DEBUG = "1" }
startup_timeout_sec = 5

[mcp_servers.docs]
url = "https://mcp.example.com/mcp"
headers = { "X-Team" = "core" }
bearer_token_env_var = "DOCS_TOKEN"

[mcp_servers.old]
url = "http://127.0.0.1:9/sse"
transport = "sse"

[mcp_servers.off]
command = "never"
enabled = false
"#,
        ),
        &[("DOCS_TOKEN", "t0k")],
    );
    assert_eq!(c.load_error, None);
    let mut files = mcp::McpServer::new(
        "files",
        mcp::McpTransport::Stdio {
            command: "npx".into(),
            args: vec!["-y".into(), "@modelcontextprotocol/server-filesystem".into(), "/tmp".into()],
            env: vec![("DEBUG".into(), "1".into())],
            cwd: None,
        },
    );
    files.startup_timeout = Duration::from_secs(5);
    let docs = mcp::McpServer::new(
        "docs",
        mcp::McpTransport::Http {
            url: "https://mcp.example.com/mcp".into(),
            headers: vec![("X-Team".into(), "core".into()), ("Authorization".into(), "Bearer t0k".into())],
        },
    );
    let old =
        mcp::McpServer::new("old", mcp::McpTransport::Sse { url: "http://127.0.0.1:9/sse".into(), headers: vec![] });
    assert_eq!(c.mcp_servers, vec![docs, files, old]);
}

#[test]
fn broken_mcp_sections_say_what_is_wrong() {
    for (section, want) in [
        ("[mcp_servers.a]\nargs = [\"x\"]", "[mcp_servers.a]: give `command` (a local server) or `url` (a remote one)"),
        ("[mcp_servers.a]\ncommand = \"x\"\nurl = \"http://h\"", "give either `command` or `url`, not both"),
        ("[mcp_servers.a]\nurl = \"ftp://h\"", "`url` must be http:// or https://"),
        ("[mcp_servers.a]\nurl = \"http://h\"\ntransport = \"ws\"", "`transport` must be \"http\" or \"sse\""),
        ("[mcp_servers.\"a b\"]\ncommand = \"x\"", "may hold only letters, digits"),
        ("[mcp_servers.a]\ncommand = \"x\"\nstartup_timeout_sec = -1", "startup_timeout_sec = -1"),
        ("[mcp_servers.a]\ncommand = \"x\"\nport = 3", "unknown field `port`"),
    ] {
        let c = load(Some(section), &[]);
        let err = c.load_error.unwrap_or_default();
        assert!(err.contains(want), "{section}: {err}");
    }
}

#[test]
fn a_server_whose_token_variable_is_unset_is_unavailable_and_the_file_is_not_broken() {
    let c = load(
        Some(
            "[mcp_servers.docs]\nurl = \"http://h/mcp\"\nbearer_token_env_var = \"NOPE\"\n[mcp_servers.files]\ncommand = \"x\"",
        ),
        &[],
    );
    assert_eq!(c.load_error, None);
    let docs = c.mcp_servers.iter().find(|s| s.name == "docs").unwrap();
    assert_eq!(docs.unavailable.as_deref(), Some("NOPE is not set (its `bearer_token_env_var`)"));
    let files = c.mcp_servers.iter().find(|s| s.name == "files").unwrap();
    assert_eq!(files.unavailable, None);
    let c = load(Some("[mcp_servers.docs]\nurl = \"http://h/mcp\"\nbearer_token_env_var = \"YES\""), &[("YES", "t")]);
    let docs = &c.mcp_servers[0];
    assert_eq!(docs.unavailable, None);
    assert!(
        matches!(&docs.transport, mcp::McpTransport::Http { headers, .. } if headers == &[("Authorization".to_owned(), "Bearer t".to_owned())])
    );
}

#[test]
fn the_editors_servers_win_by_name() {
    let stdio = |cmd: &str| mcp::McpTransport::Stdio { command: cmd.into(), args: vec![], env: vec![], cwd: None };
    let configured = [mcp::McpServer::new("a", stdio("from-file")), mcp::McpServer::new("b", stdio("b"))];
    let given = vec![mcp::McpServer::new("a", stdio("from-editor")), mcp::McpServer::new("c", stdio("c"))];
    let names: Vec<(String, mcp::McpTransport)> =
        mcp::merge(&configured, given).into_iter().map(|s| (s.name, s.transport)).collect();
    assert_eq!(names, [("b".into(), stdio("b")), ("a".into(), stdio("from-editor")), ("c".into(), stdio("c"))]);
}

#[test]
fn aliases_and_bare_ids_resolve_and_ambiguity_names_the_choices() {
    let c = load(
        Some("[models.aliases]\nfast = \"openai/gpt-5-mini\"\nsonnet = \"anthropic/claude-opus-4-6\"\n"),
        &[("ANTHROPIC_API_KEY", "k"), ("OPENAI_API_KEY", "k")],
    );
    let resolved = |name: &str| c.resolve_model(name).map(|(r, _)| r.to_string());
    assert_eq!(resolved("haiku").unwrap(), "anthropic/claude-haiku-4-5");
    assert_eq!(resolved("gpt").unwrap(), "openai/gpt-5");
    assert_eq!(resolved("fast").unwrap(), "openai/gpt-5-mini");
    assert_eq!(resolved("sonnet").unwrap(), "anthropic/claude-opus-4-6", "the user's alias wins");
    assert_eq!(resolved("claude-haiku-4-5").unwrap(), "anthropic/claude-haiku-4-5", "one provider offers it");
    let err = resolved("gpt-5").unwrap_err();
    assert!(!err.setup, "{err}");
    assert!(err.message.contains("`openai/gpt-5`") && err.message.contains("`openai-responses/gpt-5`"), "{err}");
    let err = resolved("nonesuch").unwrap_err().message;
    assert!(err.contains("provider/model") && err.contains("haiku"), "{err}");
    // An alias to a provider without a key says so.
    let c = load(None, &[("OPENAI_API_KEY", "k")]);
    let err = c.resolve_model("opus").unwrap_err();
    assert!(err.setup && err.message.contains("ANTHROPIC_API_KEY"), "{err}");
}

#[test]
fn profiles_come_after_the_providers_own_key_and_a_wrong_fallback_is_a_broken_file() {
    let home = tempfile::tempdir().unwrap();
    let key_file = home.path().join("work.key");
    std::fs::write(&key_file, "sk-work\nignored\n").unwrap();
    let file = format!(
        "fallbacks = [\"gpt\"]\n\
         [providers.anthropic]\nrotation = \"last-good\"\n\
         [[providers.anthropic.profiles]]\nid = \"work\"\nkey_file = \"{}\"\n\
         [[providers.anthropic.profiles]]\napi_key_env = \"ANTHROPIC_KEY_2\"\n\
         [[providers.anthropic.profiles]]\napi_key_env = \"UNSET_KEY\"\n",
        key_file.display()
    );
    let c = load(Some(&file), &[("ANTHROPIC_API_KEY", "sk-own"), ("ANTHROPIC_KEY_2", "sk-two")]);
    assert_eq!(c.load_error, None);
    let p = c.provider("anthropic").unwrap();
    let seen: Vec<(&str, Option<&str>, &str)> =
        p.profiles.iter().map(|p| (p.id.as_str(), p.key.as_deref(), p.source.as_str())).collect();
    let path = key_file.display().to_string();
    assert_eq!(
        seen,
        [
            ("default", Some("sk-own"), "ANTHROPIC_API_KEY"),
            ("work", Some("sk-work"), path.as_str()),
            ("2", Some("sk-two"), "ANTHROPIC_KEY_2"),
            ("3", None, "UNSET_KEY")
        ]
    );
    assert_eq!(p.profiles[3].missing.as_deref(), Some("UNSET_KEY is not set"));
    assert_ne!(p.profiles[0].fingerprint, p.profiles[1].fingerprint);
    assert!(!p.profiles[0].fingerprint.contains("sk-"), "a fingerprint is a hash, not the key");
    assert_eq!(p.rotation, models::Rotation::LastGood);
    assert_eq!(c.fallbacks, ["gpt"]);
    // Profiles alone make a provider usable.
    let c = load(Some("[[providers.anthropic.profiles]]\napi_key_env = \"K\"\n"), &[("K", "sk")]);
    assert_eq!(c.default_model_ref().unwrap().provider, "anthropic");
    // A fallback naming no provider, or a profile with two keys, is a mistake said at once.
    let c = load(Some("fallbacks = [\"nowhere/x\"]\n"), &[("ANTHROPIC_API_KEY", "k")]);
    assert!(c.load_error.unwrap().contains("fallbacks: unknown provider `nowhere`"));
    let c = load(Some("[[providers.anthropic.profiles]]\napi_key = \"a\"\napi_key_env = \"B\"\n"), &[]);
    assert!(c.load_error.unwrap().contains("exactly one of"));
    // A fallback whose provider has no key is not a mistake: it waits for one.
    let c = load(Some("fallbacks = [\"gemini/gemini-2.5-pro\"]\n"), &[("ANTHROPIC_API_KEY", "k")]);
    assert_eq!(c.load_error, None);
}

#[test]
fn discovery_is_wanted_only_without_a_usable_provider() {
    assert!(load(None, &[]).wants_discovery());
    assert!(!load(None, &[("ANTHROPIC_API_KEY", "k")]).wants_discovery());
    assert!(!load(Some("[models]\ndiscover = false\n"), &[]).wants_discovery());
    let found = ProviderConfig {
        id: "ollama".into(),
        api: WireApi::OpenAiChat,
        base_url: "http://127.0.0.1:11434/v1".into(),
        api_key: None,
        api_key_env: None,
        key_required: false,
        headers: Vec::new(),
        models: model_list(WireApi::OpenAiChat, &["qwen3:8b"]),
        prompt_cache_key: false,
        profiles: Vec::new(),
        rotation: models::Rotation::default(),
        discovered: true,
    };
    let c = load(None, &[]).with_found(&[found]);
    assert_eq!(c.default_model_ref().unwrap().to_string(), "ollama/qwen3:8b");
    assert!(c.wants_discovery(), "found servers do not count as configured");
    assert_eq!(c.resolve_model("qwen3:8b").unwrap().0.to_string(), "ollama/qwen3:8b");
}

#[test]
fn mistakes_in_aliases_and_profiles_are_said_and_keyless_bare_ids_say_which_key() {
    let broken = |file: &str| load(Some(file), &[("ANTHROPIC_API_KEY", "k")]).load_error.unwrap_or_default();
    assert!(broken("[models.aliases]\n\"anthropic/x\" = \"openai/gpt-5\"\n").contains("a name without '/'"));
    assert!(broken("[models.aliases]\nbad = \"nope/x\"\n").contains("unknown provider `nope`"));
    assert!(broken("[[providers.anthropic.profiles]]\nid = \"default\"\napi_key = \"x\"\n").contains("own key"));
    let e = broken("fallbacks = [\"ollama/qwen3:8b\"]\n");
    assert!(e.contains("unknown provider `ollama`") && e.contains("[providers.ollama]"), "{e}");
    // A bare id only a provider without its key offers: that provider, and which key it needs.
    let c = load(Some("fallbacks = [\"gemini-2.5-pro\"]\n"), &[("ANTHROPIC_API_KEY", "k")]);
    assert_eq!(c.load_error, None);
    let e = c.resolve_model("gemini-2.5-pro").unwrap_err();
    assert!(e.setup && e.message.contains("`gemini/gemini-2.5-pro`") && e.message.contains("GEMINI_API_KEY"), "{e}");
    let e = c.resolve_model("flash").unwrap_err();
    assert!(e.message.starts_with("`gemini/gemini-2.5-flash` (the alias `flash`): provider `gemini`"), "{e}");
    // The only key, unreadable: said, with the profile.
    let c = load(Some("[[providers.anthropic.profiles]]\nid = \"p\"\nkey_file = \"/nonexistent/k\"\n"), &[]);
    let e = c.provider("anthropic").unwrap().unusable_reason().unwrap();
    assert!(e.contains("set ANTHROPIC_API_KEY, or mend its profiles (profile `p`: /nonexistent/k:"), "{e}");
}
