//! The running scheduler's policy on the system bus, for desktops and
//! tools that are not root: `org.scx.Sky` at `/org/scx/Sky`, interface
//! `org.scx.Sky.Policy`:
//!
//! - `Get() -> s`: the running policy, its generation and every knob (the
//!   text `scx_sky policy get` prints);
//! - `List() -> a(sss)`: every policy a name finds, in lookup order:
//!   (name, description or "unusable: why", where it is);
//! - `Set(s name) -> s`: switch, live, to the policy of that name
//!   (presets and root's files in /etc/scx_sky/policies/; never a path:
//!   that would let a caller make root read a file of theirs). Allowed to
//!   root, and to whom polkit allows the action `org.scx.sky.set-policy`
//!   (dist/org.scx.sky.policy: active local sessions; others as an
//!   administrator). Without polkit, root only.
//!
//! Every answer comes from the same handler as the control socket's
//! (`sky_control::Request`), so the two cannot disagree. The service is
//! served by zbus on its own thread; it reads nothing from a caller but
//! a name, checked here before anything else sees it.

use anyhow::{Context, Result};
use sky_control::Request;
use std::collections::HashMap;
use std::sync::Arc;
use zbus::fdo;
use zbus::message::Header;
use zbus::zvariant::Value;

pub const BUS_NAME: &str = "org.scx.Sky";
pub const OBJECT_PATH: &str = "/org/scx/Sky";
pub const INTERFACE: &str = "org.scx.Sky.Policy";
/// The polkit action a switch needs (dist/org.scx.sky.policy).
pub const ACTION_SET: &str = "org.scx.sky.set-policy";
/// Longest policy name taken over the bus (a policy's `name` is 1-64
/// characters).
const MAX_NAME: usize = 64;

const POLKIT: &str = "org.freedesktop.PolicyKit1";
const POLKIT_PATH: &str = "/org/freedesktop/PolicyKit1/Authority";
const POLKIT_INTERFACE: &str = "org.freedesktop.PolicyKit1.Authority";
/// CheckAuthorization's flag: the caller's agent may ask for a password.
const ALLOW_USER_INTERACTION: u32 = 1;

/// What answers a request: the running scheduler's switcher.
pub type Handler = Arc<dyn Fn(Request) -> Result<String, String> + Send + Sync>;

/// Which bus: the system bus (`DBUS_SYSTEM_BUS_ADDRESS` if set), or an
/// address (tests: a private dbus-daemon).
#[derive(Debug, Clone)]
pub enum Bus {
    System,
    Address(String),
}

impl Bus {
    fn builder(&self) -> zbus::Result<zbus::blocking::connection::Builder<'static>> {
        match self {
            Bus::System => zbus::blocking::connection::Builder::system(),
            Bus::Address(a) => zbus::blocking::connection::Builder::address(a.as_str()),
        }
    }
}

struct PolicyService {
    handler: Handler,
}

#[zbus::interface(name = "org.scx.Sky.Policy")]
impl PolicyService {
    /// The running policy, its generation and every knob.
    fn get(&self) -> fdo::Result<String> {
        (self.handler)(Request::Get).map_err(fdo::Error::Failed)
    }

    /// Every policy a name finds: (name, description, where).
    fn list(&self) -> Vec<(String, String, String)> {
        sky_policy::lookup::entries(&sky_policy::lookup::policy_dirs())
            .into_iter()
            .map(|e| {
                let description = e
                    .description
                    .unwrap_or_else(|why| format!("{}{why}", sky_policy::lookup::UNUSABLE));
                (e.name, description, e.origin.to_string())
            })
            .collect()
    }

    /// Switches to the policy called `name`; answers `policy=NAME
    /// generation=N`.
    async fn set(
        &self,
        name: String,
        #[zbus(header)] header: Header<'_>,
        #[zbus(connection)] connection: &zbus::Connection,
    ) -> fdo::Result<String> {
        check_name(&name).map_err(fdo::Error::InvalidArgs)?;
        let sender = header
            .sender()
            .ok_or_else(|| fdo::Error::AccessDenied("a call with no sender".into()))?
            .to_string();
        authorize(connection, &sender).await?;
        let answer = (self.handler)(Request::Set(name.clone())).map_err(fdo::Error::Failed)?;
        log::info!("D-Bus: {sender} switched to {name}: {answer}");
        Ok(answer)
    }

    /// scx_sky's version.
    #[zbus(property)]
    fn version(&self) -> String {
        env!("CARGO_PKG_VERSION").to_string()
    }
}

/// A name, not a path, of a policy's name's shape.
fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > MAX_NAME {
        return Err(format!(
            "a policy name is 1 to {MAX_NAME} characters, got {}",
            name.len()
        ));
    }
    if sky_policy::names_a_file(name)
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
        || name.starts_with('.')
    {
        return Err(format!(
            "{:?} is not a policy name (A-Z a-z 0-9 . _ -; no paths over D-Bus: put the \
             file in /etc/scx_sky/policies/ and give its name)",
            name.escape_debug().to_string()
        ));
    }
    Ok(())
}

/// Allows root; anyone else only if polkit says so for [`ACTION_SET`].
async fn authorize(connection: &zbus::Connection, sender: &str) -> fdo::Result<()> {
    let bus = fdo::DBusProxy::new(connection).await?;
    let uid = bus
        .get_connection_unix_user(sender.try_into().map_err(zbus::Error::from)?)
        .await?;
    if uid == 0 {
        return Ok(());
    }
    let subject: (&str, HashMap<&str, Value<'_>>) = (
        "system-bus-name",
        HashMap::from([("name", Value::from(sender))]),
    );
    let details: HashMap<&str, &str> = HashMap::new();
    let reply = connection
        .call_method(
            Some(POLKIT),
            POLKIT_PATH,
            Some(POLKIT_INTERFACE),
            "CheckAuthorization",
            &(subject, ACTION_SET, details, ALLOW_USER_INTERACTION, ""),
        )
        .await
        .map_err(|e| {
            fdo::Error::AccessDenied(format!(
                "uid {uid} may not switch scx_sky's policy: polkit did not answer ({e}); \
                 without polkit only root may"
            ))
        })?;
    let (authorized, _challenge, _details): (bool, bool, HashMap<String, String>) =
        reply.body().deserialize()?;
    if !authorized {
        return Err(fdo::Error::AccessDenied(format!(
            "polkit does not allow uid {uid} to switch scx_sky's policy ({ACTION_SET})"
        )));
    }
    Ok(())
}

/// The service, while held.
pub struct Served {
    _connection: zbus::blocking::Connection,
}

/// Serves [`INTERFACE`] as [`BUS_NAME`] on `bus` until dropped.
pub fn serve(bus: &Bus, handler: Handler) -> Result<Served> {
    let connection = bus
        .builder()
        .and_then(|b| b.name(BUS_NAME))
        .and_then(|b| b.serve_at(OBJECT_PATH, PolicyService { handler }))
        .and_then(|b| b.build())
        .with_context(|| format!("serving {BUS_NAME} on the {bus:?} bus"))?;
    Ok(Served {
        _connection: connection,
    })
}

/// A client of the service: `scx_sky policy` when not root.
pub struct Client {
    proxy: zbus::blocking::Proxy<'static>,
}

impl Client {
    pub fn connect(bus: &Bus) -> Result<Client> {
        let connection = bus.builder().and_then(|b| b.build()).map_err(|e| {
            anyhow::anyhow!(
                "cannot reach the {bus:?} bus ({e}), where scx_sky serves users who are not \
                 root: without it only root may control scx_sky (sudo scx_sky policy ...)"
            )
        })?;
        let proxy = zbus::blocking::Proxy::new(&connection, BUS_NAME, OBJECT_PATH, INTERFACE)?;
        Ok(Client { proxy })
    }

    /// The request's answer, as the control socket gives it.
    pub fn request(&self, req: &Request) -> Result<String> {
        let answer = match req {
            Request::Get => self.proxy.call::<_, _, String>("Get", &()),
            Request::Set(name) => self.proxy.call::<_, _, String>("Set", &(name.as_str(),)),
            Request::List => self
                .proxy
                .call::<_, _, Vec<(String, String, String)>>("List", &())
                .map(|rows| {
                    rows.iter()
                        .map(|(name, description, origin)| {
                            let said = match description.strip_prefix(sky_policy::lookup::UNUSABLE)
                            {
                                Some(why) => Err(why),
                                None => Ok(description.as_str()),
                            };
                            sky_policy::lookup::line(name, said, origin)
                        })
                        .collect::<Vec<_>>()
                        .join("\n")
                }),
        };
        answer.map_err(|e| match e {
            zbus::Error::MethodError(name, _, _)
                if name.as_str() == "org.freedesktop.DBus.Error.ServiceUnknown" =>
            {
                anyhow::anyhow!("no scx_sky on the system bus ({BUS_NAME}): is it running?")
            }
            zbus::Error::MethodError(name, text, _) => anyhow::anyhow!(
                "scx_sky refused ({}): {}",
                name.as_str(),
                text.unwrap_or_default()
            ),
            other => anyhow::anyhow!("asking scx_sky over D-Bus: {other}"),
        })
    }
}

#[cfg(test)]
mod tests;
