/* The kernel's floor for a read-only run: the least a program can do to
 * build the sandbox cordon's read-only profile builds, and run a command in
 * it. The bench compiles and runs it beside bwrap and cordon (`floor --
 * bash -c true`), so each ratio says how far a runner is from the cost of
 * the system calls themselves.
 *
 * What it builds, as cordon's profile does: new mount, PID, IPC, UTS and
 * network namespaces; the host's tree bound read-only under a fresh root;
 * a fresh /proc with the same covers (read-only binds of /proc/sys and the
 * rest); a minimal /dev; the old root detached; a new session; no
 * capabilities and no new privileges. The command is PID 1 of its namespace
 * and the parent waits for it. Root only (no user namespace). Not a
 * sandbox to use: no seccomp filter, no error recovery, nothing else. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <linux/capability.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static void must(int ok, const char *what) {
    if (!ok) {
        perror(what);
        _exit(127);
    }
}

/* Bind `from` onto `to` (made when missing), read-only unless `rw`. */
static void bind(const char *from, const char *to, int rw) {
    struct stat st;
    if (stat(from, &st) != 0) return; /* a cover of something absent */
    if (S_ISDIR(st.st_mode)) mkdir(to, 0755);
    else close(open(to, O_CREAT | O_WRONLY, 0644));
    must(mount(from, to, NULL, MS_BIND | MS_REC, NULL) == 0, to);
    if (!rw)
        must(mount(NULL, to, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY, NULL) == 0, to);
}

static void build_root(void) {
    static const char *covers[] = {"sys", "sysrq-trigger", "irq", "bus", "fs", "mtrr",
                                   "scsi", "acpi", "asound", "driver"};
    static const char *devices[] = {"null", "zero", "full", "random", "urandom", "tty"};
    char path[256];
    must(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0, "private /");
    must(mount("tmpfs", "/tmp", "tmpfs", 0, "mode=0755") == 0, "base tmpfs");
    must(mkdir("/tmp/root", 0755) == 0, "mkdir root");
    bind("/", "/tmp/root", 0);
    must(mount("proc", "/tmp/root/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) == 0,
         "proc");
    for (unsigned i = 0; i < sizeof covers / sizeof *covers; i++) {
        snprintf(path, sizeof path, "/tmp/root/proc/%s", covers[i]);
        bind(path, path, 0);
    }
    must(mount("tmpfs", "/tmp/root/dev", "tmpfs", MS_NOSUID, "mode=0755") == 0, "dev");
    for (unsigned i = 0; i < sizeof devices / sizeof *devices; i++) {
        char from[64];
        snprintf(from, sizeof from, "/dev/%s", devices[i]);
        snprintf(path, sizeof path, "/tmp/root/dev/%s", devices[i]);
        bind(from, path, 1);
    }
    must(symlink("/proc/self/fd", "/tmp/root/dev/fd") == 0, "dev/fd");
    must(chdir("/tmp/root") == 0, "chdir root");
    must(syscall(SYS_pivot_root, ".", ".") == 0, "pivot_root");
    must(umount2(".", MNT_DETACH) == 0, "detach the old root");
    must(chdir("/") == 0, "chdir /");
}

static void drop_privileges(void) {
    struct __user_cap_header_struct header = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct none[2] = {{0}};
    for (int cap = 0; cap <= CAP_LAST_CAP; cap++) prctl(PR_CAPBSET_DROP, cap, 0, 0, 0);
    must(syscall(SYS_capset, &header, none) == 0, "capset");
    must(prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0, "no_new_privs");
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: floor -- COMMAND...\n");
        return 2;
    }
    must(unshare(CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWNET) == 0,
         "unshare");
    pid_t child = fork();
    must(child >= 0, "fork");
    if (child == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
        build_root();
        setsid();
        drop_privileges();
        execvp(argv[2], argv + 2);
        perror(argv[2]);
        _exit(127);
    }
    int status;
    must(waitpid(child, &status, 0) == child, "waitpid");
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
