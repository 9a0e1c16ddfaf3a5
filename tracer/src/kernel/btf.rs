//! Just enough of the kernel's BTF (`/sys/kernel/btf/vmlinux`) to find where a member of a
//! struct lives: raw tracepoints pass `struct task_struct *` arguments, and the programs read
//! the pid at the offset found here (aya's BTF parser keeps member offsets private).
use std::path::Path;

const MAGIC: u16 = 0xeb9f;

const KIND_INT: u32 = 1;
const KIND_ARRAY: u32 = 3;
const KIND_STRUCT: u32 = 4;
const KIND_UNION: u32 = 5;
const KIND_ENUM: u32 = 6;
const KIND_FUNC_PROTO: u32 = 13;
const KIND_VAR: u32 = 14;
const KIND_DATASEC: u32 = 15;
const KIND_DECL_TAG: u32 = 17;
const KIND_ENUM64: u32 = 19;

/// One type's header and where its trailing data starts in the type section.
#[derive(Clone, Copy)]
struct TypeRec {
    name_off: u32,
    kind: u32,
    vlen: u32,
    kflag: bool,
    data: usize,
}

pub struct KernelBtf {
    types: Vec<u8>,
    strings: Vec<u8>,
    /// By type id - 1.
    recs: Vec<TypeRec>,
}

#[derive(Debug, thiserror::Error)]
pub enum BtfError {
    #[error("reading {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("not BTF data ({0})")]
    Format(&'static str),
}

fn u16_at(b: &[u8], off: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(off..off + 2)?.try_into().ok()?))
}

fn u32_at(b: &[u8], off: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(off..off + 4)?.try_into().ok()?))
}

impl KernelBtf {
    /// The running kernel's BTF.
    pub fn from_sys_fs() -> Result<KernelBtf, BtfError> {
        Self::from_file(Path::new("/sys/kernel/btf/vmlinux"))
    }

    pub fn from_file(path: &Path) -> Result<KernelBtf, BtfError> {
        let data = std::fs::read(path).map_err(|source| BtfError::Read {
            path: path.display().to_string(),
            source,
        })?;
        Self::parse(&data)
    }

    /// Parse little-endian BTF (the kernel's, on the architectures we run on).
    pub fn parse(data: &[u8]) -> Result<KernelBtf, BtfError> {
        let bad = BtfError::Format;
        if u16_at(data, 0) != Some(MAGIC) {
            return Err(bad("bad magic"));
        }
        let field = |i: usize| u32_at(data, 8 + 4 * i).ok_or(bad("short header"));
        let hdr_len = u32_at(data, 4).ok_or(bad("short header"))? as usize;
        let (type_off, type_len) = (field(0)? as usize, field(1)? as usize);
        let (str_off, str_len) = (field(2)? as usize, field(3)? as usize);
        let section = |off: usize, len: usize| {
            data.get(hdr_len + off..hdr_len + off + len)
                .ok_or(bad("section out of bounds"))
        };
        let types = section(type_off, type_len)?.to_vec();
        let strings = section(str_off, str_len)?.to_vec();
        let mut recs = Vec::new();
        let mut at = 0usize;
        while at < types.len() {
            let (Some(name_off), Some(info)) = (u32_at(&types, at), u32_at(&types, at + 4)) else {
                return Err(bad("truncated type"));
            };
            let kind = (info >> 24) & 0x1f;
            let vlen = info & 0xffff;
            let data = at + 12;
            let extra = match kind {
                KIND_INT | KIND_VAR | KIND_DECL_TAG => 4,
                KIND_ARRAY => 12,
                KIND_STRUCT | KIND_UNION | KIND_DATASEC | KIND_ENUM64 => 12 * vlen as usize,
                KIND_ENUM | KIND_FUNC_PROTO => 8 * vlen as usize,
                2 | 7..=12 | 16 | 18 => 0,
                _ => return Err(bad("unknown type kind")),
            };
            recs.push(TypeRec {
                name_off,
                kind,
                vlen,
                kflag: info >> 31 == 1,
                data,
            });
            at = data + extra;
        }
        Ok(KernelBtf {
            types,
            strings,
            recs,
        })
    }

    fn name(&self, off: u32) -> &[u8] {
        let s = self.strings.get(off as usize..).unwrap_or_default();
        &s[..s.iter().position(|&c| c == 0).unwrap_or(s.len())]
    }

    fn rec(&self, id: u32) -> Option<&TypeRec> {
        self.recs.get((id as usize).checked_sub(1)?)
    }

    /// Byte offset of member `member` of `struct name`, looking into anonymous structs and
    /// unions; None when there is no such struct or member, or it is a bitfield.
    pub fn member_offset(&self, name: &str, member: &str) -> Option<u32> {
        let id = self.recs.iter().position(|r| {
            r.kind == KIND_STRUCT && r.vlen > 0 && self.name(r.name_off) == name.as_bytes()
        })? as u32
            + 1;
        self.find_member(id, member.as_bytes(), 0)
    }

    fn find_member(&self, id: u32, member: &[u8], depth: u32) -> Option<u32> {
        let r = *self.rec(id)?;
        if !matches!(r.kind, KIND_STRUCT | KIND_UNION) || depth > 8 {
            return None;
        }
        for i in 0..r.vlen as usize {
            let m = r.data + 12 * i;
            let (name_off, ty, off) = (
                u32_at(&self.types, m)?,
                u32_at(&self.types, m + 4)?,
                u32_at(&self.types, m + 8)?,
            );
            let bits = if r.kflag { off & 0x00ff_ffff } else { off };
            if name_off == 0 {
                if let Some(inner) = self.find_member(ty, member, depth + 1) {
                    return Some(bits / 8 + inner);
                }
            } else if self.name(name_off) == member {
                let bitfield = r.kflag && off >> 24 != 0;
                return (!bitfield && bits % 8 == 0).then_some(bits / 8);
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A BTF blob with `int` (id 1), an anonymous union { int b; } (id 2) and
    /// `struct task_struct { int state; union { int b; }; int pid; }` (id 3).
    fn blob() -> Vec<u8> {
        let strings = b"\0int\0task_struct\0state\0b\0pid\0".to_vec();
        let s = |name: &str| {
            let pos = strings
                .windows(name.len() + 2)
                .position(|w| {
                    w[0] == 0 && &w[1..=name.len()] == name.as_bytes() && w[name.len() + 1] == 0
                })
                .unwrap();
            pos as u32 + 1
        };
        let mut t = Vec::new();
        let mut push = |v: u32| t.extend_from_slice(&v.to_le_bytes());
        // int: name, info (kind INT), size 4, encoding
        push(s("int"));
        push(KIND_INT << 24);
        push(4);
        push(32);
        // anonymous union, one member b: int at bit 0
        push(0);
        push(KIND_UNION << 24 | 1);
        push(4);
        push(s("b"));
        push(1);
        push(0);
        // struct task_struct: state at 0, the union at 32 bits, pid at 64 bits
        push(s("task_struct"));
        push(KIND_STRUCT << 24 | 3);
        push(12);
        push(s("state"));
        push(1);
        push(0);
        push(0);
        push(2);
        push(32);
        push(s("pid"));
        push(1);
        push(64);
        let mut out = Vec::new();
        out.extend_from_slice(&MAGIC.to_le_bytes());
        out.push(1);
        out.push(0);
        out.extend_from_slice(&24u32.to_le_bytes());
        for v in [0, t.len() as u32, t.len() as u32, strings.len() as u32] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        out.extend_from_slice(&t);
        out.extend_from_slice(&strings);
        out
    }

    #[test]
    fn finds_members_directly_and_inside_anonymous_unions() {
        let btf = KernelBtf::parse(&blob()).unwrap();
        assert_eq!(btf.member_offset("task_struct", "pid"), Some(8));
        assert_eq!(btf.member_offset("task_struct", "b"), Some(4));
        assert_eq!(btf.member_offset("task_struct", "state"), Some(0));
        assert_eq!(btf.member_offset("task_struct", "tgid"), None);
        assert_eq!(btf.member_offset("mm_struct", "pid"), None);
    }

    #[test]
    fn rejects_what_is_not_btf() {
        assert!(KernelBtf::parse(b"\x7fELF").is_err());
        let mut b = blob();
        b.truncate(30);
        assert!(KernelBtf::parse(&b).is_err());
    }

    /// The running kernel's task_struct has a pid (on kernels that publish their BTF; this
    /// project's test machines do).
    #[test]
    fn this_kernels_task_struct_pid() {
        if !Path::new("/sys/kernel/btf/vmlinux").exists() {
            return;
        }
        let btf = KernelBtf::from_sys_fs().expect("the kernel's BTF parses");
        let pid = btf
            .member_offset("task_struct", "pid")
            .expect("task_struct.pid");
        let tgid = btf
            .member_offset("task_struct", "tgid")
            .expect("task_struct.tgid");
        assert_eq!(tgid, pid + 4, "pid and tgid are adjacent pid_t fields");
    }
}
