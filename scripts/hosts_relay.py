#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The daemon and the client of the multi-host test bed (scripts/hosts.sh, docs/hosts.md).

serve STATE N OWNER [--share DIR]...: makes N hosts, each a process holding network, UTS,
IPC, mount and PID namespaces of its own, joined by a bridge in a namespace of its own; then
runs commands on them for clients until `down`, until OWNER exits, or until it is killed. Every
host's processes get SIGKILL when the daemon dies however it dies (PR_SET_PDEATHSIG on the
namespaces' holders), so nothing outlives it: a namespace lives only as long as a process in it,
and the veths live in those namespaces only.

client STATE run HOST CMD...: runs CMD on HOST with this process's stdin, stdout and stderr
(passed over the daemon's socket), returns its exit status, and kills it when this process dies.
client STATE agent [SSH-OPTIONS] HOST WORDS...: the same with ssh's contract (the words joined
by spaces and run by sh), for MPI launchers. client STATE kill HOST: kills every process of HOST.
"""
import ctypes
import json
import os
import selectors
import signal
import socket
import struct
import subprocess
import sys
import threading

SUBNET = "10.77.0."
PR_SET_PDEATHSIG = 1
HOST_NAMESPACES = ["--net", "--uts", "--ipc", "--mount", "--pid", "--fork", "--kill-child",
                   "--mount-proc", "--propagation", "private"]
# What the test bed writes into STATE (hosts.sh and this daemon): removed when it goes down;
# nothing else in STATE is touched, and STATE itself goes only when that leaves it empty.
STATE_FILES = ["relay.sock", "relay.pid", "relay.log", "ready", "error", "etc-hosts", "agent"]


def die_with_parent():
    """Runs in a child before exec: SIGKILL when the daemon's thread that made it ends."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def host_name(i):
    return f"host{i}"


def hidden(path):
    """Whether a host's own /tmp or /dev/shm would hide `path`."""
    real = os.path.realpath(path)
    return any(real == top or real.startswith(top + "/") for top in ("/tmp", "/dev/shm"))


def host_init(state, name, ready_fd, shares):
    """PID 1 of a host: its hostname, /etc/hosts, private /tmp and /dev/shm, the shared
    directories at their own paths; then it says so on `ready_fd` and reaps orphans (the
    init of a PID namespace inherits every process whose parent exits) until it is killed."""
    socket.sethostname(name)
    subprocess.run(["mount", "--bind", os.path.join(state, "etc-hosts"), "/etc/hosts"], check=True)
    # Opened before the tmpfs mounts hide them; mounted again from the descriptors.
    dirs = sorted({os.path.realpath(d) for d in [state] + shares if hidden(d)}, key=len)
    fds = {d: os.open(d, os.O_RDONLY | os.O_DIRECTORY) for d in dirs}
    for top in ("/tmp", "/dev/shm"):
        subprocess.run(["mount", "-t", "tmpfs", "-o", "mode=1777,nosuid,nodev", "tmpfs", top],
                       check=True)
    for d, fd in fds.items():
        os.makedirs(d, exist_ok=True)
        subprocess.run(["mount", "--no-canonicalize", "--bind", f"/proc/self/fd/{fd}", d],
                       check=True, pass_fds=[fd])
        os.close(fd)
    os.write(ready_fd, b"ready")
    os.close(ready_fd)
    # Blocked, SIGCHLD stays pending until waited for: no orphan is missed between the two.
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGCHLD})
    while True:
        try:
            os.wait()
        except ChildProcessError:
            signal.sigwait({signal.SIGCHLD})


class Hosts:
    """The bridge's namespace and the hosts: their holders (unshare) and their PID 1s."""

    def __init__(self, state, count, shares):
        self.state, self.count, self.shares = state, count, shares
        self.holders, self.init_pid = {}, {}
        self.switch = None

    def start(self):
        self.switch = subprocess.Popen(["unshare", "--net", "sleep", "infinity"],
                                       preexec_fn=die_with_parent)
        ready = {}
        for i in range(self.count):
            name = host_name(i)
            ready[name], w = os.pipe()
            cmd = ["unshare", *HOST_NAMESPACES, sys.executable, os.path.abspath(__file__),
                   "host-init", self.state, name, str(w), *self.shares]
            self.holders[name] = subprocess.Popen(cmd, preexec_fn=die_with_parent, pass_fds=[w])
            os.close(w)
        for name, holder in self.holders.items():
            self.init_pid[name] = self.wait_for_init(name, holder, ready[name])
        self.connect()

    def wait_for_init(self, name, holder, ready):
        """The host's PID 1 (as this daemon sees it) once it holds the namespaces."""
        said = b""
        # "ready", or end of file when the host's set-up failed (unshare, which keeps a copy
        # of the pipe, exits with it).
        while len(said) < 5:
            chunk = os.read(ready, 5 - len(said))
            if not chunk:
                break
            said += chunk
        os.close(ready)
        if said != b"ready":
            holder.wait()
            raise RuntimeError(f"{name}: setting up its namespaces failed (exit "
                               f"{holder.returncode}); `hosts.sh up` must run as root")
        with open(f"/proc/{holder.pid}/task/{holder.pid}/children") as f:
            return int(f.read().split()[0])

    def connect(self):
        """A bridge in the switch's namespace, a veth from it into each host (made there, so no
        end is ever in this namespace), and the hosts' addresses."""
        sw = ["nsenter", f"--net=/proc/{self.switch.pid}/ns/net"]
        run = lambda *cmd: subprocess.run(cmd, check=True)
        run(*sw, "ip", "link", "add", "br0", "type", "bridge")
        run(*sw, "ip", "link", "set", "br0", "up")
        for i, (name, pid) in enumerate(self.init_pid.items()):
            run(*sw, "ip", "link", "add", f"p{i}", "type", "veth", "peer", "name", "eth0",
                "netns", str(pid))
            run(*sw, "ip", "link", "set", f"p{i}", "master", "br0", "up")
            inside = ["nsenter", f"--net=/proc/{pid}/ns/net", "ip"]
            run(*inside, "link", "set", "lo", "up")
            run(*inside, "addr", "add", f"{SUBNET}{i + 1}/24", "dev", "eth0")
            run(*inside, "link", "set", "eth0", "up")

    def alive(self, name):
        holder = self.holders.get(name)
        return holder is not None and holder.poll() is None

    def kill(self, name):
        holder = self.holders.get(name)
        if holder is not None and holder.poll() is None:
            holder.kill()  # --kill-child: its PID 1 gets SIGKILL, and with it the whole host
            holder.wait()

    def stop(self):
        for name in list(self.holders):
            self.kill(name)
        if self.switch is not None and self.switch.poll() is None:
            self.switch.kill()
            self.switch.wait()


def recv_request(conn):
    """One request: a length, its JSON, and the client's stdin, stdout and stderr."""
    head, fds, _, _ = socket.recv_fds(conn, 4, 3)
    if len(head) != 4 or len(fds) != 3:
        for fd in fds:
            os.close(fd)
        raise ValueError("a request is 4 bytes of length with stdin, stdout and stderr")
    (length,) = struct.unpack("!I", head)
    body = b""
    while len(body) < length:
        chunk = conn.recv(length - len(body))
        if not chunk:
            raise ValueError("short request")
        body += chunk
    return json.loads(body), fds


def reply(conn, status):
    try:
        conn.sendall(struct.pack("!i", status))
    except OSError:
        pass


def serve_one(hosts, conn):
    """Runs one client's command on its host, in a process group of its own, until it exits or
    the client goes away (then the group is killed)."""
    fds = []
    try:
        req, fds = recv_request(conn)
        name = req.get("host", "")
        if req.get("op") == "kill":
            hosts.kill(name)
            return reply(conn, 0)
        if not hosts.alive(name):
            known = ", ".join(hosts.holders)
            os.write(fds[2], f"hosts: no host {name!r} running (hosts: {known})\n".encode())
            return reply(conn, 255)
        pid = hosts.init_pid[name]
        # cd to the client's directory where the host sees it (shared), else to /.
        cmd = ["nsenter", "-t", str(pid), "-m", "-u", "-i", "-n", "-p", "--", "sh", "-c",
               'cd "$0" 2>/dev/null || cd /; exec "$@"', req["cwd"], *req["argv"]]
        # `run` keeps the caller's environment, as a local command would; the agent gets the
        # daemon's, as ssh gives a login environment rather than the caller's.
        child = subprocess.Popen(cmd, stdin=fds[0], stdout=fds[1], stderr=fds[2],
                                 env=req.get("env"), start_new_session=True)
        for fd in fds:
            os.close(fd)
        fds = []
        reply(conn, wait_or_hangup(child, conn))
    except (ValueError, OSError, KeyError, json.JSONDecodeError) as e:
        if len(fds) == 3:
            os.write(fds[2], f"hosts: bad request: {e}\n".encode())
        reply(conn, 255)
    finally:
        for fd in fds:
            os.close(fd)
        conn.close()


def wait_or_hangup(child, conn):
    conn.setblocking(False)
    while True:
        try:
            return child.wait(timeout=0.05) if child.returncode is None else child.returncode
        except subprocess.TimeoutExpired:
            pass
        try:
            if conn.recv(1) == b"":  # the client died: so does its command
                raise ConnectionResetError
        except BlockingIOError:
            continue
        except OSError:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait()
            return child.returncode


def write_file(path, text, mode=0o600):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
    with os.fdopen(fd, "w") as f:
        f.write(text)


def serve(state, count, owner, shares):
    hosts = Hosts(state, count, shares)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda *_: stop.set())
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        listener.bind(os.path.join(state, "relay.sock"))
        listener.listen(64)
        hosts.start()
        write_file(os.path.join(state, "ready"), "\n".join(hosts.init_pid) + "\n")
    except (RuntimeError, OSError, subprocess.CalledProcessError) as e:
        write_file(os.path.join(state, "error"), f"{e}\n")
        hosts.stop()
        return 1
    owner_fd = os.pidfd_open(owner)
    sel = selectors.DefaultSelector()
    sel.register(listener, selectors.EVENT_READ, "client")
    sel.register(owner_fd, selectors.EVENT_READ, "owner")
    while not stop.is_set():
        for key, _ in sel.select(timeout=0.2):
            if key.data == "owner":
                stop.set()
            else:
                conn, _ = listener.accept()
                threading.Thread(target=serve_one, args=(hosts, conn), daemon=True).start()
    hosts.stop()
    listener.close()
    remove_state(state)
    return 0


def remove_state(state):
    for name in STATE_FILES:
        try:
            os.unlink(os.path.join(state, name))
        except FileNotFoundError:
            pass
    try:
        os.rmdir(state)
    except OSError as e:
        print(f"hosts: left {state}: {e.strerror}", file=sys.stderr)


def client(state, op, args):
    if op == "agent":
        # ssh's contract: options, the host, then words that sh runs joined by spaces.
        with_value = set("bcDEeFIiJLlmOopQRSWw")
        while args and args[0].startswith("-"):
            opt = args.pop(0)
            if len(opt) == 2 and opt[1] in with_value and args:
                args.pop(0)
        if len(args) < 2:
            sys.exit("hosts agent: usage: agent [ssh options] HOST COMMAND...")
        host, argv = args[0], ["sh", "-c", " ".join(args[1:])]
    elif op in ("run", "kill"):
        if not args or (op == "run" and len(args) < 2):
            sys.exit(f"hosts {op}: usage: {op} HOST" + (" COMMAND..." if op == "run" else ""))
        host, argv = args[0], args[1:]
    else:
        sys.exit(f"hosts: unknown client operation {op!r}")
    host = resolve(state, host)
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(os.path.join(state, "relay.sock"))
    except OSError as e:
        sys.exit(f"hosts: the test bed in {state} is not running ({e.strerror}): "
                 "start it with `scripts/hosts.sh up N`")
    env = dict(os.environ) if op == "run" else None
    body = json.dumps({"op": op, "host": host, "argv": argv, "cwd": os.getcwd(),
                       "env": env}).encode()
    socket.send_fds(conn, [struct.pack("!I", len(body))], [0, 1, 2])
    conn.sendall(body)
    data = b""
    while len(data) < 4:
        chunk = conn.recv(4 - len(data))
        if not chunk:
            sys.exit("hosts: the test bed went down while the command ran")
        data += chunk
    (status,) = struct.unpack("!i", data)
    return 128 - status if status < 0 else status  # killed by a signal: as a shell reports it


def resolve(state, host):
    """A host named as MPI launchers may name it: host0, its address, or either with a domain."""
    try:
        with open(os.path.join(state, "etc-hosts")) as f:
            for line in f:
                words = line.split()
                if len(words) >= 2 and words[1].startswith("host") and host in words:
                    return words[1]
    except OSError:
        pass  # no test bed there: connecting says so
    return host.split(".")[0]


def main(argv):
    if len(argv) >= 5 and argv[1] == "host-init":
        return host_init(argv[2], argv[3], int(argv[4]), argv[5:])
    if len(argv) >= 5 and argv[1] == "serve":
        state, count, owner = argv[2], int(argv[3]), int(argv[4])
        return serve(state, count, owner, argv[5:])
    if len(argv) >= 4 and argv[1] == "client":
        return client(argv[2], argv[3], argv[4:])
    sys.exit(__doc__)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
