use super::*;
use std::sync::Arc;

#[test]
fn requests_parse_and_bad_ones_say_why() {
    assert_eq!(
        Request::parse("set sky1\n"),
        Ok(Request::Set("sky1".into()))
    );
    assert_eq!(
        Request::parse("set /etc/my policy.toml"),
        Ok(Request::Set("/etc/my policy.toml".into()))
    );
    assert_eq!(Request::parse("get"), Ok(Request::Get));
    assert_eq!(Request::parse("list\r\n"), Ok(Request::List));
    assert!(Request::parse("set").unwrap_err().contains("set NAME|FILE"));
    assert!(Request::parse("get x").unwrap_err().contains("no argument"));
    let e = Request::parse(&"x".repeat(500)).unwrap_err();
    assert!(e.contains("unknown request") && e.len() < 120, "{e}");
    for r in [Request::Set("vtime".into()), Request::Get, Request::List] {
        assert_eq!(Request::parse(&r.line()), Ok(r));
    }
}

/// A server on a temporary directory answering with `handle`, stopped and
/// joined when the returned guard drops.
struct Running {
    dir: tempfile::TempDir,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            t.join().unwrap();
        }
    }
}

fn serve() -> Running {
    serve_with(SESSION_LIMIT)
}

fn serve_with(session_limit: Duration) -> Running {
    let dir = tempfile::tempdir().unwrap();
    let sock_dir = dir.path().join("ctl");
    let server = Server::bind(&sock_dir)
        .unwrap()
        .with_session_limit(session_limit);
    let stop = Arc::new(AtomicBool::new(false));
    let stop2 = stop.clone();
    let thread = std::thread::spawn(move || {
        let generation = std::sync::atomic::AtomicU64::new(0);
        server.serve(&stop2, move |req| match req {
            Request::Set(name) if name == "bad" => Err("policy bad: no such preset".into()),
            Request::Set(name) => {
                let g = generation.fetch_add(1, Ordering::SeqCst) + 1;
                Ok(format!("policy={name} generation={g}"))
            }
            Request::Get => Ok(format!(
                "policy=x generation={}\n\nknob = 1",
                generation.load(Ordering::SeqCst)
            )),
            Request::List => Ok(String::new()),
        })
    });
    Running {
        dir,
        stop,
        thread: Some(thread),
    }
}

#[test]
fn a_client_switches_and_errors_come_back_named() {
    let s = serve();
    let dir = s.dir.path().join("ctl");
    let mode = std::fs::metadata(socket_path(&dir)).unwrap().mode() & 0o777;
    assert_eq!(mode, 0o600);
    assert_eq!(std::fs::metadata(&dir).unwrap().mode() & 0o777, 0o700);
    assert_eq!(
        request(&dir, &Request::Set("vtime".into())).unwrap(),
        "policy=vtime generation=1"
    );
    // An answer of several lines comes whole (its own empty lines dropped:
    // an empty line ends an answer).
    assert_eq!(
        request(&dir, &Request::Get).unwrap(),
        "policy=x generation=1\nknob = 1"
    );
    assert_eq!(request(&dir, &Request::List).unwrap(), "");
    let e = request(&dir, &Request::Set("bad".into()))
        .unwrap_err()
        .to_string();
    assert!(e.contains("refused: policy bad: no such preset"), "{e}");
}

fn raw(dir: &Path, bytes: &[u8], half_close: bool) -> String {
    let mut s = UnixStream::connect(socket_path(dir)).unwrap();
    s.write_all(bytes).unwrap();
    if half_close {
        s.shutdown(std::net::Shutdown::Write).unwrap();
    }
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out
}

#[test]
fn garbage_oversized_silent_and_half_closed_clients_are_refused() {
    let s = serve();
    let dir = s.dir.path().join("ctl");
    assert!(raw(&dir, b"\xff\xfe\n", false).contains("not UTF-8"));
    assert!(raw(&dir, &vec![b'a'; MAX_REQUEST + 10], false).contains("longer than 4096"));
    assert!(raw(&dir, b"set vtime", true).starts_with("ok policy=vtime"));
    // A client that connects and hangs up is no error.
    assert_eq!(raw(&dir, b"", true), "");
    // A client that sends nothing and waits is cut off after IO_TIMEOUT.
    let started = std::time::Instant::now();
    assert!(raw(&dir, b"get", false).contains("no complete request"));
    assert!(started.elapsed() < IO_TIMEOUT * 3);
    // And the server still answers the next one.
    assert!(request(&dir, &Request::Get).is_ok());
}

#[test]
fn no_server_and_a_squatted_directory_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let e = request(dir.path(), &Request::Get).unwrap_err().to_string();
    assert!(e.contains("no scx_sky is running"), "{e}");
    let open = dir.path().join("open");
    std::fs::create_dir(&open).unwrap();
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
    let e = Server::bind(&open).err().unwrap().to_string();
    assert!(e.contains("no access for others"), "{e}");
    let link = dir.path().join("link");
    std::os::unix::fs::symlink(dir.path(), &link).unwrap();
    let e = Server::bind(&link).err().unwrap().to_string();
    assert!(e.contains("something else"), "{e}");
}

#[test]
fn one_connection_carries_many_requests_even_sent_at_once() {
    let s = serve();
    let dir = s.dir.path().join("ctl");
    let mut session = Session::connect(&dir).unwrap();
    for i in 1..=200 {
        let answer = session.ask(&Request::Set(format!("p{i}"))).unwrap();
        assert_eq!(answer, format!("policy=p{i} generation={i}"));
    }
    // Pipelined: many sent before any answer is read.
    for i in 201..=260 {
        session.send(&Request::Set(format!("q{i}"))).unwrap();
    }
    for i in 201..=260 {
        assert_eq!(
            session.receive().unwrap(),
            format!("policy=q{i} generation={i}")
        );
    }
    // Several requests in one write get one answer each, in order.
    let answers = raw(&dir, b"set a\nget\nfrob\nset b\n", true);
    assert_eq!(
        answers,
        "ok policy=a generation=261\n\nok policy=x generation=261\nknob = 1\n\n\
         error: unknown request \"frob\": use set NAME|FILE, get or list\n\n\
         ok policy=b generation=262\n\n"
    );
}

#[test]
fn a_refusal_sent_before_the_request_was_read_is_the_error_given() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("ctl")).unwrap();
    let dir = dir.path().join("ctl");
    let listener = std::os::unix::net::UnixListener::bind(socket_path(&dir)).unwrap();
    let mut session = Session::connect(&dir).unwrap();
    // The server turns the client away and hangs up without reading.
    let (mut server_side, _) = listener.accept().unwrap();
    server_side
        .write_all(format!("error: {MAX_CLIENTS} clients are connected; try again\n\n").as_bytes())
        .unwrap();
    drop(server_side);
    // A request larger than the socket's buffer cannot be taken in whole.
    let big = Request::Set("p".repeat(1 << 20));
    let e = session.send(&big).unwrap_err().to_string();
    assert_eq!(
        e,
        format!("scx_sky refused: {MAX_CLIENTS} clients are connected; try again")
    );
}

#[test]
fn a_quiet_session_is_closed_and_a_crowd_is_turned_away() {
    let s = serve();
    let dir = s.dir.path().join("ctl");
    // Quiet after an answer: closed without a word.
    let mut c = UnixStream::connect(socket_path(&dir)).unwrap();
    c.write_all(b"get\n").unwrap();
    let started = std::time::Instant::now();
    let mut out = String::new();
    c.read_to_string(&mut out).unwrap();
    assert_eq!(out, "ok policy=x generation=0\nknob = 1\n\n");
    assert!(started.elapsed() < IO_TIMEOUT * 3);
    // MAX_CLIENTS silent clients hold every place; the next is told so at
    // once, and answered again when they are cut off.
    let crowd: Vec<UnixStream> = (0..MAX_CLIENTS)
        .map(|_| UnixStream::connect(socket_path(&dir)).unwrap())
        .collect();
    // Refused once the server has taken them all in (on a loaded machine
    // that may take a while; until then a request is answered).
    let deadline = std::time::Instant::now() + IO_TIMEOUT / 2;
    let e = loop {
        match request(&dir, &Request::Get) {
            Err(e) => break e.to_string(),
            Ok(_) if std::time::Instant::now() > deadline => panic!("the crowd was not refused"),
            Ok(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    };
    assert!(e.contains("clients are connected; try again"), "{e}");
    drop(crowd);
    let deadline = std::time::Instant::now() + IO_TIMEOUT * 5;
    loop {
        match request(&dir, &Request::Get) {
            Ok(_) => break,
            Err(e) if std::time::Instant::now() > deadline => panic!("still refused: {e}"),
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    }
}

#[test]
fn a_trickling_client_is_cut_off_at_the_session_limit() {
    let s = serve_with(Duration::from_secs(2));
    let mut c = UnixStream::connect(socket_path(&s.dir.path().join("ctl"))).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    let started = std::time::Instant::now();
    let mut got = Vec::new();
    let mut chunk = [0u8; 512];
    // A request every 0.5 s: never quiet for IO_TIMEOUT, so only the
    // session limit ends it.
    while started.elapsed() < Duration::from_secs(8) {
        if c.write_all(b"get\n").is_err() {
            break;
        }
        match c.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => got.extend_from_slice(&chunk[..n]),
            Err(_) => break,
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    let text = String::from_utf8_lossy(&got);
    assert!(
        text.contains("error: session longer than 2000 ms: connect again"),
        "{text}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn a_socket_that_answers_is_not_taken_over_and_a_server_removes_what_it_made() {
    let dir = tempfile::tempdir().unwrap();
    let sock_dir = dir.path().join("run/ctl");
    let first = Server::bind(&sock_dir).unwrap();
    let e = Server::bind(&sock_dir)
        .err()
        .expect("a second server took the socket over");
    assert!(
        format!("{e:#}").contains("another scx_sky answers on"),
        "{e:#}"
    );
    assert!(
        socket_path(&sock_dir).exists(),
        "the first server's socket went"
    );
    drop(first);
    assert!(
        !socket_path(&sock_dir).exists(),
        "the socket outlived its server"
    );
    assert!(
        !sock_dir.exists(),
        "the directory the server made outlived it"
    );
    // A stale socket (nothing listening) is replaced.
    let stale = std::os::unix::net::UnixListener::bind(dir.path().join("stale.sock")).unwrap();
    drop(stale);
    std::fs::create_dir(&sock_dir).unwrap();
    std::fs::set_permissions(&sock_dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    std::fs::rename(dir.path().join("stale.sock"), socket_path(&sock_dir)).unwrap();
    let again = Server::bind(&sock_dir).unwrap();
    drop(again);
    assert!(
        sock_dir.exists(),
        "a directory the server did not make was removed"
    );
}

/// The kernel's word on who connected decides, not the socket's mode:
/// with the modes opened up, another user's client is still refused.
#[test]
fn a_client_of_another_user_is_refused_by_its_credentials() {
    let (a, b) = UnixStream::pair().unwrap();
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    assert_eq!(peer_uid(&a).unwrap(), me);
    assert_eq!(refusal(&b), None, "our own user was refused");
    if me != 0 {
        // Becoming another user needs root; the check above is what a
        // non-root run can prove.
        return;
    }
    let s = serve();
    let sock_dir = s.dir.path().join("ctl");
    for (path, mode) in [(s.dir.path(), 0o755), (&sock_dir, 0o755)] {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    }
    let sock = socket_path(&sock_dir);
    std::fs::set_permissions(&sock, std::fs::Permissions::from_mode(0o777)).unwrap();
    let addr = std::ffi::CString::new(sock.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: the child only makes system calls (no allocation, no locks)
    // and leaves with _exit.
    let child = unsafe { libc::fork() };
    if child == 0 {
        unsafe { libc::_exit(as_nobody_asks(&addr)) };
    }
    let mut status = 0;
    // SAFETY: waits for the child forked above.
    unsafe { libc::waitpid(child, &mut status, 0) };
    assert!(libc::WIFEXITED(status), "the client died: {status}");
    assert_eq!(
        libc::WEXITSTATUS(status),
        0,
        "uid 65534's request was not refused (1: answered, 2: no connection)"
    );
}

/// In a forked child: becomes uid 65534, asks `get` on the socket at
/// `addr`; 0 if refused by credentials, 1 if answered, 2 if it could not ask.
unsafe fn as_nobody_asks(addr: &std::ffi::CStr) -> i32 {
    if libc::setgid(65534) != 0 || libc::setuid(65534) != 0 {
        return 2;
    }
    let fd = libc::socket(libc::AF_UNIX, libc::SOCK_STREAM, 0);
    let mut sa: libc::sockaddr_un = std::mem::zeroed();
    sa.sun_family = libc::AF_UNIX as libc::sa_family_t;
    for (i, &b) in addr
        .to_bytes()
        .iter()
        .enumerate()
        .take(sa.sun_path.len() - 1)
    {
        sa.sun_path[i] = b as libc::c_char;
    }
    let len = std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t;
    if fd < 0 || libc::connect(fd, &sa as *const _ as *const libc::sockaddr, len) != 0 {
        return 2;
    }
    libc::write(fd, b"get\n".as_ptr().cast(), 4);
    let mut buf = [0u8; 256];
    let n = libc::read(fd, buf.as_mut_ptr().cast(), buf.len());
    let want = b"error: uid 65534 may not control scx_sky";
    i32::from(!(n as usize >= want.len() && &buf[..want.len()] == want))
}
