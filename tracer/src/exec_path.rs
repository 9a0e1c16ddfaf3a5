//! Finding an executable the way execvp does: the one PATH lookup, for the commands the
//! tracer runs (`record`, `sweep`) and the binaries it reads (`--phase-fn`, the workloads).
use std::path::{Path, PathBuf};

/// Find an executable the way execvp would: a name with a slash as given (canonicalized),
/// else the first executable file of that name on PATH (execvp's default path without one).
pub fn find_executable(name: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let is_exec = |p: &Path| {
        p.is_file()
            && p.metadata()
                .map(|m| m.permissions().mode() & 0o111 != 0)
                .unwrap_or(false)
    };
    if name.contains('/') {
        let p = PathBuf::from(name);
        return is_exec(&p).then(|| p.canonicalize().unwrap_or(p));
    }
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| is_exec(p))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_executables_like_execvp() {
        assert!(find_executable("sh").is_some());
        assert!(find_executable("/definitely/not/here").is_none());
        assert!(find_executable("no-such-command-xyz").is_none());
    }
}
