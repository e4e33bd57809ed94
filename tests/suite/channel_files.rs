//! Files the agent sends to chats, on a real `acp gateway` and the mock model, on every channel:
//! the `message` tool's `file` (a workspace file goes at once, with the text as its caption, a
//! picture as a picture; a file outside the workspace — the agent's own config — is asked about
//! first and, refused, never leaves; one too large is refused before anything is read), and the
//! gateway's `send` with `mediaUrl`/`mediaUrls` (a workspace path or a public URL; a path outside
//! the workspace and a local URL refused; a retry sends nothing twice). Telegram, Discord and
//! Slack against their stand-ins, which take the upload as the real service documents it;
//! Matrix against a real Synapse, the file read back from its media repository.

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::support::gateway::Gateway;
use crate::support::mock_model::MockModel;
use crate::support::script::{calls, result_for, text};

/// Bytes no text decoding would keep: every byte value, then some more.
fn binary(n: usize, seed: u8) -> Vec<u8> {
    (0..n).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)).collect()
}

/// A workspace with a picture and a PDF in it.
fn files(gw: &Gateway) -> (Vec<u8>, Vec<u8>) {
    let mut png = b"\x89PNG\r\n\x1a\n".to_vec();
    png.extend(binary(70_000 - 8, 7));
    let pdf = binary(5_000, 3);
    std::fs::write(gw.workspace.path().join("chart.png"), &png).unwrap();
    std::fs::create_dir_all(gw.workspace.path().join("out")).unwrap();
    std::fs::write(gw.workspace.path().join("out/report.pdf"), &pdf).unwrap();
    (png, pdf)
}

/// The model sends the chart with a caption and the report without one, then says it is done.
fn push_two_files(mock: &MockModel) {
    mock.push(calls(
        "anthropic",
        &[
            ("f1", "message", json!({"file": "chart.png", "text": "Here is the **chart**."})),
            ("f2", "message", json!({"file": "out/report.pdf"})),
        ],
    ));
    mock.push(text("anthropic", "Both sent."));
}

#[test]
fn telegram_the_agent_sends_files_and_operators_send_media() {
    use crate::support::telegram::FakeTelegram;
    let mock = MockModel::start();
    let fake = FakeTelegram::start();
    // A "public" file server (loopback, allowed as a private host for this test).
    let mut served = vec![0xff, 0xd8, 0xff];
    served.extend(binary(3_000, 9));
    let body = served.clone();
    let server =
        crate::support::stub_http::serve(std::sync::Arc::new(move |r: &crate::support::stub_http::Request| {
            crate::support::stub_http::Response {
                status: if r.path.starts_with("/pics/") { 200 } else { 404 },
                headers: vec![("content-type".into(), "image/jpeg; charset=binary".into())],
                body: body.clone(),
            }
        }));
    let home = tempfile::tempdir().unwrap();
    let config = format!(
        "[channels.telegram]\nbot_token = \"123:ABC\"\napi_base_url = \"{}\"\nallow_from = [\"1001\"]\n\
         [web_fetch]\nallow_private_hosts = [\"127.0.0.1\"]\n",
        fake.base
    );
    std::fs::write(home.path().join("config.toml"), config).unwrap();
    let gw = Gateway::start_in(home, &mock.base(), &[]);
    let (png, pdf) = files(&gw);
    let user = 1001;

    // A picture goes as a photo with its caption as Telegram HTML; the PDF as a document, as it
    // is; both at once (the session's own chat, files inside the workspace).
    push_two_files(&mock);
    fake.message(user, "private", user, "send me the chart and the report");
    let sent = fake.wait_files(user, 2);
    assert_eq!(sent[0].0["method"], "sendPhoto");
    assert_eq!(sent[0].0["file_name"], "chart.png");
    assert_eq!(sent[0].0["mime_type"], "image/png");
    assert_eq!(sent[0].0["caption"], "Here is the <b>chart</b>.");
    assert_eq!(sent[0].0["parse_mode"], "HTML");
    assert_eq!(sent[0].1, png);
    assert_eq!(sent[1].0["method"], "sendDocument");
    assert_eq!(
        (sent[1].0["file_name"].as_str(), sent[1].0["mime_type"].as_str()),
        (Some("report.pdf"), Some("application/pdf"))
    );
    assert_eq!(sent[1].0.get("caption"), None);
    assert_eq!(sent[1].1, pdf);
    assert_eq!(fake.wait_sent(user, 1).last().unwrap(), "Both sent.");
    let results = &mock.requests()[1].body;
    assert_eq!(result_for("anthropic", results, "f1"), "Sent chart.png (68 KB, image/png) to telegram chat 1001.");
    assert_eq!(
        result_for("anthropic", results, "f2"),
        "Sent report.pdf (5 KB, application/pdf) to telegram chat 1001."
    );

    // The agent's own config, outside the workspace (through a link in it): asked about — the
    // question shows where the link leads —, refused, never sent. A file over 50 MB is refused
    // before anything is read.
    let config_path = gw.home.path().join("config.toml");
    std::os::unix::fs::symlink(&config_path, gw.workspace.path().join("notes.txt")).unwrap();
    std::fs::File::create(gw.workspace.path().join("huge.bin")).unwrap().set_len((50 << 20) + 1).unwrap();
    mock.push(calls(
        "anthropic",
        &[
            ("f3", "message", json!({"file": "huge.bin"})),
            ("f4", "message", json!({"file": "notes.txt", "text": "the config"})),
        ],
    ));
    mock.push(text("anthropic", "I could not."));
    fake.message(user, "private", user, "send the big file and your config");
    let question = fake.wait_sent(user, 2).remove(1);
    assert!(question.starts_with("Permission needed: Send "), "{question}");
    assert!(question.contains("notes.txt → ") && question.contains("config.toml"), "{question}");
    fake.message(user, "private", user, "/deny");
    assert_eq!(fake.wait_sent(user, 4)[2..], ["Reject.", "I could not."]);
    let results = &mock.requests()[3].body;
    assert!(result_for("anthropic", results, "f3").contains("at most 50.0 MB can be sent"), "{results}");
    assert_eq!(fake.uploads().len(), 2, "nothing more was sent");

    // An operator's `send`: a workspace path, a public URL, several files with one caption.
    let mut operator = gw.client(&["operator.write"]);
    let to = user.to_string();
    let send = |operator: &mut crate::support::gateway::Client, params: Value| operator.request("send", params);
    for _ in 0..2 {
        let r = send(
            &mut operator,
            json!({"to": to, "message": "The report", "mediaUrl": "out/report.pdf", "idempotencyKey": "m1"}),
        );
        assert_eq!(r["payload"]["ok"], true, "{r}");
    }
    let r =
        send(&mut operator, json!({"to": to, "mediaUrl": format!("{server}/pics/cat.jpg"), "idempotencyKey": "m2"}));
    assert_eq!(r["payload"]["ok"], true, "{r}");
    let r = send(
        &mut operator,
        json!({"to": to, "message": "Both", "mediaUrls": ["chart.png", "out/report.pdf"], "idempotencyKey": "m3"}),
    );
    assert_eq!(r["payload"]["ok"], true, "{r}");
    let sent = fake.wait_files(user, 6);
    assert_eq!(fake.uploads().len(), 6, "the retried key sent nothing again");
    assert_eq!((sent[2].0["caption"].as_str(), sent[2].1 == pdf), (Some("The report"), true));
    assert_eq!((sent[3].0["method"].as_str(), sent[3].0["file_name"].as_str()), (Some("sendPhoto"), Some("cat.jpg")));
    assert_eq!((sent[3].0["mime_type"].as_str(), sent[3].1 == served), (Some("image/jpeg"), true));
    assert_eq!((sent[4].0["caption"].as_str(), sent[4].1 == png), (Some("Both"), true));
    assert_eq!((sent[5].0.get("caption"), sent[5].1 == pdf), (None, true));

    // Refused, each with a reason, and nothing sent: the agent's config (outside the
    // workspace), a way out of it, a missing file, a local URL not allowed, a URL that fails.
    let refusals = [
        (json!(config_path.to_str().unwrap()), "outside the workspace"),
        (json!("notes.txt"), "outside the workspace"),
        (json!("../config.toml"), "outside the workspace"),
        (json!("nope.txt"), "does not exist"),
        (json!("http://localhost:9/x.png"), "this machine"),
        (json!("ftp://127.0.0.1/x.png"), "ftp: URLs are not fetched"),
        (json!(format!("{server}/missing.png")), "404"),
    ];
    for (i, (media, why)) in refusals.into_iter().enumerate() {
        let r = send(
            &mut operator,
            json!({"to": to, "message": "x", "mediaUrl": media, "idempotencyKey": format!("bad{i}")}),
        );
        let message = r["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(why), "{media}: {r}");
    }
    // A "picture" Telegram will not take as a photo goes as a document; a caption too long for
    // a file follows it as a message.
    std::fs::write(gw.workspace.path().join("fake.jpg"), binary(2_000, 5)).unwrap();
    let long = "Long caption words. ".repeat(60);
    let r = send(&mut operator, json!({"to": to, "message": long, "mediaUrl": "fake.jpg", "idempotencyKey": "m4"}));
    assert_eq!(r["payload"]["ok"], true, "{r}");
    let sent = fake.wait_files(user, 7);
    assert_eq!(
        (sent[6].0["method"].as_str(), sent[6].0["file_name"].as_str()),
        (Some("sendDocument"), Some("fake.jpg"))
    );
    assert_eq!(sent[6].0.get("caption"), None);
    assert_eq!(fake.wait_sent(user, 5)[4], long.trim_end());
    let r = send(&mut operator, json!({"to": to, "idempotencyKey": "empty"}));
    assert!(r["error"]["message"].as_str().unwrap().contains("`message` is empty"), "{r}");
    assert_eq!(fake.uploads().len(), 7);
    drop(gw);
}

#[test]
fn discord_files_go_as_attachments_in_the_chat_and_its_threads() {
    use crate::support::discord::{ADA, BOT_ID, FakeDiscord, GENERAL, wait};
    let mock = MockModel::start();
    let discord = FakeDiscord::start();
    let home = tempfile::tempdir().unwrap();
    std::fs::write(home.path().join("config.toml"), discord.config("")).unwrap();
    let gw = Gateway::start_in(home, &mock.base(), &[]);
    discord.wait_connected();
    let (png, pdf) = files(&gw);

    push_two_files(&mock);
    discord.dm(ADA, "send me the chart and the report");
    let dm = discord.dm_channel_of(ADA);
    let sent = discord.wait_files(&dm, 2);
    assert_eq!(sent[0].0["content"], "Here is the **chart**.");
    assert_eq!(sent[0].0["attachment"]["filename"], "chart.png");
    assert_eq!(sent[0].0["attachment"]["content_type"], "image/png");
    assert_eq!(sent[0].1, png);
    assert_eq!(
        (sent[1].0["content"].as_str(), sent[1].0["attachment"]["filename"].as_str()),
        (Some(""), Some("report.pdf"))
    );
    assert_eq!(sent[1].1, pdf);
    assert!(discord.sent().iter().all(|m| m["allowed_mentions"] == json!({"parse": []})), "nothing pings anyone");
    assert_eq!(discord.wait_texts(&dm, 3)[2], "Both sent.");

    // In a thread, the file goes into the thread; a caption too long for one message follows
    // the file, cut.
    let thread = discord.thread(GENERAL, "files");
    let long = "A long caption. ".repeat(150);
    mock.push(calls("anthropic", &[("f3", "message", json!({"file": "chart.png", "text": long}))]));
    mock.push(text("anthropic", "There."));
    discord.say(&thread, ADA, &format!("<@{BOT_ID}> the chart, with notes"));
    let sent = discord.wait_files(&thread, 1);
    assert_eq!((sent[0].0["content"].as_str(), sent[0].1 == png), (Some(""), true));
    let texts = discord.wait_texts(&thread, 4);
    assert!(texts[1..3].iter().all(|t| t.chars().count() <= 2000), "{texts:?}");
    assert_eq!(
        texts[1..3].join(" ").split_whitespace().collect::<Vec<_>>(),
        long.split_whitespace().collect::<Vec<_>>()
    );
    assert_eq!(texts[3], "There.");

    // Over what a server takes (10 MB unless boosted): the model is told why.
    std::fs::write(gw.workspace.path().join("big.bin"), binary(11 << 20, 1)).unwrap();
    mock.push(calls("anthropic", &[("f4", "message", json!({"file": "big.bin"}))]));
    mock.push(text("anthropic", "Too big."));
    discord.dm(ADA, "the big one");
    wait(|| (discord.texts(&dm).len() >= 4).then_some(()), "the answer");
    let result = result_for("anthropic", &mock.requests().last().unwrap().body, "f4");
    assert!(result.contains("larger than this Discord server takes"), "{result}");
    drop(gw);
}

#[test]
fn slack_files_are_uploaded_and_shared_in_the_chat_and_its_threads() {
    use crate::support::slack::{ADA, BOT_USER, FakeSlack, GENERAL};
    let mock = MockModel::start();
    let slack = FakeSlack::start();
    let home = tempfile::tempdir().unwrap();
    std::fs::write(home.path().join("config.toml"), slack.config("")).unwrap();
    let gw = Gateway::start_in(home, &mock.base(), &[]);
    let (png, pdf) = files(&gw);

    // Shared in the direct chat (opened for the user id), the caption as mrkdwn.
    push_two_files(&mock);
    slack.dm(ADA, "send me the chart and the report");
    let dm = FakeSlack::dm_channel(ADA);
    let sent = slack.wait_files(&dm, 2);
    assert_eq!((sent[0].0["name"].as_str(), sent[0].0["title"].as_str()), (Some("chart.png"), Some("chart.png")));
    assert_eq!(sent[0].0["initial_comment"], "Here is the *chart*.");
    assert_eq!(sent[0].1, png);
    assert_eq!((sent[1].0["name"].as_str(), sent[1].0["initial_comment"].as_str()), (Some("report.pdf"), None));
    assert_eq!(sent[1].1, pdf);
    assert_eq!(slack.wait_texts(&dm, 1).last().unwrap(), "Both sent.");

    // In a channel's thread: shared in the thread.
    let root = slack.say(GENERAL, ADA, "a thread about the report", None);
    slack.say(GENERAL, ADA, &format!("<@{BOT_USER}> the report please"), Some(&root));
    mock.push(calls("anthropic", &[("f3", "message", json!({"file": "out/report.pdf", "text": "<!channel> here"}))]));
    mock.push(text("anthropic", "Shared."));
    let sent = slack.wait_files(GENERAL, 1);
    assert_eq!(sent[0].0["thread_ts"], root.as_str());
    assert_eq!(sent[0].0["initial_comment"], "&lt;!channel&gt; here", "the comment pings no one");
    assert_eq!(sent[0].1, pdf);
    assert_eq!(slack.wait_texts(GENERAL, 1), ["Shared."]);
    drop(gw);
}

#[test]
fn matrix_files_are_uploaded_to_the_homeserver_and_sent_as_images_and_files() {
    use crate::support::synapse::Synapse;
    let mock = MockModel::start();
    let synapse = Synapse::start();
    let bot = synapse.register("acp");
    let ada = synapse.register("ada");
    let home = tempfile::tempdir().unwrap();
    let config = format!(
        "[channels.matrix]\nhomeserver = \"{}\"\naccess_token = \"{}\"\nallow_from = [\"{}\"]\n",
        synapse.base, bot.token, ada.id
    );
    std::fs::write(home.path().join("config.toml"), config).unwrap();
    let gw = Gateway::start_in(home, &mock.base(), &[]);
    let (png, pdf) = files(&gw);
    let dm = ada.dm(&bot.id);
    ada.wait_joined(&dm, &bot.id);

    push_two_files(&mock);
    ada.say(&dm, "send me the chart and the report");
    ada.wait_texts(&dm, &bot.id, 3);
    let events = ada.events_from(&dm, &bot.id);
    let image = &events[0]["content"];
    assert_eq!(image["msgtype"], "m.image");
    assert_eq!(
        (image["body"].as_str(), image["filename"].as_str()),
        (Some("Here is the **chart**."), Some("chart.png"))
    );
    assert_eq!(image["formatted_body"], "Here is the <b>chart</b>.");
    assert_eq!(image["info"], json!({"mimetype": "image/png", "size": png.len()}));
    assert_eq!(ada.download(image["url"].as_str().unwrap()), png);
    let file = &events[1]["content"];
    assert_eq!(file["msgtype"], "m.file");
    assert_eq!((file["body"].as_str(), file["filename"].as_str()), (Some("report.pdf"), Some("report.pdf")));
    assert_eq!(ada.download(file["url"].as_str().unwrap()), pdf);
    assert_eq!(events[2]["content"]["body"], "Both sent.");
    drop(gw);
}
