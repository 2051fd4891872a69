//! Who is running maar: the Unix user (from the uid, not only `$USER`), and the SSH
//! client's address when `SSH_CONNECTION` is set.

use maar_scheduler::Actor;

/// The operator behind this process.
pub fn current() -> Actor {
    let uid = nix::unistd::getuid();
    let user = nix::unistd::User::from_uid(uid)
        .ok()
        .flatten()
        .map(|u| u.name)
        .or_else(|| std::env::var("USER").ok().filter(|u| !u.is_empty()))
        .unwrap_or_else(|| format!("uid{}", uid.as_raw()));
    Actor {
        user,
        uid: Some(uid.as_raw()),
        from: ssh_client(std::env::var("SSH_CONNECTION").ok().as_deref()),
    }
}

/// The client address of an `SSH_CONNECTION` value (`client port server port`).
pub fn ssh_client(v: Option<&str>) -> Option<String> {
    let first = v?.split_whitespace().next()?;
    (!first.is_empty()).then(|| first.to_string())
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
    }

    #[test]
    fn the_user_comes_from_the_uid() {
        let a = current();
        assert_eq!(a.uid, Some(nix::unistd::getuid().as_raw()));
        assert!(!a.user.is_empty());
    }
}
