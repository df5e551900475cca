//! The system call filter every sandbox process runs under, in the spirit of Docker's default
//! profile: everything a build, a test suite or a language runtime needs is allowed; what only
//! serves to change the kernel, the mounts or the namespaces, to inspect other processes or to
//! reach past the network namespace is refused with `EPERM`.
//!
//! Three programs, stacked (the kernel applies the strictest answer):
//! 1. a guard that kills processes of a foreign architecture and refuses x32 system calls, whose
//!    numbers would otherwise slip past rules written for the native ones;
//! 2. the deny list (built with `seccompiler`);
//! 3. `clone3` answered with `ENOSYS`: its flags sit behind a pointer no filter can read, and
//!    `ENOSYS` makes the C library fall back to `clone`, whose flags rule 2 does check.

use seccompiler::{
    sock_filter, BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition,
    SeccompFilter, SeccompRule, TargetArch,
};
use std::collections::BTreeMap;

/// System calls refused outright.
/// (`c_long` is `i64` on every architecture seccompiler supports.)
const DENIED: &[i64] = &[
    libc::SYS_acct,
    libc::SYS_add_key,
    libc::SYS_bpf,
    libc::SYS_chroot,
    libc::SYS_clock_adjtime,
    libc::SYS_clock_settime,
    libc::SYS_delete_module,
    libc::SYS_fanotify_init,
    libc::SYS_finit_module,
    libc::SYS_fsconfig,
    libc::SYS_fsmount,
    libc::SYS_fsopen,
    libc::SYS_fspick,
    libc::SYS_init_module,
    libc::SYS_io_uring_enter,
    libc::SYS_io_uring_register,
    libc::SYS_io_uring_setup,
    libc::SYS_kcmp,
    libc::SYS_kexec_file_load,
    libc::SYS_kexec_load,
    libc::SYS_keyctl,
    libc::SYS_lookup_dcookie,
    libc::SYS_migrate_pages,
    libc::SYS_mount,
    libc::SYS_mount_setattr,
    libc::SYS_move_mount,
    libc::SYS_move_pages,
    libc::SYS_name_to_handle_at,
    libc::SYS_open_by_handle_at,
    libc::SYS_open_tree,
    libc::SYS_perf_event_open,
    libc::SYS_pidfd_getfd,
    libc::SYS_pivot_root,
    libc::SYS_process_vm_readv,
    libc::SYS_process_vm_writev,
    libc::SYS_ptrace,
    libc::SYS_quotactl,
    libc::SYS_reboot,
    libc::SYS_request_key,
    libc::SYS_setns,
    libc::SYS_settimeofday,
    libc::SYS_swapoff,
    libc::SYS_swapon,
    libc::SYS_syslog,
    libc::SYS_umount2,
    libc::SYS_unshare,
    libc::SYS_userfaultfd,
    libc::SYS_vhangup,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_ioperm,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_iopl,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_modify_ldt,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_uselib,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_ustat,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_sysfs,
    #[cfg(target_arch = "x86_64")]
    libc::SYS__sysctl,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_nfsservctl,
];

/// `clone` flags that would create namespaces.
const NAMESPACE_FLAGS: [libc::c_int; 7] = [
    libc::CLONE_NEWUSER,
    libc::CLONE_NEWNS,
    libc::CLONE_NEWNET,
    libc::CLONE_NEWPID,
    libc::CLONE_NEWUTS,
    libc::CLONE_NEWIPC,
    libc::CLONE_NEWCGROUP,
];

/// `ioctl`s that push input into a terminal another process reads.
const TERMINAL_INJECTION: [u64; 2] = [0x5412 /* TIOCSTI */, 0x541c /* TIOCLINUX */];

/// `personality` values that change nothing of security (the ones Docker allows).
const PERSONALITIES: [u64; 5] = [0x0, 0x8, 0x20000, 0x20008, 0xffff_ffff];

const AF_VSOCK: u64 = 40;

/// The stacked programs, in the order they are installed.
pub struct Programs {
    pub programs: Vec<BpfProgram>,
}

impl Programs {
    /// Compiles the filter for the architecture the daemon runs on.
    pub fn build() -> Result<Programs, String> {
        let arch: TargetArch = std::env::consts::ARCH
            .try_into()
            .map_err(|e| format!("seccomp: unsupported architecture: {e:?}"))?;
        let deny: BpfProgram = SeccompFilter::new(
            deny_rules()?,
            SeccompAction::Allow,
            SeccompAction::Errno(libc::EPERM as u32),
            arch,
        )
        .and_then(TryInto::try_into)
        .map_err(|e| format!("seccomp: {e}"))?;
        let clone3: BpfProgram = SeccompFilter::new(
            BTreeMap::from([(libc::SYS_clone3, Vec::new())]),
            SeccompAction::Allow,
            SeccompAction::Errno(libc::ENOSYS as u32),
            arch,
        )
        .and_then(TryInto::try_into)
        .map_err(|e| format!("seccomp: {e}"))?;
        Ok(Programs {
            programs: vec![guard(arch), deny, clone3],
        })
    }

    /// Each program as the raw bytes bubblewrap reads from a `--add-seccomp-fd`.
    pub fn as_bytes(&self) -> Vec<Vec<u8>> {
        self.programs
            .iter()
            .map(|program| {
                program
                    .iter()
                    .flat_map(|i| {
                        let mut raw = Vec::with_capacity(8);
                        raw.extend_from_slice(&i.code.to_ne_bytes());
                        raw.push(i.jt);
                        raw.push(i.jf);
                        raw.extend_from_slice(&i.k.to_ne_bytes());
                        raw
                    })
                    .collect()
            })
            .collect()
    }
}

fn rule(conditions: Vec<SeccompCondition>) -> Result<SeccompRule, String> {
    SeccompRule::new(conditions).map_err(|e| format!("seccomp: {e}"))
}

fn condition(
    arg: u8,
    len: SeccompCmpArgLen,
    op: SeccompCmpOp,
    value: u64,
) -> Result<SeccompCondition, String> {
    SeccompCondition::new(arg, len, op, value).map_err(|e| format!("seccomp: {e}"))
}

fn deny_rules() -> Result<BTreeMap<i64, Vec<SeccompRule>>, String> {
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> =
        DENIED.iter().map(|&nr| (nr, Vec::new())).collect();
    // clone: refused when any namespace flag is set (one rule per flag; rules are alternatives).
    let clone = NAMESPACE_FLAGS
        .iter()
        .map(|&flag| {
            let flag = flag as u64;
            rule(vec![condition(
                0,
                SeccompCmpArgLen::Qword,
                SeccompCmpOp::MaskedEq(flag),
                flag,
            )?])
        })
        .collect::<Result<Vec<_>, _>>()?;
    rules.insert(libc::SYS_clone, clone);
    let ioctl = TERMINAL_INJECTION
        .iter()
        .map(|&request| {
            rule(vec![condition(
                1,
                SeccompCmpArgLen::Dword,
                SeccompCmpOp::Eq,
                request,
            )?])
        })
        .collect::<Result<Vec<_>, _>>()?;
    rules.insert(libc::SYS_ioctl, ioctl);
    // personality: refused unless the value is one of the harmless ones (all conditions hold).
    let personality = PERSONALITIES
        .iter()
        .map(|&value| condition(0, SeccompCmpArgLen::Dword, SeccompCmpOp::Ne, value))
        .collect::<Result<Vec<_>, _>>()?;
    rules.insert(libc::SYS_personality, vec![rule(personality)?]);
    // vsock reaches the hypervisor's host directly, past every network namespace.
    rules.insert(
        libc::SYS_socket,
        vec![rule(vec![condition(
            0,
            SeccompCmpArgLen::Dword,
            SeccompCmpOp::Eq,
            AF_VSOCK,
        )?])?],
    );
    Ok(rules)
}

/// BPF_LD | BPF_W | BPF_ABS (the first two are zero).
const BPF_LD_W_ABS: u16 = 0x20;
const BPF_JMP_JEQ_K: u16 = 0x05 | 0x10;
const BPF_JMP_JGE_K: u16 = 0x05 | 0x30;
const BPF_RET_K: u16 = 0x06;
const SECCOMP_RET_ALLOW: u32 = 0x7fff_0000;
const SECCOMP_RET_ERRNO: u32 = 0x0005_0000;
const SECCOMP_RET_KILL_PROCESS: u32 = 0x8000_0000;
/// The bit that marks an x32 system call on x86_64.
const X32_SYSCALL_BIT: u32 = 0x4000_0000;

fn stmt(code: u16, k: u32) -> sock_filter {
    sock_filter {
        code,
        jt: 0,
        jf: 0,
        k,
    }
}

fn jump(code: u16, k: u32, jt: u8, jf: u8) -> sock_filter {
    sock_filter { code, jt, jf, k }
}

/// Foreign architectures are killed; x32 numbers are refused.
fn guard(arch: TargetArch) -> BpfProgram {
    let audit_arch: u32 = match arch {
        TargetArch::x86_64 => 62 | 0x8000_0000 | 0x4000_0000,
        TargetArch::aarch64 => 183 | 0x8000_0000 | 0x4000_0000,
        TargetArch::riscv64 => 243 | 0x8000_0000 | 0x4000_0000,
    };
    let mut program = vec![
        // seccomp_data.arch
        stmt(BPF_LD_W_ABS, 4),
        jump(BPF_JMP_JEQ_K, audit_arch, 1, 0),
        stmt(BPF_RET_K, SECCOMP_RET_KILL_PROCESS),
        // seccomp_data.nr
        stmt(BPF_LD_W_ABS, 0),
    ];
    if arch == TargetArch::x86_64 {
        program.push(jump(BPF_JMP_JGE_K, X32_SYSCALL_BIT, 0, 1));
        program.push(stmt(BPF_RET_K, SECCOMP_RET_ERRNO | libc::ENOSYS as u32));
    }
    program.push(stmt(BPF_RET_K, SECCOMP_RET_ALLOW));
    program
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_programs_compile_and_serialize_for_bubblewrap() {
        let programs = Programs::build().unwrap();
        assert_eq!(programs.programs.len(), 3);
        for (program, bytes) in programs.programs.iter().zip(programs.as_bytes()) {
            assert!(!program.is_empty() && program.len() < 4096);
            assert_eq!(bytes.len(), program.len() * 8);
        }
    }
}
