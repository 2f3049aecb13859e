use super::*;
use std::num::NonZeroU16;
use std::time::Instant;

fn sh(script: &str) -> Vec<String> {
    ["sh", "-c", script].iter().map(|s| s.to_string()).collect()
}

fn failure(script: &str) -> String {
    format!(
        "{:#}",
        parse_script(script).expect_err("bad script accepted")
    )
}

#[test]
fn tui_drive_parses_every_kind_of_step() {
    let steps = parse_script("wait:policy sky1;key:p;key:esc;key:enter;key: ;sleep:250;screen")
        .expect("good script");
    let spelt: Vec<String> = steps.iter().map(|s| s.to_string()).collect();
    assert_eq!(
        spelt.join(";"),
        "wait:policy sky1;key:p;key:esc;key:enter;key: ;sleep:250;screen"
    );
    assert_eq!(
        steps,
        vec![
            Step::Wait("policy sky1".into()),
            Step::Key(b"p".to_vec()),
            Step::Key(b"\x1b".to_vec()),
            Step::Key(b"\r".to_vec()),
            Step::Key(b" ".to_vec()),
            Step::Sleep(Duration::from_millis(250)),
            Step::Screen,
        ]
    );
}

#[test]
fn tui_drive_rejects_malformed_steps_naming_them() {
    for (script, named) in [
        ("frob:1", r#"step 1 "frob:1""#),
        ("wait:x;key:", r#"step 2 "key:""#),
        ("wait:", r#"step 1 "wait:""#),
        ("wait", r#"step 1 "wait""#),
        ("key:pq", r#"step 1 "key:pq""#),
        ("key:q;sleep:soon", r#"step 2 "sleep:soon""#),
        (
            "sleep:99999999999999999999",
            r#"step 1 "sleep:99999999999999999999""#,
        ),
        ("wait:a;;key:q", r#"step 2 """#),
        ("screen:all", r#"step 1 "screen:all""#),
        ("", r#"step 1 """#),
    ] {
        let err = failure(script);
        assert!(err.starts_with(named), "{script:?}: {err}");
    }
    assert!(failure("frob:1").contains("unknown step"));
    assert!(failure("key:").contains("key needs one character"));
    assert!(failure("wait:").contains("wait needs the text"));
}

#[test]
fn tui_drive_checks_the_script_before_starting_the_program() {
    // The program does not exist: had it been started first, the error
    // would be about starting it.
    let err = run(
        &["/nonexistent/tui".into()],
        80,
        24,
        "key:q;frob",
        EXIT_GRACE,
    )
    .expect_err("bad script accepted");
    let err = format!("{err:#}");
    assert!(err.contains(r#"step 2 "frob""#), "{err}");
    let err = Driver::spawn(&["/nonexistent/tui".into()], 80, 24)
        .err()
        .expect("a missing program started");
    assert!(format!("{err:#}").contains("starting"), "{err:#}");
}

#[test]
fn tui_drive_answers_cursor_position_requests() {
    let mut term = vt100::Parser::new_with_callbacks(
        NonZeroU16::new(24).expect("24"),
        NonZeroU16::new(80).expect("80"),
        0,
        pty::Replies::default(),
    );
    term.process(b"ab\x1b[6n");
    assert_eq!(term.callbacks().0, b"\x1b[1;3R");
    term.callbacks_mut().0.clear();
    term.process(b"\x1b[5;7H\x1b[6n\x1b[c\x1b[5n");
    assert_eq!(term.callbacks().0, b"\x1b[5;7R\x1b[?6c");
}

#[test]
fn tui_drive_drives_a_program_through_a_pty() {
    // A small full-screen program: the alternate screen and a hidden
    // cursor, its terminal's size and type, a line through /dev/tty (only
    // a controlling terminal has one), then two lines read from the keys.
    let program = sh(r#"printf '\033[?1049h\033[?25lhello\n'; stty size;
        printf 'term=%s\n' "$TERM"; echo ctty >/dev/tty; read k; printf 'got %s\n' "$k";
        read k; printf '\033[?25h\033[?1049l'; echo bye"#);
    let mut d = Driver::spawn(&program, 60, 20).expect("spawn");
    d.wait_for("hello", Duration::from_secs(20)).expect("hello");
    d.wait_for("ctty", Duration::from_secs(20)).expect("ctty");
    let rows = d.rows();
    assert_eq!(rows.len(), 20);
    assert_eq!(
        rows[..4],
        ["hello", "20 60", "term=xterm-256color", "ctty"],
        "{rows:?}"
    );
    assert!(
        !d.restored(),
        "the alternate screen and hidden cursor missed"
    );

    let steps = parse_script("key:x;key:enter;wait:got x;screen;key:enter").expect("script");
    let mut out = Vec::new();
    let (done, outcome) = run_steps(&mut d, &steps, Duration::from_secs(20), &mut out);
    outcome.expect("steps");
    assert_eq!(done, 5);
    let printed = String::from_utf8(out).expect("utf-8");
    let lines: Vec<&str> = printed.lines().collect();
    assert_eq!(lines.len(), 20, "{printed}");
    assert!(lines.iter().all(|l| l.starts_with("screen| ")), "{printed}");
    assert_eq!(lines[5], "screen| got x", "{printed}");

    d.finish(EXIT_GRACE).expect("finish");
    assert_eq!(d.exit_fields(), (true, "0".to_string()));
    assert!(d.restored(), "{:?}", d.rows());
    assert!(d.shows("bye") && !d.shows("hello"), "{:?}", d.rows());
}

#[test]
fn tui_drive_reply_reaches_the_program() {
    // The program asks for the cursor position and prints the answer with
    // ESC shown as `E`.
    let program = sh(r#"stty raw -echo; printf '\033[3;4H\033[6n';
        r=$(dd bs=1 count=6 2>/dev/null); stty sane; printf 'reply=%s\n' "$r" | tr '\033' E"#);
    let mut d = Driver::spawn(&program, 80, 24).expect("spawn");
    d.wait_for("reply=E[3;4R", Duration::from_secs(20))
        .unwrap_or_else(|e| panic!("{e:#}: {:?}", d.rows()));
}

#[test]
fn tui_drive_wait_for_missing_text_times_out_naming_the_step() {
    let mut d = Driver::spawn(&sh("echo hello; exec sleep 30"), 80, 24).expect("spawn");
    let steps = parse_script("wait:hello;wait:never there").expect("script");
    let start = Instant::now();
    let (done, outcome) = run_steps(&mut d, &steps, Duration::from_millis(500), &mut io::sink());
    let took = start.elapsed();
    assert_eq!(done, 1);
    let err = format!("{:#}", outcome.expect_err("a wait for missing text passed"));
    assert!(err.starts_with(r#"step 2 "wait:never there""#), "{err}");
    assert!(
        err.contains(r#""never there" did not appear within 500ms"#),
        "{err}"
    );
    assert!(took >= Duration::from_millis(500), "{took:?}");
    assert!(took < Duration::from_secs(5), "{took:?}");
    d.finish(Duration::ZERO).expect("finish");
    assert_eq!(d.exit_fields(), (false, "none".to_string()));
}

#[test]
fn tui_drive_notices_the_program_exiting() {
    let mut d = Driver::spawn(&sh("echo hi; exit 3"), 80, 24).expect("spawn");
    let start = Instant::now();
    let err = d
        .wait_for("never", Duration::from_secs(20))
        .expect_err("a wait for missing text passed");
    assert!(err.to_string().contains("closed its terminal"), "{err}");
    assert!(start.elapsed() < Duration::from_secs(10));
    assert!(d.shows("hi"));
    let err = d.send(b"q").expect_err("a key went to an exited program");
    assert!(err.to_string().contains("exited"), "{err}");
    d.finish(EXIT_GRACE).expect("finish");
    assert_eq!(d.exit_fields(), (true, "3".to_string()));
    assert!(d.restored());
}
