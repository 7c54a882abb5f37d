//! Which processes serve and use a JACK2 server, read from procfs (a root path, so tests use
//! fixture trees); runs on watch's control thread.
//!
//! JACK2 has no public way to learn a client's pid (`jack_get_client_pid` is server-side only)
//! and names none of its threads, so this reads what JACK2 leaves in the kernel's tables:
//! - the server listens on a Unix socket at `/dev/shm/jack_SERVER_UID_0`: the process holding
//!   that listening socket (`/proc/net/unix` gives its inode, `/proc/PID/fd` who holds it) is the
//!   server;
//! - every client maps one futex file per client of the graph, `/dev/shm/jack_sem.UID_SERVER_NAME`:
//!   a process that maps them is a client of that server. Each maps every client's file (it
//!   signals them in graph order), so the files say which processes are clients, not which
//!   client each one is: [`match_clients`] pairs names with processes and says how sure it is.

use std::collections::BTreeMap;
use std::path::Path;

/// A process that serves or uses the JACK server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JackProcess {
    /// Process id.
    pub pid: i32,
    /// Its `comm`.
    pub comm: String,
    /// Its command line, arguments joined by spaces.
    pub cmdline: String,
    /// Start time in clock ticks after boot (`/proc/PID/stat` field 22): registration order.
    pub start_ticks: u64,
}

/// How a client name was paired with a process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClientMatch {
    /// The process's comm or command line names the client.
    ByName,
    /// Unnamed clients and processes paired in registration order (process start time against
    /// the order the server created the clients' futex files in).
    ByOrder,
    /// The only client process left for the only client name left.
    LastOne,
}

fn read(path: &Path) -> Option<String> {
    std::fs::read_to_string(path).ok()
}

fn pids(proc_root: &Path) -> Vec<i32> {
    let Ok(dir) = std::fs::read_dir(proc_root) else {
        return Vec::new();
    };
    let mut pids: Vec<i32> = dir
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    pids.sort_unstable();
    pids
}

fn process(proc_root: &Path, pid: i32) -> Option<JackProcess> {
    let dir = proc_root.join(pid.to_string());
    let stat = read(&dir.join("stat"))?;
    // Fields after the last ')' start at field 3 (state); the start time is field 22.
    let after = &stat[stat.rfind(')')? + 1..];
    let start_ticks = after.split_whitespace().nth(19)?.parse().ok()?;
    Some(JackProcess {
        pid,
        comm: read(&dir.join("comm"))
            .unwrap_or_default()
            .trim_end()
            .to_owned(),
        cmdline: read(&dir.join("cmdline"))
            .unwrap_or_default()
            .split('\0')
            .filter(|a| !a.is_empty())
            .collect::<Vec<_>>()
            .join(" "),
        start_ticks,
    })
}

/// The inode of the listening socket of JACK server `server`, from `/proc/net/unix`.
fn listening_inode(proc_root: &Path, server: &str) -> Option<u64> {
    let table = read(&proc_root.join("net/unix"))?;
    let prefix = format!("jack_{server}_");
    table.lines().skip(1).find_map(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        // Num RefCount Protocol Flags Type St Inode Path; flag 0x10000 marks a listening socket.
        let flags = u32::from_str_radix(f.get(3)?, 16).ok()?;
        let name = f.get(7)?.rsplit('/').next()?;
        let rest = name.strip_prefix(&prefix)?;
        let is_server_socket = rest.ends_with("_0") && rest.split('_').count() == 2;
        (flags & 0x10000 != 0 && is_server_socket).then(|| f[6].parse().ok())?
    })
}

/// The process serving JACK server `server` (`default` when unnamed).
pub fn find_server(proc_root: &Path, server: &str) -> Option<JackProcess> {
    let inode = listening_inode(proc_root, server)?;
    let target = format!("socket:[{inode}]");
    pids(proc_root).into_iter().find_map(|pid| {
        let fds = std::fs::read_dir(proc_root.join(pid.to_string()).join("fd")).ok()?;
        let holds = fds
            .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
            .any(|link| link.to_str() == Some(target.as_str()));
        if holds {
            process(proc_root, pid)
        } else {
            None
        }
    })
}

/// The client names whose futex files `maps` shows for server `server`, in mapping order.
fn mapped_clients(maps: &str, server: &str) -> Vec<String> {
    let mut names: Vec<(u64, String)> = Vec::new();
    for line in maps.lines() {
        let Some(path) = line.split_whitespace().nth(5) else {
            continue;
        };
        let Some(file) = path.strip_prefix("/dev/shm/jack_sem.") else {
            continue;
        };
        // UID_SERVER_NAME: the uid is digits, the server name is known, the rest is the client.
        let Some((uid, rest)) = file.split_once('_') else {
            continue;
        };
        let Some(name) = rest.strip_prefix(server).and_then(|r| r.strip_prefix('_')) else {
            continue;
        };
        let start = line
            .split('-')
            .next()
            .and_then(|a| u64::from_str_radix(a, 16).ok());
        if let (true, Some(start)) = (uid.bytes().all(|b| b.is_ascii_digit()), start) {
            if !names.iter().any(|(_, n)| n == name) {
                names.push((start, name.to_owned()));
            }
        }
    }
    // mmap hands out addresses top-down: the first file mapped has the highest address.
    names.sort_by_key(|n| std::cmp::Reverse(n.0));
    names.into_iter().map(|(_, n)| n).collect()
}

/// The processes that map `server`'s futex files, except those in `except` (pass the server's
/// own pid, which maps them too, and the watching process), with the client names they map in mapping order.
pub fn client_processes(
    proc_root: &Path,
    server: &str,
    except: &[i32],
) -> Vec<(JackProcess, Vec<String>)> {
    pids(proc_root)
        .into_iter()
        .filter(|pid| !except.contains(pid))
        .filter_map(|pid| {
            let maps = read(&proc_root.join(pid.to_string()).join("maps"))?;
            let names = mapped_clients(&maps, server);
            if names.is_empty() {
                return None;
            }
            Some((process(proc_root, pid)?, names))
        })
        .collect()
}

fn names_client(p: &JackProcess, client: &str) -> bool {
    let client = client.to_lowercase();
    // comm is cut to 15 bytes; the command line has the whole program name and its arguments.
    let comm = p.comm.to_lowercase();
    let program = p
        .cmdline
        .split(' ')
        .next()
        .and_then(|a| a.rsplit('/').next())
        .unwrap_or("")
        .to_lowercase();
    comm == client
        || program == client
        || (client.len() >= 4 && program.contains(&client))
        || (comm.len() == 15 && client.starts_with(&comm))
        || p.cmdline.split(' ').skip(1).any(|a| a == client)
}

/// Pairs the graph's client names with client processes: first by name, then the rest in
/// registration order (the order of the clients' futex files against the processes' start
/// times), with how each pair was made. The server's own clients (`system`, `freewheel`) and
/// names with no process left are not in the result.
pub fn match_clients(
    clients: &[String],
    procs: &[(JackProcess, Vec<String>)],
) -> BTreeMap<String, (i32, ClientMatch)> {
    let mut out = BTreeMap::new();
    let internal = |n: &str| n == "system" || n == "freewheel";
    let mut free: Vec<&JackProcess> = procs.iter().map(|(p, _)| p).collect();
    let mut unnamed: Vec<&String> = Vec::new();
    for c in clients.iter().filter(|c| !internal(c)) {
        let hits: Vec<usize> = (0..free.len())
            .filter(|&i| names_client(free[i], c))
            .collect();
        if let [i] = hits[..] {
            out.insert(c.clone(), (free.remove(i).pid, ClientMatch::ByName));
        } else {
            unnamed.push(c);
        }
    }
    if unnamed.len() == 1 && free.len() == 1 {
        out.insert(unnamed[0].clone(), (free[0].pid, ClientMatch::LastOne));
        return out;
    }
    // Registration order: the longest futex list holds every client in the order created.
    let order: Vec<&String> = procs
        .iter()
        .map(|(_, names)| names)
        .max_by_key(|n| n.len())
        .map(|n| n.iter().filter(|n| !internal(n)).collect())
        .unwrap_or_default();
    let mut by_order: Vec<&String> = order.into_iter().filter(|n| unnamed.contains(n)).collect();
    free.sort_by_key(|p| (p.start_ticks, p.pid));
    if by_order.len() == unnamed.len() && by_order.len() == free.len() {
        for (name, p) in by_order.drain(..).zip(free) {
            out.insert(name.clone(), (p.pid, ClientMatch::ByOrder));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn proc(pid: i32, comm: &str, cmdline: &str, start: u64) -> JackProcess {
        JackProcess {
            pid,
            comm: comm.into(),
            cmdline: cmdline.into(),
            start_ticks: start,
        }
    }

    #[test]
    fn futex_files_are_read_in_mapping_order_for_the_named_server_only() {
        let maps = "\
7fa3e1801000-7fa3e1802000 rw-s 00000000 00:19 12 /dev/shm/jack_sem.0_probe_beta
7fa3e1802000-7fa3e1803000 rw-s 00000000 00:19 11 /dev/shm/jack_sem.0_probe_alpha
7fa3e1803000-7fa3e1804000 rw-s 00000000 00:19 13 /dev/shm/jack_sem.0_other_gamma
7fa3e1805000-7fa3e1806000 rw-s 00000000 00:19 10 /dev/shm/jack_sem.0_probe_freewheel
7fa3e1806000-7fa3e1807000 rw-s 00000000 00:19 9 /dev/shm/jack_sem.0_probe_system
55d0c0000000-55d0c0001000 r-xp 00000000 08:01 7 /usr/bin/thing
";
        assert_eq!(
            mapped_clients(maps, "probe"),
            ["system", "freewheel", "alpha", "beta"]
        );
        assert!(mapped_clients(maps, "nobody").is_empty());
    }

    #[test]
    fn clients_pair_by_name_first_then_by_registration_order() {
        let all: Vec<String> = ["system", "freewheel", "ardour", "x1", "x2"]
            .map(String::from)
            .to_vec();
        let procs = vec![
            (proc(30, "b", "/opt/b", 300), all.clone()),
            (
                proc(10, "ardour-8.1", "/usr/bin/ardour-8.1", 100),
                all.clone(),
            ),
            (proc(20, "a", "/opt/a", 200), all.clone()),
        ];
        let m = match_clients(&all, &procs);
        assert_eq!(m["ardour"], (10, ClientMatch::ByName));
        assert_eq!(
            m["x1"],
            (20, ClientMatch::ByOrder),
            "the earlier process is the earlier client"
        );
        assert_eq!(m["x2"], (30, ClientMatch::ByOrder));
        assert!(!m.contains_key("system"));
    }

    #[test]
    fn one_name_left_for_one_process_left_is_paired_and_says_so() {
        let all: Vec<String> = ["system", "synth"].map(String::from).to_vec();
        let procs = vec![(proc(7, "python3", "python3 /t/run.py", 5), all.clone())];
        assert_eq!(
            match_clients(&all, &procs)["synth"],
            (7, ClientMatch::LastOne)
        );
    }

    #[test]
    fn counts_that_disagree_leave_clients_unpaired_rather_than_guess() {
        let all: Vec<String> = ["system", "x1", "x2"].map(String::from).to_vec();
        let procs = vec![(proc(7, "a", "/opt/a", 5), all.clone())];
        assert!(match_clients(&all, &procs).is_empty());
    }
}
