//! Project automation for the kernel-path tracer (`cargo xtask ...`), as a library so
//! integration tests can use the same pieces:
//!
//! - [`vm`]: boot a Debian kernel under qemu, run a command, get its status, console and
//!   `/out` files back ([`vm::run`], [`vm::VmConfig`], [`vm::VmReport`]);
//! - [`guest`]: build the static musl guest binaries ([`guest::build`]);
//! - [`kernel`]: fetch and cache the Debian cloud kernels ([`kernel::fetch`]);
//! - [`setup`]: provisioning; [`testcmd`]: the test suite driver ([`bootlog`]: how many
//!   boots the VM tests needed); [`man`]: the tracer's man pages; [`dist`]: the release to
//!   copy to a box (static binaries, man pages, completions, a .deb).
//!
//! Lower layers: [`cpio`] (newc writer), [`initramfs`] (the guest image),
//! [`outstream`] (framed file transport), [`console`] (marker filtering),
//! [`protocol`] (what host and guest agree on), [`apt`] (private apt state).
//!
//! This library is also linked into the guest's `vm-init` (static musl), so it keeps
//! its dependencies small.

pub mod apt;
pub mod bootlog;
pub mod cli;
pub mod console;
pub mod cpio;
pub mod dist;
pub mod guest;
pub mod initramfs;
pub mod kernel;
pub mod man;
pub mod outstream;
pub mod paths;
pub mod progress;
pub mod protocol;
pub mod run;
pub mod same;
pub mod setup;
pub mod testcmd;
pub mod vm;
pub mod vmtests;
