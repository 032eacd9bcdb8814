//! Whose socket listens on a launched server's port: ours, someone else's,
//! or not to be seen.
//!
//! A port picked free can be taken before the engine binds it (another
//! `--parallel` group's engine, any local server). The engine then fails to
//! bind and exits, but the other server's health answer can come first;
//! measuring it would store its numbers as ours. So a health answer counts
//! only when the listening socket on the port is held by a process of the
//! launch: one carrying the launch's marker (local launches under the
//! supervisor, whose whole tree carries it), the launched process group
//! (SSH, and local launches without the supervisor) or the systemd unit's
//! control group.
//!
//! The rule is one POSIX `sh` script over `/proc` (the listening socket's
//! inode from `/proc/net/tcp{,6}`, its holders from `/proc/PID/fd`), run
//! here or on the server's host over SSH, so every launcher shares it.

use crate::util::shell::shell_words;

/// Who holds the listening socket on the server's port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Holder {
    /// A process of the launch.
    Ours,
    /// Only processes outside the launch (pid and name of each).
    Foreign(String),
    /// Cannot be told: no `/proc`, no listener in this network namespace,
    /// or holders whose descriptors cannot be read (another user's, such as
    /// a container runtime's port proxy). The health answer is taken.
    Unseen,
}

/// The processes that make up one launch.
#[derive(Debug, Clone)]
pub enum Launch {
    /// A process group or session (its leader's pid).
    Group(i32),
    /// The processes whose environment carries this `VAR=value` (a local
    /// launch's supervisor marks every process of its tree so).
    Marker(String),
    /// A systemd unit's control group.
    Unit(String),
}

/// Lists the holders of the listening sockets on `$port` and prints
/// `ours`, `foreign PID(NAME) …` or `unseen`. Arguments: `group PGID PORT`,
/// `marker VAR=VALUE PORT` or `unit NAME PORT`.
const SCRIPT: &str = r#"mode=$1 who=$2 port=$3
[ -r /proc/net/tcp ] || { echo unseen; exit 0; }
inodes=$(awk -v p=":$(printf '%04X' "$port")" '$4 == "0A" && substr($2, length($2) - 4) == p { print $10 }' /proc/net/tcp /proc/net/tcp6 2>/dev/null)
[ -n "$inodes" ] || { echo unseen; exit 0; }
pids=$(ls -l /proc/[0-9]*/fd 2>/dev/null | awk -v want=" $(echo $inodes) " '
  /^\/proc\/[0-9]+\/fd:$/ { split($0, p, "/"); pid = p[3]; next }
  /-> socket:\[/ { i = $NF; gsub(/[^0-9]/, "", i); if (index(want, " " i " ")) print pid }' | sort -u)
foreign=
for pid in $pids; do
  case $mode in
  group)
    stat=$(cat "/proc/$pid/stat" 2>/dev/null) || continue
    set -- ${stat##*) }
    if [ "$3" = "$who" ] || [ "$4" = "$who" ]; then echo ours; exit 0; fi ;;
  marker)
    if tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qxF "$who"; then echo ours; exit 0; fi ;;
  unit)
    if grep -qF "/$who" "/proc/$pid/cgroup" 2>/dev/null; then echo ours; exit 0; fi ;;
  esac
  foreign="$foreign $pid($(cat "/proc/$pid/comm" 2>/dev/null))"
done
if [ -n "$foreign" ]; then echo "foreign$foreign"; else echo unseen; fi
"#;

/// The shell text that checks `launch`'s hold on `port` (for `sh -c`, here
/// or over SSH).
pub fn script(launch: &Launch, port: u16) -> String {
    let (mode, who) = match launch {
        Launch::Group(pgid) => ("group", pgid.to_string()),
        Launch::Marker(var) => ("marker", var.clone()),
        Launch::Unit(unit) => ("unit", unit.clone()),
    };
    format!(
        "set -- {}\n{SCRIPT}",
        shell_words(&[mode.to_string(), who, port.to_string()])
    )
}

/// The command that runs the check on this host.
pub fn local_argv(launch: &Launch, port: u16) -> Vec<String> {
    vec!["sh".into(), "-c".into(), script(launch, port)]
}

/// Runs the check `argv` built (here or over SSH); a check that cannot run
/// tells nothing, so its answer is [`Holder::Unseen`].
pub async fn holder(argv: &[String]) -> Holder {
    match crate::util::proc::output_of_async(argv).await {
        Ok(out) => parse(&out),
        Err(_) => Holder::Unseen,
    }
}

/// The script's answer.
fn parse(out: &str) -> Holder {
    let line = out.lines().last().unwrap_or("").trim();
    match line.strip_prefix("foreign") {
        Some(who) if !who.trim().is_empty() => Holder::Foreign(who.trim().to_string()),
        _ if line == "ours" => Holder::Ours,
        _ => Holder::Unseen,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This process's group id.
    fn own_group() -> i32 {
        // SAFETY: getpgrp takes no arguments and cannot fail.
        unsafe { libc::getpgrp() }
    }

    #[tokio::test]
    async fn a_socket_we_hold_is_ours_and_one_held_elsewhere_is_foreign() {
        let ours = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = ours.local_addr().unwrap().port();
        assert_eq!(
            holder(&local_argv(&Launch::Group(own_group()), port)).await,
            Holder::Ours
        );
        // Another group's view of the same socket: held by someone else.
        match holder(&local_argv(&Launch::Group(i32::MAX), port)).await {
            Holder::Foreign(who) => {
                assert!(who.contains(&format!("{}(", std::process::id())), "{who}")
            }
            other => panic!("{other:?}"),
        }
        // Nor a marker no process carries, nor a unit no process is in.
        assert!(matches!(
            holder(&local_argv(
                &Launch::Marker("NO_SUCH_MARKER=1".into()),
                port
            ))
            .await,
            Holder::Foreign(_)
        ));
        assert!(matches!(
            holder(&local_argv(&Launch::Unit("no-such.service".into()), port)).await,
            Holder::Foreign(_)
        ));
        drop(ours);
        // Nothing listens: nothing to tell.
        assert_eq!(
            holder(&local_argv(&Launch::Group(own_group()), port)).await,
            Holder::Unseen
        );
    }

    #[test]
    fn answers_are_read_from_the_last_line() {
        assert_eq!(parse("ours\n"), Holder::Ours);
        assert_eq!(
            parse("noise\nforeign 12(python3) 13(x)\n"),
            Holder::Foreign("12(python3) 13(x)".into())
        );
        assert_eq!(parse("foreign\n"), Holder::Unseen);
        assert_eq!(parse(""), Holder::Unseen);
    }
}
