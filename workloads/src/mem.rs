//! Fresh anonymous memory, as the workloads and the tracer's calibration map it.

/// A new private anonymous read-write mapping of `len` bytes, or the mmap error. The caller
/// owns it and unmaps it with `libc::munmap(addr, len)`.
pub fn map_anonymous(len: usize) -> std::io::Result<*mut libc::c_void> {
    // SAFETY: asks for a fresh mapping at an address of the kernel's choice; nothing existing
    // is touched.
    let addr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if addr == libc::MAP_FAILED {
        return Err(std::io::Error::last_os_error());
    }
    Ok(addr)
}
