//! Unmapping the executable's pages that only start-up touched, for the verbs that stay
//! resident in users' containers: `podgrace init` (PID 1 for the container's whole life) and
//! `podgrace prestop-wait` (a preStop hook for up to its `--max`).
//!
//! Where their resident memory comes from (measured on the static release binary with
//! `/proc/PID/smaps`): almost all of it is file-backed pages of podgrace's own executable
//! (RssFile), not their own memory (RssAnon, 72 kB for init). Starting any program maps each
//! page of code it runs, and the kernel's fault-around (`fault_around_bytes`, 64 kB by default)
//! maps up to 15 cached neighbours with each one; podgrace is one 18 MB binary whose code for
//! start-up (glibc's static initialisation, Rust's runtime set-up, argument parsing, `fork`/
//! `exec` of the command) is spread over its text, so start-up leaves about 2 MB mapped, of
//! which the wait loop afterwards uses a few dozen pages. tini is 28 kB plus the C library.
//!
//! [`release_start_up_pages`] drops those mappings once start-up is over: the read-only,
//! never-written segments of the executable are `madvise(MADV_DONTNEED)`ed, so only the pages
//! the loop touches again come back (from the page cache, at the cost of a minor fault each,
//! again with fault-around). The pages stay in the page cache, shared with every other process
//! mapping them, and count where they were first charged; unmapped, they are reclaimable as
//! plain cache instead of pinned as a process's mapped memory. Segments holding any private
//! (written) page are left alone: for a read-only private file mapping those are the RELRO
//! pages that relocation wrote (the GOT of a static binary's IFUNCs), whose content dropping
//! would lose.

use std::path::Path;

/// What [`release_start_up_pages`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Released {
    /// Mappings of the executable that were unmapped (their pages dropped).
    pub mappings: usize,
    /// Their resident pages before, kB (`Rss:` of `/proc/self/smaps`).
    pub rss_kb: u64,
}

/// One mapping of `/proc/self/smaps`, as far as [`plan`] needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mapping {
    /// The first address of the mapping.
    pub start: usize,
    /// The address just past its end.
    pub end: usize,
    /// `r-xp`, `r--p`, `rw-p` ...
    pub perms: String,
    /// The mapped file's path, or a pseudo-path (`[heap]`, `[stack]`); empty if anonymous.
    pub path: String,
    /// `Rss:`, kB.
    pub rss_kb: u64,
    /// `Anonymous:` (private pages, written or copied on write), kB.
    pub anonymous_kb: u64,
}

/// The mappings of `smaps` (the text of `/proc/PID/smaps`); malformed entries are skipped.
pub fn parse_smaps(smaps: &str) -> Vec<Mapping> {
    let mut out: Vec<Mapping> = Vec::new();
    for line in smaps.lines() {
        let mut cols = line.split_whitespace();
        let Some(first) = cols.next() else {
            continue;
        };
        if let Some((a, b)) = first.split_once('-') {
            if let (Ok(start), Ok(end)) =
                (usize::from_str_radix(a, 16), usize::from_str_radix(b, 16))
            {
                let perms = cols.next().unwrap_or_default().to_string();
                // offset, device, inode, then the path (which may hold spaces).
                let path = cols.skip(3).collect::<Vec<_>>().join(" ");
                out.push(Mapping {
                    start,
                    end,
                    perms,
                    path,
                    rss_kb: 0,
                    anonymous_kb: 0,
                });
                continue;
            }
        }
        let kb = || cols.clone().next().and_then(|v| v.parse::<u64>().ok());
        match (first, out.last_mut()) {
            ("Rss:", Some(m)) => m.rss_kb = kb().unwrap_or(0),
            ("Anonymous:", Some(m)) => m.anonymous_kb = kb().unwrap_or(0),
            _ => {}
        }
    }
    out
}

/// The mappings [`release_start_up_pages`] drops: those of `exe`, not writable, with no
/// private page.
pub fn plan<'a>(mappings: &'a [Mapping], exe: &str) -> impl Iterator<Item = &'a Mapping> + 'a {
    let exe = exe.to_string();
    mappings.iter().filter(move |m| {
        m.path == exe
            && m.perms.as_bytes().first() == Some(&b'r')
            && m.perms.as_bytes().get(1) == Some(&b'-')
            && m.anonymous_kb == 0
    })
}

/// Drops the resident pages of the executable's read-only, never-written mappings (see the
/// module docs). Call it once start-up is over, before waiting. Errors are not returned: when
/// `/proc/self/smaps` cannot be read nothing is dropped, and a mapping `madvise` refuses is
/// left as it was.
pub fn release_start_up_pages() -> Released {
    let (Ok(smaps), Ok(exe)) = (
        std::fs::read_to_string("/proc/self/smaps"),
        std::fs::read_link("/proc/self/exe"),
    ) else {
        return Released::default();
    };
    let exe = exe.to_string_lossy().into_owned();
    release_in(&parse_smaps(&smaps), Path::new(&exe))
}

fn release_in(mappings: &[Mapping], exe: &Path) -> Released {
    let mut r = Released::default();
    for m in plan(mappings, &exe.to_string_lossy()) {
        // SAFETY: the range is a whole mapping of this process, read-only and file-backed
        // with no private page: MADV_DONTNEED only drops its page-table entries, and the next
        // access maps the same file content again. No memory Rust owns is in it.
        let ok = unsafe {
            libc::madvise(
                m.start as *mut libc::c_void,
                m.end - m.start,
                libc::MADV_DONTNEED,
            )
        } == 0;
        if ok {
            r.mappings += 1;
            r.rss_kb += m.rss_kb;
        }
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMAPS: &str = "\
00400000-00600000 r--p 00000000 fd:00 1234 /podgrace
Size:               2048 kB
Rss:                 300 kB
Anonymous:             0 kB
00600000-01a00000 r-xp 00200000 fd:00 1234 /podgrace
Size:              20480 kB
Rss:                1800 kB
Anonymous:             0 kB
01a00000-01b00000 r--p 01600000 fd:00 1234 /podgrace
Rss:                 120 kB
Anonymous:            16 kB
01b00000-01b10000 rw-p 01700000 fd:00 1234 /podgrace
Rss:                  40 kB
Anonymous:            40 kB
01b10000-01b20000 rw-p 00000000 00:00 0 [heap]
Rss:                  60 kB
Anonymous:            60 kB
7f0000000000-7f0000001000 r-xp 00000000 fd:00 99 /usr/lib/other lib.so
Rss:                   4 kB
Anonymous:             0 kB
";

    #[test]
    fn only_the_executables_read_only_unwritten_mappings_are_dropped() {
        let maps = parse_smaps(SMAPS);
        assert_eq!(maps.len(), 6);
        assert_eq!(maps[5].path, "/usr/lib/other lib.so");
        assert_eq!((maps[1].rss_kb, maps[2].anonymous_kb), (1800, 16));
        let dropped: Vec<(usize, &str)> = plan(&maps, "/podgrace")
            .map(|m| (m.start, m.perms.as_str()))
            .collect();
        // Not the RELRO segment with written pages, not .data, not the heap, not a library.
        assert_eq!(dropped, [(0x400000, "r--p"), (0x600000, "r-xp")]);
    }

    /// On this very test binary: its pages are dropped, and running on afterwards (which needs
    /// them back) works.
    #[test]
    fn dropping_the_pages_of_a_running_binary_keeps_it_running() {
        let rss = || {
            let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
            let exe = std::fs::read_link("/proc/self/exe").unwrap();
            plan(&parse_smaps(&smaps), &exe.to_string_lossy())
                .map(|m| m.rss_kb)
                .sum::<u64>()
        };
        let before = rss();
        assert!(before > 0);
        let r = release_start_up_pages();
        assert!(r.mappings >= 1, "{r:?}");
        let after = rss();
        assert!(after < before, "{before} kB before, {after} kB after");
        // Code and constants of the binary are still there.
        assert_eq!(
            format!("{:?}", Released::default()),
            "Released { mappings: 0, rss_kb: 0 }"
        );
    }
}
