//! A drain's record (`gpudrain/<GPU>`, [`crate::slots::drain`]): its text,
//! what it claims, and what makes its claims doubtful. The text is one
//! `key value` line each (`reason`, `time`, `uid`, `user`); whatever is
//! missing or garbled stays unknown. Who drained a GPU is the record's
//! owner, as the kernel has it; the text is its writer's word.

use crate::prelude::*;
use crate::slots::request::id_form;
use crate::sys::userns::{ANY_OUTSIDE, Ids, outside, unmapped};
use wrapper_common::diag::Bytes;

/// Longest reason kept, in bytes.
pub const MAX_REASON: usize = 1000;

/// One drained GPU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Drained {
    /// The GPU as lock file names have it.
    pub gpu: Vec<u8>,
    pub reason: Vec<u8>,
    /// Seconds since the epoch.
    pub time: Option<u64>,
    pub uid: Option<u32>,
    pub user: Option<Vec<u8>>,
    /// The record's owner (`stat`): who drained it, as the kernel says;
    /// `None` for a record not read from a file.
    pub owner: Option<u32>,
    /// Why its name cannot be trusted to say which GPU was drained.
    pub doubt: Option<Doubt>,
}

/// Why a record's name (which GPU it drains) cannot be trusted: a user
/// other than its owner, root and the lock directory's owner could have
/// renamed it, or linked it, there. Tests pass its GPU over all the same.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Doubt {
    /// `gpudrain/` belongs to this uid, which is none of those: the
    /// sticky bit does not bind a directory's owner.
    DirOwner(u32),
    /// The record has this many names (hard links).
    Links(u64),
    /// `gpudrain/` may be written by every user and has no sticky bit.
    Unsticky,
}

impl Doubt {
    pub fn describe(self) -> String {
        match self {
            Doubt::DirOwner(uid) if unmapped(uid, Ids::User) => format!(
                "gpudrain/ belongs to uid {uid}, {ANY_OUTSIDE}: one who may rename or remove any drain in it cannot be told"
            ),
            Doubt::DirOwner(uid) => format!("gpudrain/ belongs to uid {uid}, who may rename or remove any drain in it"),
            Doubt::Links(n) => format!("the record has {n} names (hard links), which another user may have made"),
            Doubt::Unsticky => {
                "gpudrain/ may be written by every user and has no sticky bit: any user may rename or remove a drain in it"
                    .into()
            }
        }
    }
}

impl Drained {
    /// The file's text.
    pub fn record(&self) -> Vec<u8> {
        let mut out = b"reason ".to_vec();
        out.extend_from_slice(&self.reason);
        out.push(b'\n');
        if let Some(t) = self.time {
            out.extend_from_slice(format!("time {t}\n").as_bytes());
        }
        if let Some(u) = self.uid {
            out.extend_from_slice(format!("uid {u}\n").as_bytes());
        }
        if let Some(user) = &self.user {
            out.extend_from_slice(b"user ");
            out.extend_from_slice(user);
            out.push(b'\n');
        }
        out
    }

    /// Reads a file's text; whatever is missing or garbled stays unknown.
    pub fn parse(gpu: &[u8], text: &[u8]) -> Drained {
        let mut d = Drained {
            gpu: gpu.to_vec(),
            reason: Vec::new(),
            time: None,
            uid: None,
            user: None,
            owner: None,
            doubt: None,
        };
        for line in text.split(|&b| b == b'\n') {
            let at = line.iter().position(|&b| b == b' ').unwrap_or(line.len());
            let (key, value) = (&line[..at], line.get(at + 1..).unwrap_or(b""));
            let number = || wrapper_common::numbers::parse_u64(value);
            match key {
                b"reason" => d.reason = cut(value, MAX_REASON).to_vec(),
                b"time" => d.time = number(),
                b"uid" => d.uid = number().and_then(|n| u32::try_from(n).ok()),
                b"user" if !value.is_empty() => d.user = Some(value.to_vec()),
                _ => {}
            }
        }
        d
    }

    /// `GPU 3 (reason)`, as a message shows it.
    pub fn describe(&self) -> String {
        // As the test is given it (a MIG path's lock form has `+` for `/`).
        format!("GPU {} ({})", Bytes(&id_form(&self.gpu)), Bytes(&self.reason))
    }

    /// Whether the record's text does not name its owner as the drainer:
    /// it names another uid (it was written, or replaced, by someone other
    /// than who it says), or it is no drain's text at all, neither a
    /// reason nor a uid in it (another file of its owner's, such as a
    /// queue record, moved in by whoever could rename it). The text names
    /// the drainer as the parent user namespace has it (the host's, for a
    /// container), and so is the owner compared; an owner outside this
    /// user namespace cannot be told, and is no proof.
    pub fn disowned(&self) -> bool {
        let Some(owner) = self.owner else { return false };
        let Some(host) = outside(owner, Ids::User) else { return false };
        // The owner as this namespace has it too: a record an older
        // release wrote in a container names its drainer so.
        self.uid.map_or(self.reason.is_empty(), |said| said != host && said != owner)
    }
}

/// The first `max` bytes of `text`, or fewer: never half of a UTF-8
/// character (a byte that is not UTF-8 is cut as one).
fn cut(text: &[u8], max: usize) -> &[u8] {
    let mut end = text.len().min(max);
    // A continuation byte where the cut falls: back to its lead byte (at
    // most three bytes back, the longest character being four).
    let floor = end.saturating_sub(3);
    while end > floor && end < text.len() && text[end] & 0xc0 == 0x80 {
        end -= 1;
    }
    &text[..end]
}

/// Whether `name` can be a GPU's name in lock file names (an id, or a MIG
/// path's lock form, `MIG-GPU-<uuid>+1+2`): a drain record of anything
/// else is not one. Every name `--drain` writes is one.
pub fn is_gpu_name(name: &[u8]) -> bool {
    use crate::slots::request::{is_cuda_mig_path, is_safe_id};
    is_safe_id(name) || !name.contains(&b'/') && is_cuda_mig_path(&id_form(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_read_back_and_garbage_stays_unknown() {
        let d = Drained {
            gpu: b"3".to_vec(),
            reason: b"fan failing".to_vec(),
            time: Some(1_764_790_000),
            uid: Some(1000),
            user: Some(b"alice".to_vec()),
            owner: None,
            doubt: None,
        };
        assert_eq!(Drained::parse(b"3", &d.record()), d);
        let g = Drained::parse(b"1", b"reason x\ntime soon\nuid -1\nuser \n\xff\xfe");
        assert_eq!((g.reason.as_slice(), g.time, g.uid, g.user), (&b"x"[..], None, None, None));
        assert_eq!(Drained::parse(b"1", b"").reason, b"");
    }

    #[test]
    fn a_file_that_names_no_drainer_and_no_reason_is_none_of_its_owners() {
        let d = |uid, reason: &[u8]| Drained { uid, owner: Some(7), ..Drained::parse(b"0", b"") }.with(reason);
        assert!(!d(Some(7), b"x").disowned() && d(Some(0), b"x").disowned());
        assert!(d(None, b"").disowned() && !d(None, b"(its record cannot be read by this user)").disowned());
    }

    impl Drained {
        fn with(self, reason: &[u8]) -> Drained {
            Drained { reason: reason.to_vec(), ..self }
        }
    }

    #[test]
    fn a_reason_is_cut_between_characters() {
        assert_eq!(cut("ab€".as_bytes(), 3), b"ab");
        assert_eq!(cut("ab€".as_bytes(), 5), "ab€".as_bytes());
        assert_eq!(cut("ab€c".as_bytes(), 5), "ab€".as_bytes());
        assert_eq!(cut(b"ab\xff\xfe", 3), b"ab\xff");
    }

    #[test]
    fn every_kind_of_pool_id_is_a_gpu_name_in_its_lock_form() {
        use crate::slots::request::lock_form;
        for id in [
            &b"0"[..],
            b"12",
            b"GPU-8932f937-d72c-4106-c12f-20bd9faed9f6",
            b"MIG-GPU-8932f937-d72c-4106-c12f-20bd9faed9f6/1/2",
        ] {
            assert!(is_gpu_name(&lock_form(id)), "{:?}", core::str::from_utf8(id));
        }
        for other in [&b"MIG-GPU-x/1/2"[..], b"MIG-GPU-x+1", b"1+2", b"..", b"", b"MIG-GPU-x+1+2+3"] {
            assert!(!is_gpu_name(other), "{:?}", core::str::from_utf8(other));
        }
    }
}
