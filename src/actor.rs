//! Who is running maar: the Unix user (from the uid, never from `$USER`), and the SSH
//! client's address when `SSH_CONNECTION` is set (recorded as reported by the client:
//! the environment is the caller's to set).

use maar_scheduler::Actor;

/// What the record says of an address the client reported.
pub const REPORTED: &str = "(reported by the client)";

/// The operator behind this process.
pub fn current() -> Actor {
    let uid = nix::unistd::getuid().as_raw();
    Actor {
        user: user_name(uid),
        uid: Some(uid),
        from: reported_address(
            ssh_client(std::env::var("SSH_CONNECTION").ok().as_deref()).as_deref(),
        ),
    }
}

/// The name of a uid in the system's user database; `uid<N>` when it has none (a
/// name taken from the environment could be anyone's, and so any role).
pub fn user_name(uid: u32) -> String {
    nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid))
        .ok()
        .flatten()
        .map(|u| u.name)
        .unwrap_or_else(|| format!("uid{uid}"))
}

/// The client address of an `SSH_CONNECTION` value (`client port server port`).
pub fn ssh_client(v: Option<&str>) -> Option<String> {
    let first = v?.split_whitespace().next()?;
    (!first.is_empty()).then(|| first.to_string())
}

/// An address a client reported, as the record keeps it: only an IP address, marked
/// as reported (anything else, escape sequences included, is dropped).
pub fn reported_address(v: Option<&str>) -> Option<String> {
    let ip: std::net::IpAddr = v?.trim().parse().ok()?;
    Some(format!("{ip} {REPORTED}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ssh_connection_gives_the_client_address() {
        assert_eq!(
            ssh_client(Some("203.0.113.7 52311 10.0.0.2 22")).as_deref(),
            Some("203.0.113.7")
        );
        assert_eq!(ssh_client(Some("")), None);
        assert_eq!(ssh_client(None), None);
        assert_eq!(
            reported_address(Some("203.0.113.7")).as_deref(),
            Some("203.0.113.7 (reported by the client)")
        );
        // Whatever else a client says is not kept.
        assert_eq!(reported_address(Some("\u{1b}[2J evil")), None);
        assert_eq!(reported_address(Some("host.example")), None);
    }

    #[test]
    fn the_user_comes_from_the_uid() {
        let a = current();
        assert_eq!(a.uid, Some(nix::unistd::getuid().as_raw()));
        assert!(!a.user.is_empty());
        // A uid with no passwd entry is named by its number, whatever $USER says.
        assert_eq!(user_name(4_000_000_123), "uid4000000123");
    }
}
