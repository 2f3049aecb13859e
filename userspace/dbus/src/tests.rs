//! The service on a private dbus-daemon, with a stand-in for polkit's
//! authority on the same bus (it records what it was asked and answers as
//! told). Switches come from a caller that is not root: `dbus-send`, run as
//! nobody (setpriv) when the tests run as root, as CI's do, else as the
//! user running them; the Rust client is the caller whose uid decides
//! root's way.

use super::*;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use xtask::private_bus::{am_root, PrivateBus};
use zbus::zvariant::OwnedValue;

/// A bus that lets this user own and call any name.
const OPEN_POLICY: &str = "<policy context=\"default\">\n<allow user=\"*\"/>\n\
    <allow own=\"*\"/>\n<allow send_destination=\"*\" eavesdrop=\"true\"/>\n\
    <allow eavesdrop=\"true\"/>\n</policy>";

/// The private bus as this crate's clients and server take it.
fn bus_of(bus: &PrivateBus) -> Bus {
    Bus::Address(bus.address().to_string())
}

fn open_bus() -> PrivateBus {
    PrivateBus::start("custom", OPEN_POLICY)
}

/// `Set(name)` from a caller that is not root: the answer, or what
/// dbus-send said.
fn set_as_unprivileged(bus: &PrivateBus, name: &str) -> Result<String, String> {
    bus.call_unprivileged(
        BUS_NAME,
        OBJECT_PATH,
        &format!("{INTERFACE}.Set"),
        &[&format!("string:{name}")],
    )
}

/// What the stand-in authority was asked: subject kind, the subject's
/// bus name, the action, the flags.
type Asked = Arc<Mutex<Vec<(String, String, String, u32)>>>;

struct Authority {
    allow: Arc<AtomicBool>,
    asked: Asked,
}

#[zbus::interface(name = "org.freedesktop.PolicyKit1.Authority")]
impl Authority {
    fn check_authorization(
        &self,
        subject: (String, HashMap<String, OwnedValue>),
        action_id: String,
        _details: HashMap<String, String>,
        flags: u32,
        _cancellation_id: String,
    ) -> (bool, bool, HashMap<String, String>) {
        let name = subject
            .1
            .get("name")
            .and_then(|v| String::try_from(v.clone()).ok())
            .unwrap_or_default();
        self.asked
            .lock()
            .unwrap()
            .push((subject.0, name, action_id, flags));
        (self.allow.load(Ordering::SeqCst), false, HashMap::new())
    }
}

fn polkit(bus: &PrivateBus, allow: bool) -> (zbus::blocking::Connection, Arc<AtomicBool>, Asked) {
    let allow = Arc::new(AtomicBool::new(allow));
    let asked: Asked = Arc::default();
    let conn = zbus::blocking::connection::Builder::address(bus.address())
        .unwrap()
        .name(POLKIT)
        .unwrap()
        .serve_at(
            POLKIT_PATH,
            Authority {
                allow: allow.clone(),
                asked: asked.clone(),
            },
        )
        .unwrap()
        .build()
        .unwrap();
    (conn, allow, asked)
}

/// The scheduler's side: records each request, answers as the switcher
/// would.
fn service(bus: &PrivateBus) -> (Served, Arc<Mutex<Vec<Request>>>) {
    let seen: Arc<Mutex<Vec<Request>>> = Arc::default();
    let log = seen.clone();
    let handler: Handler = Arc::new(move |req| {
        log.lock().unwrap().push(req.clone());
        match req {
            Request::Get => Ok("policy=sky1 generation=3\nslice_us = 5000".into()),
            Request::Set(name) if name == "broken" => Err("policy broken is not valid".into()),
            Request::Set(name) => Ok(format!("policy={name} generation=4")),
            Request::List => Err("List is answered by the service itself".into()),
        }
    });
    (serve(&bus_of(bus), handler).unwrap(), seen)
}

fn sets(seen: &Arc<Mutex<Vec<Request>>>) -> Vec<String> {
    seen.lock()
        .unwrap()
        .iter()
        .filter_map(|r| match r {
            Request::Set(n) => Some(n.clone()),
            _ => None,
        })
        .collect()
}

#[test]
fn anyone_may_read_the_policy_and_the_list() {
    let bus = open_bus();
    let (_served, _) = service(&bus);
    let client = Client::connect(&bus_of(&bus)).unwrap();
    let got = client.request(&Request::Get).unwrap();
    assert!(got.starts_with("policy=sky1 generation=3"), "{got}");
    let list = client.request(&Request::List).unwrap();
    let line = list.lines().find(|l| l.starts_with("vtime ")).unwrap();
    assert!(line.contains("baseline") && line.ends_with(')'), "{list}");
}

#[test]
fn polkit_decides_a_switch_and_is_asked_about_the_caller() {
    let bus = open_bus();
    let (_served, seen) = service(&bus);
    let (_authority, allow, asked) = polkit(&bus, true);

    assert_eq!(
        set_as_unprivileged(&bus, "vtime").unwrap(),
        "policy=vtime generation=4"
    );
    assert_eq!(sets(&seen), ["vtime"]);
    {
        let asked = asked.lock().unwrap();
        assert_eq!(asked.len(), 1, "{asked:?}");
        let (kind, caller, action, flags) = &asked[0];
        assert_eq!(kind, "system-bus-name");
        assert!(caller.starts_with(":1."), "{caller}");
        assert_eq!(action, ACTION_SET);
        assert_eq!(*flags, ALLOW_USER_INTERACTION);
    }
    // The scheduler's refusal comes back whole.
    let e = set_as_unprivileged(&bus, "broken").unwrap_err();
    assert!(e.contains("policy broken is not valid"), "{e}");

    allow.store(false, Ordering::SeqCst);
    let e = set_as_unprivileged(&bus, "sky1").unwrap_err();
    assert!(
        e.contains("polkit does not allow") && e.contains(ACTION_SET),
        "{e}"
    );
    assert_eq!(
        sets(&seen),
        ["vtime", "broken"],
        "a refused switch reached the scheduler"
    );
}

#[test]
fn without_polkit_only_root_may_switch() {
    let bus = open_bus();
    let (_served, seen) = service(&bus);
    let e = set_as_unprivileged(&bus, "vtime").unwrap_err();
    assert!(e.contains("without polkit only root may"), "{e}");
    assert!(sets(&seen).is_empty());
    // This process, through the Rust client: root switches without polkit
    // (none is there to ask); anyone else is refused alike.
    let client = Client::connect(&bus_of(&bus)).unwrap();
    match client.request(&Request::Set("vtime".into())) {
        Ok(answer) if am_root() => {
            assert_eq!(answer, "policy=vtime generation=4");
            assert_eq!(sets(&seen), ["vtime"]);
        }
        Err(e) if !am_root() => assert!(e.to_string().contains("only root may"), "{e}"),
        other => panic!("root={}: {other:?}", am_root()),
    }
}

#[test]
fn only_names_are_taken_and_checked_before_polkit_is_asked() {
    let bus = open_bus();
    let (_served, seen) = service(&bus);
    let (_authority, _, asked) = polkit(&bus, true);
    let client = Client::connect(&bus_of(&bus)).unwrap();
    let long = "a".repeat(MAX_NAME + 1);
    for bad in [
        "/home/me/evil.toml",
        "evil.toml",
        "../sky1",
        ".hidden",
        "two words",
        "",
        long.as_str(),
        "sky1\n",
    ] {
        let e = client
            .request(&Request::Set(bad.into()))
            .unwrap_err()
            .to_string();
        assert!(e.contains("InvalidArgs"), "{bad:?}: {e}");
    }
    assert!(asked.lock().unwrap().is_empty());
    assert!(sets(&seen).is_empty());
}

#[test]
fn a_client_with_no_service_is_told_so() {
    let bus = open_bus();
    let client = Client::connect(&bus_of(&bus)).unwrap();
    let e = client.request(&Request::Get).unwrap_err().to_string();
    assert!(e.contains("no scx_sky on the system bus"), "{e}");
}
