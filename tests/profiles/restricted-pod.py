#!/usr/bin/python3
"""Run a command as a process of a restricted Kubernetes pod would run.

Usage: restricted-pod.py -- COMMAND [ARG...]

Installs a seccomp filter with the rules the container runtimes' default
profile (Kubernetes `RuntimeDefault`: containerd's and moby's) applies to a
process without capabilities, sets no-new-privs, and execs COMMAND. Run it
as a non-root user (the restricted Pod Security level's `runAsNonRoot`,
every capability dropped): the test suites drop to one with `setpriv` first.

What the filter refuses, as those profiles do for such a process:
namespaces (`unshare`, `setns`, `clone` with a namespace flag), every mount
call, `clone3` (ENOSYS, so libcs fall back to `clone`, whose flags a
filter can read), the kernel keyring, BPF, perf events, userfaultfd,
io_uring, handles by `open_by_handle_at`, and the host-wide calls (reboot,
modules, swap, clock, accounting, quotas). What it leaves: Landlock and
seccomp itself (the runtimes allow both), ptrace (allowed on kernels since
4.8). It is a deny-list of those rules over an allowing default, not a copy
of an allow-list: what matters here is what a confined run can no longer do.

The filter is for this machine's native architecture only (libseccomp adds
that one); it is a test harness, not a security boundary.
"""

import errno
import os
import sys

import seccomp

# clone(2) flags that make a namespace (CLONE_NEWNS ... CLONE_NEWNET,
# CLONE_NEWCGROUP, CLONE_NEWTIME).
NAMESPACE_FLAGS = [
    0x00020000,  # CLONE_NEWNS
    0x02000000,  # CLONE_NEWCGROUP
    0x04000000,  # CLONE_NEWUTS
    0x08000000,  # CLONE_NEWIPC
    0x10000000,  # CLONE_NEWUSER
    0x20000000,  # CLONE_NEWPID
    0x40000000,  # CLONE_NEWNET
    0x00000080,  # CLONE_NEWTIME
]

REFUSED = [
    # Namespaces and mounts (CAP_SYS_ADMIN in the runtime profiles).
    "unshare", "setns", "mount", "umount2", "pivot_root", "chroot",
    "move_mount", "open_tree", "fsopen", "fsconfig", "fsmount", "fspick",
    "mount_setattr",
    # Kernel facilities a container's process does not get.
    "keyctl", "add_key", "request_key", "bpf", "perf_event_open",
    "userfaultfd", "io_uring_setup", "io_uring_enter", "io_uring_register",
    "open_by_handle_at", "name_to_handle_at", "lookup_dcookie",
    # Host-wide calls.
    "reboot", "kexec_load", "kexec_file_load", "init_module",
    "finit_module", "delete_module", "swapon", "swapoff", "acct",
    "quotactl", "syslog", "settimeofday", "clock_settime", "clock_adjtime",
    "adjtimex", "iopl", "ioperm", "vhangup", "nfsservctl",
]


def main(argv):
    if len(argv) < 3 or argv[1] != "--":
        sys.exit("usage: restricted-pod.py -- COMMAND [ARG...]")
    if os.geteuid() == 0:
        sys.exit("restricted-pod.py: a restricted pod runs as non-root; drop to a user first")
    rules = seccomp.SyscallFilter(defaction=seccomp.ALLOW)
    refuse = seccomp.ERRNO(errno.EPERM)
    for name in REFUSED:
        try:
            rules.add_rule(refuse, name)
        except (RuntimeError, ValueError):
            pass  # not a call on this architecture
    for flag in NAMESPACE_FLAGS:
        rules.add_rule(refuse, "clone", seccomp.Arg(0, seccomp.MASKED_EQ, flag, flag))
    rules.add_rule(seccomp.ERRNO(errno.ENOSYS), "clone3")
    # libseccomp sets no-new-privs before it loads (CTL_NNP, on by default).
    rules.load()
    os.execvp(argv[2], argv[2:])


if __name__ == "__main__":
    main(sys.argv)
