//! tracefs: where tracepoints live, and the byte layout of their records. Layouts differ
//! between kernels (e.g. `sched_process_fork` switched comm fields to `__data_loc` in 6.x), so
//! the eBPF side never hard-codes a field offset: userspace reads it from the `format` file.
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum TracefsError {
    #[error(
        "tracefs is not mounted and mounting it at /sys/kernel/tracing failed: {0} \
         (mount it with `mount -t tracefs nodev /sys/kernel/tracing`)"
    )]
    Mount(nix::Error),
    #[error("tracepoint {category}:{name} does not exist on this kernel")]
    NoEvent { category: String, name: String },
    #[error("reading {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: field {field:?} not found in the event format")]
    NoField { path: PathBuf, field: String },
}

const CANDIDATES: [&str; 2] = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"];

/// The tracefs root, mounting tracefs at /sys/kernel/tracing when nothing is mounted (as root;
/// minimal VMs and some containers boot without it). Returns whether we mounted it, so the
/// caller can say so.
pub fn ensure_mounted() -> Result<(PathBuf, bool), TracefsError> {
    if let Some(root) = find_root() {
        return Ok((root, false));
    }
    let target = Path::new(CANDIDATES[0]);
    nix::mount::mount(
        Some("nodev"),
        target,
        Some("tracefs"),
        nix::mount::MsFlags::empty(),
        None::<&str>,
    )
    .map_err(TracefsError::Mount)?;
    Ok((target.to_path_buf(), true))
}

pub fn find_root() -> Option<PathBuf> {
    CANDIDATES
        .iter()
        .map(PathBuf::from)
        .find(|p| p.join("events").is_dir())
}

pub fn event_exists(root: &Path, category: &str, name: &str) -> bool {
    root.join("events")
        .join(category)
        .join(name)
        .join("format")
        .exists()
}

/// One field of an event record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Field {
    pub decl: String,
    pub name: String,
    pub offset: u32,
    pub size: u32,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EventFormat {
    pub path: PathBuf,
    pub fields: Vec<Field>,
}

impl EventFormat {
    pub fn load(root: &Path, category: &str, name: &str) -> Result<EventFormat, TracefsError> {
        let path = root.join("events").join(category).join(name).join("format");
        if !path.exists() {
            return Err(TracefsError::NoEvent {
                category: category.into(),
                name: name.into(),
            });
        }
        let text = std::fs::read_to_string(&path).map_err(|source| TracefsError::Io {
            path: path.clone(),
            source,
        })?;
        Ok(EventFormat {
            fields: parse_fields(&text),
            path,
        })
    }

    pub fn offset(&self, field: &str) -> Result<u32, TracefsError> {
        self.fields
            .iter()
            .find(|f| f.name == field)
            .map(|f| f.offset)
            .ok_or_else(|| TracefsError::NoField {
                path: self.path.clone(),
                field: field.into(),
            })
    }
}

/// Parse the `field:TYPE NAME; offset:N; size:N; signed:N;` lines of a format file.
pub fn parse_fields(text: &str) -> Vec<Field> {
    let mut out = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        let Some(rest) = line.strip_prefix("field:") else {
            continue;
        };
        let mut decl = None;
        let mut offset = None;
        let mut size = None;
        for (i, part) in rest.split(';').enumerate() {
            let part = part.trim();
            if i == 0 {
                decl = Some(part.to_string());
            } else if let Some(v) = part.strip_prefix("offset:") {
                offset = v.parse().ok();
            } else if let Some(v) = part.strip_prefix("size:") {
                size = v.parse().ok();
            }
        }
        let (Some(decl), Some(offset), Some(size)) = (decl, offset, size) else {
            continue;
        };
        // The name is the last identifier once array brackets are removed: both
        // `char comm[16]` and `__data_loc char[] comm` name `comm`.
        let mut base = String::new();
        let mut depth = 0;
        for c in decl.chars() {
            match c {
                '[' => depth += 1,
                ']' => depth -= 1,
                _ if depth == 0 => base.push(c),
                _ => {}
            }
        }
        let name = base
            .trim_end()
            .rsplit([' ', '*'])
            .next()
            .unwrap_or("")
            .to_string();
        out.push(Field {
            decl,
            name,
            offset,
            size,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const FORK_618: &str = "name: sched_process_fork
ID: 366
format:
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;

\tfield:__data_loc char[] parent_comm;\toffset:8;\tsize:4;\tsigned:0;
\tfield:pid_t parent_pid;\toffset:12;\tsize:4;\tsigned:1;
\tfield:__data_loc char[] child_comm;\toffset:16;\tsize:4;\tsigned:0;
\tfield:pid_t child_pid;\toffset:20;\tsize:4;\tsigned:1;
";

    const FORK_510: &str = "\tfield:char parent_comm[16];\toffset:8;\tsize:16;\tsigned:1;
\tfield:pid_t parent_pid;\toffset:24;\tsize:4;\tsigned:1;
\tfield:char child_comm[16];\toffset:28;\tsize:16;\tsigned:1;
\tfield:pid_t child_pid;\toffset:44;\tsize:4;\tsigned:1;
";

    #[test]
    fn finds_offsets_in_both_layouts() {
        let new = parse_fields(FORK_618);
        let f = new.iter().find(|f| f.name == "child_pid").unwrap();
        assert_eq!((f.offset, f.size), (20, 4));
        let old = parse_fields(FORK_510);
        assert_eq!(
            old.iter().find(|f| f.name == "child_pid").unwrap().offset,
            44
        );
        assert_eq!(
            old.iter().find(|f| f.name == "child_comm").unwrap().size,
            16
        );
        assert!(new.iter().any(|f| f.name == "parent_comm"));
    }

    #[test]
    fn pointer_fields_are_named() {
        let f = parse_fields("\tfield:const char * filename;\toffset:24;\tsize:8;\tsigned:0;");
        assert_eq!(f[0].name, "filename");
        assert_eq!(f[0].offset, 24);
    }
}
