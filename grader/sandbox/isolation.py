"""The walls around a student process: namespaces, mounts, resource limits, a separate user.

`enter(config)` runs in a freshly forked child before any student code and returns the list
of mechanisms it could not set up (each one a sentence for the warnings). It raises
`IsolationError` when a mechanism that was available failed half-way (for instance a path
that should be hidden could not be), because running student code then would be unsafe.

Memory is capped with RLIMIT_AS set to the process's address space at fork time (the warm
interpreter with NumPy and PyTorch already mapped) plus `memory_mb`; this works without
cgroups and counts every allocation the student's code makes.
"""

from __future__ import annotations

import ctypes
import os
import resource
import signal
import time

CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWNET = 0x40000000

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_NOATIME, MS_NODIRATIME, MS_BIND = 32, 1024, 2048, 4096
MS_REC, MS_PRIVATE, MS_RELATIME, MS_STRICTATIME = 1 << 14, 1 << 18, 1 << 21, 1 << 24
PER_MOUNT_FLAGS = {
    "nosuid": MS_NOSUID,
    "nodev": MS_NODEV,
    "noexec": MS_NOEXEC,
    "noatime": MS_NOATIME,
    "nodiratime": MS_NODIRATIME,
    "relatime": MS_RELATIME,
    "strictatime": MS_STRICTATIME,
}

PR_SET_PDEATHSIG = 1
PR_SET_NO_NEW_PRIVS = 38

SCRATCH_MOUNTS = {"/tmp": "mode=1777", "/var/tmp": "mode=1777", "/dev/shm": "mode=1777"}
SYSTEM_TREES = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc")
DEVICES = ("null", "zero", "full", "random", "urandom")
PRIVATE_ROOT = "/tmp/root"
KERNEL_TREES = ("/proc", "/sys", "/dev")
WORKDIR = "/tmp/work"
SAFE_PATH = "/usr/local/bin:/usr/bin:/bin"

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
_libc.unshare.argtypes = [ctypes.c_int]
_libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]


class IsolationError(RuntimeError):
    """A sandbox mechanism failed part-way; the student process must not run."""


def _check(result: int, what: str) -> None:
    if result != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"{what}: {os.strerror(code)}")


def mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None):
    encode = lambda text: None if text is None else text.encode()  # noqa: E731
    _check(
        _libc.mount(encode(source), encode(target), encode(fstype), flags, encode(data)), f"mount {target}"
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


def _unescape(path: str) -> str:
    return path.encode().decode("unicode_escape").encode("latin-1").decode(errors="replace")


def mount_points() -> list[tuple[str, set[str]]]:
    """(mount point, per-mount options) for every mount in this namespace, parents first."""
    points = []
    with open("/proc/self/mountinfo") as info:
        for line in info:
            fields = line.split()
            points.append((_unescape(fields[4]), set(fields[5].split(","))))
    return points


def _under(path: str, tree: str) -> bool:
    return path == tree or path.startswith(tree.rstrip("/") + "/")


def hide(path: str, empty_file: str) -> None:
    """Cover `path` with something empty and read-only: a tmpfs for a folder, `empty_file` for a file."""
    if not os.path.lexists(path):
        return
    real = os.path.realpath(path)
    if os.path.isdir(real):
        mount("tmpfs", real, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=4k,mode=755")
    elif os.path.exists(real):
        mount(empty_file, real, None, MS_BIND)
        mount(None, real, None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC)


def enter_private_root(paths, scratch_mb: int) -> None:
    """Chroot into a fresh tmpfs that holds only what Python needs: the system trees, the Python
    installation and `paths` (the environment, `layerlab`), all read-only, plus an empty /tmp
    and the harmless devices. Nothing else on the machine (the course, other checkouts, other
    students' files) exists for the student. Runs as root in a private mount namespace."""
    links, handles = {}, {}
    for tree in SYSTEM_TREES:
        if os.path.islink(tree):
            links[tree] = os.readlink(tree)
        elif os.path.isdir(tree):
            handles[tree] = os.open(tree, os.O_PATH | os.O_DIRECTORY)
    for path in paths:
        real = os.path.realpath(path)
        if (
            real not in handles
            and os.path.isdir(real)
            and not any(_under(real, kept) for kept in SYSTEM_TREES)
        ):
            handles[real] = os.open(real, os.O_PATH | os.O_DIRECTORY)
    try:
        mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, f"size={scratch_mb}m,mode=755")
        os.mkdir(PRIVATE_ROOT, 0o755)
        for folder, mode in (("tmp", 0o1777), ("var/tmp", 0o1777), ("dev", 0o755), ("proc", 0o555)):
            os.makedirs(os.path.join(PRIVATE_ROOT, folder), exist_ok=True)
            os.chmod(os.path.join(PRIVATE_ROOT, folder), mode)
        for tree, target in links.items():
            os.symlink(target, PRIVATE_ROOT + tree)
        bound: list[str] = []
        for path in sorted(handles, key=len):
            if any(_under(path, outer) for outer in bound):
                continue
            destination = PRIVATE_ROOT + path
            os.makedirs(destination, mode=0o755, exist_ok=True)
            mount(f"/proc/self/fd/{handles[path]}", destination, None, MS_BIND | MS_REC)
            mount(None, destination, None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)
            bound.append(path)
        for device in DEVICES:
            node = os.path.join(PRIVATE_ROOT, "dev", device)
            os.close(os.open(node, os.O_CREAT | os.O_WRONLY, 0o666))
            mount(f"/dev/{device}", node, None, MS_BIND)
        shm = os.path.join(PRIVATE_ROOT, "dev", "shm")
        os.mkdir(shm)
        mount("tmpfs", shm, "tmpfs", MS_NOSUID | MS_NODEV, f"size={scratch_mb}m,mode=1777")
    finally:
        for handle in handles.values():
            os.close(handle)
    os.chroot(PRIVATE_ROOT)
    os.chdir("/")


def private_proc() -> bool:
    """Mount a procfs showing only the student's own processes (hidepid=invisible).

    Only on Linux >= 5.8, where each proc mount has its own options; on older kernels the
    option would change /proc for the whole machine, so it is left alone there.
    """
    try:
        major, minor = (int(piece) for piece in os.uname().release.split(".")[:2])
    except ValueError:
        return False
    if (major, minor) < (5, 8):
        return False
    try:
        mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, "hidepid=invisible")
    except OSError:
        return False
    return True


def make_filesystem_read_only(keep_writable: tuple[str, ...]) -> list[str]:
    """Remount every mount read-only (this namespace only); return the mount points that refused."""
    refused = []
    for point, options in mount_points():
        if "ro" in options or any(_under(point, tree) for tree in KERNEL_TREES + keep_writable):
            continue
        flags = MS_BIND | MS_REMOUNT | MS_RDONLY
        for name, flag in PER_MOUNT_FLAGS.items():
            if name in options:
                flags |= flag
        try:
            mount(None, point, None, flags)
        except OSError:
            refused.append(point)
    return refused


def set_limits(config: dict) -> None:
    limits = [
        (resource.RLIMIT_CORE, 0),
        (resource.RLIMIT_CPU, config["cpu_seconds"]),
        (resource.RLIMIT_FSIZE, config["file_bytes"]),
    ]
    if config.get("memory_bytes"):
        limits.append((resource.RLIMIT_AS, vm_size_bytes() + config["memory_bytes"]))
    if config.get("nproc"):
        limits.append((resource.RLIMIT_NPROC, config["nproc"]))
    for which, value in limits:
        resource.setrlimit(which, (value, value))


def hide_and_protect(config: dict) -> None:
    """Without a separate user a chroot could be escaped, so instead: fresh scratch folders,
    the course hidden under empty mounts, and every other mount remounted read-only."""
    for target, options in SCRATCH_MOUNTS.items():
        if os.path.isdir(target):
            mount("tmpfs", target, "tmpfs", MS_NOSUID | MS_NODEV, f"size={config['scratch_mb']}m,{options}")
    staging = "/tmp/.hidden"
    os.mkdir(staging, 0o700)
    empty_file = os.path.join(staging, "empty")
    os.close(os.open(empty_file, os.O_CREAT | os.O_WRONLY, 0o444))
    for path in config["hide"]:
        hide(path, empty_file)
    os.unlink(empty_file)
    os.rmdir(staging)
    refused = make_filesystem_read_only(tuple(SCRATCH_MOUNTS))
    if refused:
        raise OSError(f"could not make {', '.join(refused[:5])} read-only")


def enter(config: dict) -> list[str]:
    """Wall off this (freshly forked) process as `config` asks; return what was unavailable."""
    missing = []
    os.setsid()
    for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    try:
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except OSError:
        pass
    root = os.geteuid() == 0
    workdir = config["fallback_workdir"]
    namespaces = False
    if config["isolate"]:
        try:
            unshare(CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS)
            namespaces = True
        except OSError as error:
            missing.append(
                f"no private mount/network namespaces ({error.strerror}): student code can "
                "reach the network and read every file its user can read"
            )
    drop = config["isolate"] and root and config.get("uid") is not None
    if namespaces:
        try:
            mount(None, "/", None, MS_REC | MS_PRIVATE)
            if drop:
                enter_private_root(config.get("expose", ()), config["scratch_mb"])
                if not private_proc():
                    missing.append(
                        "could not mount a private /proc (needs Linux 5.8 or newer): student code "
                        "can list every process on the machine"
                    )
            else:
                hide_and_protect(config)
                missing.append(
                    "student code keeps the grader's user, so it sees the whole file system "
                    "(read-only, with the course hidden) instead of a private root"
                )
            os.mkdir(WORKDIR, 0o700)
            workdir = WORKDIR
        except OSError as error:
            raise IsolationError(f"could not prepare the private file system: {error}") from None
    if config["isolate"] and not root:
        missing.append(
            "not running as root: student code runs as the grader's own user (it can "
            "signal the grader's processes and read its files), and fork bombs are not capped"
        )
    set_limits({**config, "nproc": config["nproc"] if drop else None})
    if drop:
        try:
            os.chown(workdir, config["uid"], config["gid"])
            os.setgroups([])
            os.setresgid(config["gid"], config["gid"], config["gid"])
            os.setresuid(config["uid"], config["uid"], config["uid"])
        except OSError as error:
            if namespaces:  # root inside a chroot could leave it: refuse rather than run weaker
                raise IsolationError(f"could not switch to the sandbox user ({error.strerror})") from None
            missing.append(
                f"could not switch student code to a separate user ({error.strerror}): it runs "
                "as the grader's user, and its leftover processes are found only by process group"
            )
        else:
            if os.getuid() != config["uid"] or os.geteuid() != config["uid"]:
                raise IsolationError("switching to the sandbox user did not take effect")
    try:
        prctl(PR_SET_NO_NEW_PRIVS, 1)
    except OSError:
        missing.append("could not forbid set-uid programs (PR_SET_NO_NEW_PRIVS)")
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


def kill_user(uid: int, rounds: int = 200) -> bool:
    """In a throwaway child: become `uid` and SIGKILL its processes until only zombies remain.

    kill(-1) from an unprivileged user reaches exactly that user's processes; /proc tells when
    none is left running. Returns whether that was confirmed. The caller must exit afterwards.
    """
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    me = os.getpid()
    for round_number in range(rounds):
        try:
            os.kill(-1, signal.SIGKILL)
        except OSError:
            pass
        alive = [pid for pid, state in processes_of(uid) if pid != me and state not in "ZX"]
        if not alive:
            return True
        time.sleep(0.001 * min(round_number + 1, 20))
    return False
