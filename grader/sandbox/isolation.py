"""The walls around a student process: namespaces, a private root, cgroups, rlimits, seccomp.

Each student process is two forks of the warm interpreter:

- the *keeper* (`enter_namespaces`) unshares user (unless root), mount, PID, network, IPC and
  UTS namespaces, joins a fresh memory/pids cgroup where the grader may create one, forks the
  student process and waits for it. Killing the keeper's process group, or the keeper itself,
  ends the student process, which is PID 1 of its namespace: the kernel then kills every
  process it made. Each link of the chain grader -> zygote -> keeper -> student has
  PR_SET_PDEATHSIG, so `kill -9` of the grader leaves nothing behind.
- the *student process* (`enter`) builds a private root holding only the system trees, Python,
  its packages and `layerlab` (read-only, with the grader package and course folders covered),
  a size-capped /tmp and its own /proc, then gives up every privilege (a separate slot user as
  root, an unprivileged user inside a nested user namespace otherwise), sets resource limits
  and loads a seccomp filter.

`enter_namespaces` raises `NamespacesUnavailable` where the kernel refuses the namespaces and
the caller did not accept running without them; `enter` returns the sentences describing
anything weaker than the full set, and raises `IsolationError` when a wall failed half-way.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import os
import platform
import resource
import select
import signal

CLONE_NEWNS = 0x00020000
CLONE_NEWCGROUP = 0x02000000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
CLONE_THREAD = 0x00010000
NAMESPACE_FLAGS = CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWPID | CLONE_NEWNET
ALL_NAMESPACE_FLAGS = NAMESPACE_FLAGS | CLONE_NEWUSER | CLONE_NEWCGROUP

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 1 << 14, 1 << 18
ST_NOEXEC = 8
MNT_DETACH = 2
READ_ONLY = MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV

PR_SET_PDEATHSIG = 1
PR_SET_NO_NEW_PRIVS = 38
PR_CAPBSET_DROP, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 24, 47, 4
LINUX_CAPABILITY_VERSION_3 = 0x20080522
SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 217, "riscv64": 41}.get(platform.machine())
SYS_CAPSET = {"x86_64": 126, "aarch64": 91, "riscv64": 91}.get(platform.machine())

SYSTEM_TREES = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc")
DEVICES = ("null", "zero", "full", "random", "urandom")
SKELETON = "/tmp/.private-root"
WORKDIR = "/tmp/work"
STUDENT_UID = 1000  # the student's user inside its own user namespace (without root)
SAFE_PATH = "/usr/local/bin:/usr/bin:/bin"
CGROUP_V1 = "/sys/fs/cgroup"
CGROUP_GROUP = "layers-grader"
NOFILE = 256

# Denied with EPERM: what student code has no business calling (the kernel keyring included,
# so no key outlives a submission), and whatever would undo the walls.
DENIED_SYSCALLS = (
    "add_key", "request_key", "keyctl",
    "ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd",
    "bpf", "userfaultfd", "perf_event_open", "io_uring_setup", "io_uring_enter", "io_uring_register",
    "mount", "umount2", "pivot_root", "chroot", "unshare", "setns",
    "move_mount", "open_tree", "fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr",
    "open_by_handle_at", "name_to_handle_at",
    "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
    "reboot", "swapon", "swapoff", "syslog", "acct", "quotactl", "fanotify_init", "lookup_dcookie",
    "memfd_create", "memfd_secret", "shmget", "msgget", "personality",
)  # fmt: skip

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
_libc.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]
_libc.unshare.argtypes = [ctypes.c_int]
_libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]


class IsolationError(RuntimeError):
    """A sandbox mechanism failed part-way; the student process must not run."""


class NamespacesUnavailable(IsolationError):
    """The kernel refuses the namespaces student code needs (and running without was not allowed)."""


def _check(result: int, what: str) -> None:
    if result != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"{what}: {os.strerror(code)}")


def _bytes(text: str | None) -> bytes | None:
    return None if text is None else text.encode()


def mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None):
    _check(
        _libc.mount(_bytes(source), _bytes(target), _bytes(fstype), flags, _bytes(data)), f"mount {target}"
    )


def unshare(flags: int) -> None:
    _check(_libc.unshare(flags), "unshare")


def prctl(option: int, value: int) -> None:
    _check(_libc.prctl(option, value, 0, 0, 0), "prctl")


def vm_size_bytes() -> int:
    """This process's current address-space size."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    return 0


def _under(path: str, tree: str) -> bool:
    return path == tree or path.startswith(tree.rstrip("/") + "/")


def _write(path: str, text: str) -> None:
    with open(path, "w") as handle:
        handle.write(text)


# ----------------------------------------------------------------------------- capabilities


def _probe_namespaces() -> str | None:
    """None when an unprivileged process may unshare the namespaces here, else the kernel's reason."""
    pid = os.fork()
    if pid == 0:
        try:
            unshare(NAMESPACE_FLAGS | (CLONE_NEWUSER if os.geteuid() else 0))
            os._exit(0)
        except OSError as error:
            os._exit(error.errno or 1)
        finally:
            os._exit(1)
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    return None if code == 0 else os.strerror(code)


def cgroup_paths() -> dict[str, str] | None:
    """The cgroup v1 memory and pids folders this grader may create groups in, else None."""
    if os.geteuid() != 0:
        return None
    paths = {}
    for controller in ("memory", "pids"):
        base = os.path.join(CGROUP_V1, controller)
        if not os.path.isfile(os.path.join(base, "cgroup.procs")):
            return None
        group = os.path.join(base, CGROUP_GROUP)
        try:
            os.makedirs(group, exist_ok=True)
        except OSError:
            return None
        paths[controller] = group
    return paths


def describe_host() -> dict:
    """What this machine allows: {"namespaces": reason or None, "cgroups": paths or None, "seccomp": bool}."""
    try:
        import pyseccomp  # noqa: F401

        seccomp = True
    except (ImportError, OSError):
        seccomp = False
    return {"namespaces": _probe_namespaces(), "cgroups": cgroup_paths(), "seccomp": seccomp}


# ----------------------------------------------------------------------------- the keeper


def _join_cgroups(cgroups: dict[str, str], name: str, memory_bytes: int, nproc: int) -> None:
    """Join the slot's groups (made on first use, then reused: one submission at a time holds a slot)."""
    for controller, base in cgroups.items():
        group = os.path.join(base, name)
        os.makedirs(group, exist_ok=True)
        if controller == "memory":
            _write(os.path.join(group, "memory.limit_in_bytes"), str(memory_bytes))
            if os.path.exists(os.path.join(group, "memory.memsw.limit_in_bytes")):
                _write(os.path.join(group, "memory.memsw.limit_in_bytes"), str(memory_bytes))
        else:
            _write(os.path.join(group, "pids.max"), str(nproc))
        _write(os.path.join(group, "cgroup.procs"), "0")


def remove_cgroups(cgroups: dict[str, str] | None, removable) -> None:
    """Remove the slot groups whose name `removable(name)` approves (those in use stay: EBUSY)."""
    for base in (cgroups or {}).values():
        try:
            names = os.listdir(base)
        except OSError:
            continue
        for name in filter(removable, names):
            try:
                os.rmdir(os.path.join(base, name))
            except OSError:
                pass


def _die_with_parent(parent: int) -> None:
    prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:
        os._exit(signal.SIGKILL + 128)


def enter_namespaces(config: dict) -> int | None:
    """In the freshly forked keeper: new namespaces, cgroups, then fork the student process.

    Returns (only in the student process) the read end of a pipe that reports the keeper's
    death, or None when running without namespaces. The keeper itself never returns.
    """
    parent = os.getppid()
    os.setsid()
    for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(sig, signal.SIG_DFL)
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    _die_with_parent(parent)
    if not config["isolate"]:
        return None
    root = os.geteuid() == 0
    outer_uid, outer_gid = os.geteuid(), os.getegid()
    try:
        unshare(NAMESPACE_FLAGS | (0 if root else CLONE_NEWUSER))
    except OSError as error:
        if config.get("unsafe"):
            return None
        raise NamespacesUnavailable(
            f"the kernel refuses private namespaces to this user ({error.strerror})"
        ) from None
    if not root:
        _write("/proc/self/setgroups", "deny")
        _write("/proc/self/uid_map", f"0 {outer_uid} 1")
        _write("/proc/self/gid_map", f"0 {outer_gid} 1")
    _die_with_parent(parent)  # a change of credentials clears the death signal
    if config.get("cgroups"):
        name = f"{config['cgroup_owner']}-{parent}-{config['slot']}"  # grader, warm interpreter, slot
        _join_cgroups(config["cgroups"], name, config["memory_bytes"], config["nproc"])
    alive_read, alive_write = os.pipe()
    child = os.fork()
    if child == 0:
        os.close(alive_write)
        return alive_read
    os.close(alive_read)
    _keep(child)


def _keep(child: int) -> None:
    """The keeper's life: hold nothing of the student's, wait for it, and exit the way it did."""
    for fd in (0, 1, 2, 3):
        try:
            os.close(fd)
        except OSError:
            pass
    signal.signal(signal.SIGTERM, lambda *_: os.kill(child, signal.SIGKILL))
    while True:
        try:
            _, status = os.waitpid(child, 0)
            break
        except ChildProcessError:
            status = 0
            break
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        signal.signal(sig, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, [sig])
        os.kill(os.getpid(), sig)
        os._exit(128 + sig)
    os._exit(os.waitstatus_to_exitcode(status))


# ----------------------------------------------------------------------------- the student's side


def _mount_points_under(tree: str) -> list[str]:
    points = []
    with open("/proc/self/mountinfo") as info:
        for line in info:
            point = line.split()[4].encode().decode("unicode_escape").encode("latin-1").decode()
            if _under(point, tree):
                points.append(point)
    return points


def _read_only(point: str) -> None:
    """Remount one mount read-only, keeping the flags a user namespace may not drop."""
    flags = READ_ONLY
    if os.statvfs(point).f_flag & ST_NOEXEC:
        flags |= MS_NOEXEC
    mount(None, point, None, flags)


def _cover(target: str) -> None:
    """Cover a file or folder of the private root with something empty and read-only."""
    if os.path.isdir(target):
        mount("tmpfs", target, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=4k,mode=755")
    elif os.path.exists(target):
        mount(SKELETON + "/dev/null", target, None, MS_BIND)


def _scratch_anchor(tree: str) -> str | None:
    """For a tree under /tmp or /var/tmp (both the student's scratch space): the folder under
    /tmp that will hold it, so that its parents are not the student's to write in."""
    for scratch in ("/tmp", "/var/tmp"):
        if _under(tree, scratch) and tree != scratch:
            return "/tmp/" + tree[len(scratch) + 1 :].split("/")[0]
    return None


def build_private_root(expose, hide, scratch_mb: int) -> bool:
    """Pivot into a fresh root holding only the system trees and `expose` (read-only), with every
    path of `hide` that lies inside them covered, a /tmp of `scratch_mb` MiB (also /var/tmp and
    /dev/shm), the harmless devices and a /proc of this PID namespace. The old root is detached,
    so nothing else on the machine has a path here. Returns whether /proc could be mounted."""
    trees = [tree for tree in SYSTEM_TREES if os.path.isdir(tree) and not os.path.islink(tree)]
    links = {tree: os.readlink(tree) for tree in SYSTEM_TREES if os.path.islink(tree)}
    for path in expose:
        real = os.path.realpath(path)
        if os.path.isdir(real) and not any(_under(real, kept) for kept in trees):
            trees.append(real)
    trees = [
        tree for tree in sorted(set(trees), key=len) if not any(_under(tree, o) for o in trees if o != tree)
    ]
    handles = {tree: os.open(tree, os.O_PATH | os.O_DIRECTORY) for tree in trees}
    try:
        mount(None, "/", None, MS_REC | MS_PRIVATE)
        mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=755")
        os.mkdir(SKELETON, 0o755)
        mount(SKELETON, SKELETON, None, MS_BIND)
        for folder in ("tmp", "var", "dev", "proc"):
            os.mkdir(os.path.join(SKELETON, folder), 0o755)
        os.symlink("../tmp", SKELETON + "/var/tmp")
        os.symlink("../tmp", SKELETON + "/dev/shm")
        # before the trees: one that lives under /tmp is then bound inside it, not covered by it
        mount("tmpfs", SKELETON + "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, f"size={scratch_mb}m,mode=1777")
        for tree, target in links.items():
            os.symlink(target, SKELETON + tree)
        for device in DEVICES:
            node = os.path.join(SKELETON, "dev", device)
            os.close(os.open(node, os.O_CREAT | os.O_WRONLY, 0o666))
            mount(f"/dev/{device}", node, None, MS_BIND)
        for anchor in sorted({_scratch_anchor(tree) for tree in trees} - {None}):
            os.makedirs(SKELETON + anchor, mode=0o755, exist_ok=True)  # read-only below, like the trees
            mount("tmpfs", SKELETON + anchor, "tmpfs", MS_NOSUID | MS_NODEV, "size=64k,mode=755")
        for tree in trees:
            destination = SKELETON + tree
            os.makedirs(destination, mode=0o755, exist_ok=True)
            mount(f"/proc/self/fd/{handles[tree]}", destination, None, MS_BIND | MS_REC)
        for point in _mount_points_under(SKELETON):
            if point not in (SKELETON, SKELETON + "/tmp") and not point.startswith(SKELETON + "/dev/"):
                _read_only(point)
        for path in hide:
            real = os.path.realpath(path)
            if any(_under(real, tree) and real != tree for tree in trees):
                _cover(SKELETON + real)
        try:
            mount("proc", SKELETON + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
            proc = True
        except OSError:
            proc = False
        _read_only(SKELETON)
    finally:
        for handle in handles.values():
            os.close(handle)
    os.chdir(SKELETON)
    _check(_libc.syscall(SYS_PIVOT_ROOT, b".", b"."), "pivot_root")
    _check(_libc.umount2(b".", MNT_DETACH), "umount the old root")
    os.chdir("/")
    return proc


def become_student_user(uid: int | None, gid: int | None) -> None:
    """Drop every privilege: to the slot user as root, else to an unprivileged user of a nested
    user namespace (which has no capability over the mounts made above)."""
    if uid is None:
        outer_uid, outer_gid = os.geteuid(), os.getegid()
        unshare(CLONE_NEWUSER)
        _write("/proc/self/setgroups", "deny")
        _write("/proc/self/uid_map", f"{STUDENT_UID} {outer_uid} 1")
        _write("/proc/self/gid_map", f"{STUDENT_UID} {outer_gid} 1")
        uid = gid = STUDENT_UID
    else:
        os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)
    if os.getuid() != uid or os.geteuid() != uid:
        raise IsolationError("switching to the sandbox user did not take effect")


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


def drop_capabilities() -> None:
    """Empty every capability set, the bounding and ambient sets included (the student's user in
    a nested user namespace otherwise keeps capabilities there, over nothing it owns)."""
    last = int(open("/proc/sys/kernel/cap_last_cap").read())
    _check(_libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0), "clear ambient capabilities")
    for capability in range(last + 1):
        _libc.prctl(PR_CAPBSET_DROP, capability, 0, 0, 0)
    data = (ctypes.c_uint32 * 6)()
    _check(_libc.syscall(SYS_CAPSET, ctypes.byref(_CapHeader(LINUX_CAPABILITY_VERSION_3, 0)), data), "capset")
    with open("/proc/self/status") as status:
        if any(line.startswith("CapEff:") and int(line.split()[1], 16) for line in status):
            raise IsolationError("capabilities remained after dropping them")


def set_limits(config: dict, scratch_bytes: int = 0) -> None:
    limits = [
        (resource.RLIMIT_CORE, 0),
        (resource.RLIMIT_CPU, config["cpu_seconds"]),
        (resource.RLIMIT_FSIZE, config["file_bytes"]),
        (resource.RLIMIT_NOFILE, NOFILE),
        (resource.RLIMIT_MEMLOCK, 0),
        (resource.RLIMIT_MSGQUEUE, 0),
    ]
    if config.get("memory_bytes"):
        limits.append(
            (resource.RLIMIT_AS, vm_size_bytes() + max(config["memory_bytes"] - scratch_bytes, 2**26))
        )
    if config.get("nproc"):
        limits.append((resource.RLIMIT_NPROC, config["nproc"]))
    for which, value in limits:
        soft, hard = resource.getrlimit(which)
        value = value if hard == resource.RLIM_INFINITY else min(value, hard)
        resource.setrlimit(which, (value, value))


@functools.cache
def seccomp_filter(allow_children: bool):
    """The filter (a pyseccomp SyscallFilter) every student process loads last; built once, in
    the warm interpreter, so each fork only loads it."""
    import pyseccomp as seccomp

    denied = seccomp.ERRNO(errno.EPERM)
    rules = seccomp.SyscallFilter(defaction=seccomp.ALLOW)
    for name in DENIED_SYSCALLS:
        try:
            rules.add_rule(denied, name)
        except (RuntimeError, ValueError, OSError):
            pass  # a call this kernel or architecture does not have
    rules.add_rule(denied, "prctl", seccomp.Arg(0, seccomp.EQ, PR_SET_PDEATHSIG))
    rules.add_rule(seccomp.ERRNO(errno.ENOSYS), "clone3")  # flags out of reach: libc falls back to clone
    for flag in (CLONE_NEWUSER, CLONE_NEWNS, CLONE_NEWPID, CLONE_NEWNET, CLONE_NEWIPC, CLONE_NEWUTS):
        rules.add_rule(denied, "clone", seccomp.Arg(0, seccomp.MASKED_EQ, flag, flag))
    if not allow_children:  # no cgroup to count children: threads only
        rules.add_rule(denied, "clone", seccomp.Arg(0, seccomp.MASKED_EQ, CLONE_THREAD, 0))
        for name in ("fork", "vfork"):
            rules.add_rule(denied, name)
    return rules


def _keeper_gone(alive_fd: int) -> bool:
    readable, _, _ = select.select([alive_fd], [], [], 0)
    return bool(readable)


def enter(config: dict, alive_fd: int | None) -> list[str]:
    """Wall off the student process (forked by the keeper) as `config` asks.

    Returns sentences for whatever is weaker than full isolation (only without namespaces).
    """
    missing = []
    namespaces = alive_fd is not None
    workdir = config["fallback_workdir"]
    cgroups = bool(config.get("cgroups")) and namespaces
    scratch = int(config["scratch_mb"]) * 2**20
    try:
        with open("/proc/self/oom_score_adj", "w") as handle:
            handle.write("1000")
    except OSError:
        pass
    if namespaces:
        try:
            if not build_private_root(config.get("expose", ()), config.get("hide", ()), config["scratch_mb"]):
                missing.append("no /proc of its own could be mounted: student code sees no /proc")
            os.mkdir(WORKDIR, 0o700)
            workdir = WORKDIR
            if config.get("uid") is not None:
                os.chown(workdir, config["uid"], config["gid"])
            become_student_user(config.get("uid"), config.get("gid"))
            drop_capabilities()
        except OSError as error:
            raise IsolationError(f"could not wall off the student process: {error}") from None
    elif config["isolate"]:
        missing.append(
            "the kernel refuses private namespaces, and isolation was overridden: student code runs "
            "as the grader's user and can read every file that user can read (the course, its source "
            "notebooks, the grader, the gradebook), signal and inspect the grader's processes, and "
            "reach the network"
        )
    if namespaces:  # after the last change of credentials, which clears it
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if _keeper_gone(alive_fd):
            os._exit(signal.SIGKILL + 128)
        os.close(alive_fd)
    set_limits(config, 0 if cgroups else scratch)
    try:
        prctl(PR_SET_NO_NEW_PRIVS, 1)
    except OSError:
        missing.append("could not forbid set-uid programs (PR_SET_NO_NEW_PRIVS)")
    if config["isolate"]:
        try:
            seccomp_filter(allow_children=cgroups or not namespaces).load()
        except Exception as error:  # the binding raises plain exceptions
            if namespaces:
                raise IsolationError(f"could not load the seccomp filter: {error}") from None
            missing.append(f"no seccomp filter ({error})")
    os.chdir(workdir)
    os.environ.clear()
    os.environ.update(
        {
            "PATH": SAFE_PATH,
            "HOME": workdir,
            "TMPDIR": "/tmp",
            "LANG": "C.UTF-8",
            "MPLBACKEND": "Agg",
            "PYTHONDONTWRITEBYTECODE": "1",
            "MPLCONFIGDIR": workdir,
        }
    )
    return missing


def processes_of(uid: int) -> list[tuple[int, str]]:
    """(pid, state letter) of every process whose real user is `uid`, read from /proc."""
    found, wanted = [], f"\nUid:\t{uid}\t"
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/status") as status:
                text = status.read()
        except OSError:
            continue
        if wanted in text:
            state = text.find("\nState:\t")
            found.append((int(entry.name), text[state + 8 : state + 9] if state >= 0 else "?"))
    return found
