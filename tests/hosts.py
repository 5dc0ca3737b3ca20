"""Git hosts for the sync tests: the servers a team puts its hub on, started by the test on loopback.

Each host comes from Debian's packages and runs as the test's own user with
every file it reads or writes in a temporary folder; the test starts it on a
free loopback port and stops it (never a system service):

- ``ssh``: OpenSSH's ``sshd`` with its own configuration and host key,
  serving gitolite (``gitolite3``). Each machine has its own SSH key,
  registered through gitolite's admin repository as an operator does; every
  hub carries gitmail's pre-receive check as a gitolite repo-specific hook.
- ``http``: ``nginx`` in front of ``fcgiwrap`` and ``git-http-backend``
  (smart HTTP) with basic authentication, a user and password per machine;
  every hub gets the check from ``gitmail hooks install --hub``.
- ``daemon``: ``git daemon`` with pushes enabled and nobody asked who they
  are: a hub that runs no hooks at all, like a hosted service.

A test asks a host for a machine's :class:`Access` to a hub (the URL for
``gitmail remote add`` and the environment its git needs to log in) and
hands that environment to the machine's process. An attacker pushes with
:meth:`Host.git` under its own access; :meth:`Host.outsider` is someone the
host does not know. The README's "Hosting a hub" walks an operator through
the same set-ups.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from importlib import resources

import pytest

from .conftest import git_run, wait_until
from .mcp_harness import ROOT, _die_with_parent, free_port, stop_process

KINDS = ("ssh", "http", "daemon")
# The programs each kind of host runs, and the Debian packages that bring them (.ci/run installs these).
BINARIES = {"ssh": ("sshd", "ssh", "ssh-keygen", "gitolite"), "http": ("nginx", "fcgiwrap", "openssl"), "daemon": ()}
PACKAGES = ("openssh-server", "openssh-client", "gitolite3", "nginx", "fcgiwrap", "openssl")
REQUIRED = "GITMAIL_TEST_HOSTS"  # "required" (CI sets it): a missing program fails the test instead of skipping it
HOOK = "gitmail-hub"  # the name of gitolite's repo-specific hook that runs gitmail's check
BRANCH = "main"


@dataclass(frozen=True)
class Access:
    """How one machine reaches one hub: the URL for ``gitmail remote add`` and what its git needs to log in."""

    url: str
    env: dict[str, str] = field(default_factory=dict)


def program(name: str) -> str | None:
    """Where a host's program is installed (sshd and nginx live in sbin, often not on a user's PATH)."""
    return shutil.which(name) or shutil.which(name, path="/usr/sbin:/usr/bin:/sbin:/bin")


def require(kind: str) -> None:
    """Skip the test when a program this host needs is not installed; fail instead where hosts are required."""
    missing = [name for name in BINARIES[kind] if program(name) is None]
    if not missing:
        return
    reason = (f"the {kind} git host needs {', '.join(missing)}, which is not installed: "
              f"apt-get install {' '.join(PACKAGES)} (.ci/run does)")
    if os.environ.get(REQUIRED) == "required":
        pytest.fail(reason)
    pytest.skip(reason)


class Host:
    """A running git host serving bare hubs by name; ``checked`` says whether its hubs run gitmail's check."""

    kind = ""
    checked = False

    def __init__(self, root: str, *, machines: Iterable[str], hubs: Iterable[str]):
        require(self.kind)
        self.root = root
        self.machines = tuple(machines)
        self.hubs = tuple(hubs)
        self.port = 0
        self.procs: list[subprocess.Popen] = []
        os.makedirs(root, exist_ok=True)

    @property
    def repos(self) -> str:
        """The folder of the hubs' bare repositories (the hosts that serve a folder of them)."""
        return os.path.join(self.root, "repos")

    def path(self, hub: str) -> str:
        """The hub's bare repository on the host's disk, to read with plain git."""
        return os.path.join(self.repos, f"{hub}.git")

    def _make_hubs(self) -> None:
        """Each hub a bare repository on main, with gitmail's check where the host is checked, as an operator does."""
        for hub in self.hubs:
            done(git_run("init", "-q", "--bare", f"--initial-branch={BRANCH}", self.path(hub)))
            if self.checked:
                done(subprocess.run([sys.executable, "-m", "gitmail", "hooks", "install", "--hub", self.path(hub)],
                                    cwd=ROOT, capture_output=True, text=True))

    def _start(self) -> None:
        """Make the hubs and start the servers (what is started is stopped by :meth:`close`)."""
        raise NotImplementedError

    def access(self, machine: str, hub: str) -> Access:
        """``machine``'s way to ``hub`` (one of the machines the host was started with)."""
        raise NotImplementedError

    def outsider(self, hub: str) -> Access:
        """Someone the host does not know (an unregistered key, a wrong password) trying ``hub``."""
        raise NotImplementedError

    def git(self, access: Access, *args: str, cwd: str | None = None) -> subprocess.CompletedProcess[str]:
        """The real git under ``access``'s credentials (an attacker's push, say); the caller reads the outcome."""
        return git_run(*args, cwd=cwd, env=access.env)

    def tip(self, hub: str) -> str | None:
        """The commit the hub's main points at, read on the host's disk."""
        proc = git_run("--git-dir", self.path(hub), "rev-parse", "--verify", "-q", f"refs/heads/{BRANCH}")
        return proc.stdout.strip() or None

    def close(self) -> None:
        for proc in reversed(self.procs):
            stop_process(proc)

    def _listen(self, name: str, argv: Callable[[int], list[str]], ready: Callable[[int, str], bool],
                env: dict[str, str] | None = None) -> int:
        """Start a server on a free port (on another if someone took that one first); the port it listens on."""
        log = os.path.join(self.root, f"{name}.log")
        for _ in range(5):
            port = free_port()
            with open(log, "w", encoding="utf-8") as out:
                proc = subprocess.Popen(argv(port), stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                        env=env, preexec_fn=_die_with_parent)
            self.procs.append(proc)
            if wait_until(partial(_state, proc, port, log, ready), f"{name} on port {port}") == "up":
                return port
            said = read(log)
            if "in use" not in said:
                raise RuntimeError(f"{name} exited with {proc.returncode}: {said}")
        raise RuntimeError(f"{name} found no free port")


def _state(proc: subprocess.Popen, port: int, log: str, ready: Callable[[int, str], bool]) -> str | None:
    """Whether a server is up (``ready`` says so), down (it exited), or neither yet."""
    if ready(port, log):
        return "up"
    return "down" if proc.poll() is not None else None


@contextmanager
def started(kind: str, root: str, *, machines: Iterable[str], hubs: Iterable[str]) -> Iterator[Host]:
    """A host of ``kind`` serving ``hubs`` to ``machines``, stopped when the block ends."""
    host = {"ssh": GitoliteHost, "http": HttpHost, "daemon": DaemonHost}[kind](root, machines=machines, hubs=hubs)
    try:
        host._start()
        yield host
    finally:
        host.close()


# -- SSH: sshd and gitolite ------------------------------------------------------------------------

class GitoliteHost(Host):
    """sshd with its own configuration on a loopback port; every key logs in to gitolite as its machine."""

    kind = "ssh"
    checked = True

    @property
    def home(self) -> str:
        """The hosting account's home as gitolite sees it: its rc, repositories and authorized keys."""
        return os.path.join(self.root, "gitolite")

    @property
    def keys(self) -> str:
        """Every SSH key the test makes: the machines', the administrator's, an outsider's."""
        return os.path.join(self.root, "keys")

    def _start(self) -> None:
        root = self.root
        os.makedirs(self.keys, exist_ok=True)
        os.makedirs(self.home, exist_ok=True)
        self._gitolite("setup", "-pk", self._key("admin") + ".pub")
        # The hubs gitolite creates from now on get main as their default branch (its admin repository
        # stays on master, the branch gitolite takes its configuration from).
        write(os.path.join(self.home, ".gitconfig"), f"[init]\n\tdefaultBranch = {BRANCH}\n")
        self._enable_hooks()
        host_key = os.path.join(root, "host_key")
        keypair(host_key, "host")
        self.port = self._listen("sshd", lambda port: self._sshd(port, host_key),
                                 lambda port, log: f"listening on 127.0.0.1 port {port}" in read(log))
        self.known_hosts = write(os.path.join(root, "known_hosts"),
                                 f"[127.0.0.1]:{self.port} {read(host_key + '.pub')}")
        self._configure()

    def _gitolite(self, *args: str) -> None:
        proc = subprocess.run([program("gitolite") or "gitolite", *args], capture_output=True, text=True,
                              env=dict(os.environ, HOME=self.home, USER=login()))
        if proc.returncode != 0:
            raise RuntimeError(f"gitolite {' '.join(args)}: {proc.stderr}")

    def _key(self, name: str) -> str:
        """The private half of ``name``'s SSH key, made on first use (the public half is beside it, ``.pub``)."""
        private = os.path.join(self.keys, name)
        if not os.path.exists(private):
            keypair(private, name)
        return private

    def _enable_hooks(self) -> None:
        """Turn on repo-specific hooks in gitolite's rc, and put gitmail's check where gitolite looks for them."""
        rc = os.path.join(self.home, ".gitolite.rc")
        text = read(rc)
        for line in ('LOCAL_CODE                =>  "$ENV{HOME}/local",', "'repo-specific-hooks',"):
            assert "# " + line in text, f"gitolite's rc has no {line!r} to turn on"
            text = text.replace("# " + line, line, 1)
        write(rc, text, 0o600)
        write(os.path.join(self.home, "local", "hooks", "repo-specific", HOOK), hub_hook(), 0o755)

    def _sshd(self, port: int, host_key: str) -> list[str]:
        """sshd's command line, its configuration written for ``port``."""
        if os.geteuid() == 0:
            os.makedirs("/run/sshd", mode=0o755, exist_ok=True)  # sshd run as root insists on its privsep folder
        config = write(os.path.join(self.root, "sshd_config"), "\n".join([
            "ListenAddress 127.0.0.1", f"Port {port}", f"HostKey {host_key}",
            f"PidFile {os.path.join(self.root, 'sshd.pid')}",
            f"AuthorizedKeysFile {os.path.join(self.home, '.ssh', 'authorized_keys')}",
            "AuthenticationMethods publickey", "PasswordAuthentication no", "KbdInteractiveAuthentication no",
            "UsePAM no", "StrictModes no", f"AllowUsers {login()}", "PermitRootLogin prohibit-password",
            "DisableForwarding yes", "PermitTTY no",
            f"SetEnv HOME={self.home}",  # gitolite's home: the account's own home stays out of it
            ""]))
        return [program("sshd") or "sshd", "-D", "-e", "-f", config]

    def _ssh(self, key: str) -> dict[str, str]:
        ssh = program("ssh") or "ssh"
        return {"GIT_SSH_COMMAND": f"{ssh} -F /dev/null -i {key} -o IdentitiesOnly=yes -o BatchMode=yes "
                                   f"-o UserKnownHostsFile={self.known_hosts} -o StrictHostKeyChecking=yes"}

    def _configure(self) -> None:
        """As an operator does: clone gitolite-admin, add each machine's key and the hubs, push."""
        clone = os.path.join(self.root, "gitolite-admin")
        admin = self.access("admin", "gitolite-admin")
        done(git_run("clone", "-q", admin.url, clone, env=admin.env))
        for machine in self.machines:
            shutil.copy(self._key(machine) + ".pub", os.path.join(clone, "keydir", f"{machine}.pub"))
        conf = ["repo gitolite-admin", "    RW+     =   admin", "", f"@machines = {' '.join(self.machines)}", ""]
        for hub in self.hubs:
            conf += [f"repo {hub}", "    RW      =   @machines", f"    option hook.pre-receive = {HOOK}", ""]
        write(os.path.join(clone, "conf", "gitolite.conf"), "\n".join(conf))
        done(git_run("add", "-A", cwd=clone))
        done(git_run("commit", "-q", "-m", "Machines and hubs", cwd=clone))
        done(git_run("push", "-q", "origin", "HEAD", cwd=clone, env=admin.env))

    def path(self, hub: str) -> str:
        return os.path.join(self.home, "repositories", f"{hub}.git")

    def access(self, machine: str, hub: str) -> Access:
        return Access(f"ssh://{login()}@127.0.0.1:{self.port}/{hub}", self._ssh(self._key(machine)))

    def outsider(self, hub: str) -> Access:
        return self.access("outsider", hub)  # a key of its own that gitolite never heard of


# -- smart HTTP: nginx, fcgiwrap and git-http-backend ------------------------------------------------

class HttpHost(Host):
    """nginx handing /git/ to git-http-backend through fcgiwrap, behind basic auth with a user per machine."""

    kind = "http"
    checked = True

    def _start(self) -> None:
        root = self.root
        self._make_hubs()
        self.passwords = {machine: os.urandom(9).hex() for machine in self.machines}
        write(os.path.join(root, "htpasswd"), "".join(f"{machine}:{crypt(password)}\n"
                                                      for machine, password in self.passwords.items()), 0o600)
        self.socket = os.path.join(root, "fcgiwrap.sock")
        fcgi_home = os.path.join(root, "fcgi-home")
        os.makedirs(fcgi_home, exist_ok=True)
        fcgi = subprocess.Popen([program("fcgiwrap") or "fcgiwrap", "-s", f"unix:{self.socket}"],
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": fcgi_home,
                                     "LANG": "C.UTF-8"}, preexec_fn=_die_with_parent)
        self.procs.append(fcgi)
        wait_until(lambda: os.path.exists(self.socket) or fcgi.poll() is not None, "fcgiwrap's socket")
        assert fcgi.poll() is None, "fcgiwrap exited"
        self.token = os.urandom(8).hex()  # what /ready answers, so the test knows it reached this nginx
        nginx = program("nginx") or "nginx"
        self.port = self._listen("nginx", lambda port: [nginx, "-e", os.path.join(root, "error.log"), "-p", root,
                                                        "-c", self._config(port)],
                                 lambda port, log: answers(f"http://127.0.0.1:{port}/ready") == self.token)

    def _config(self, port: int) -> str:
        """nginx's whole configuration for ``port``, every path in the host's folder."""
        root = self.root
        os.makedirs(os.path.join(root, "tmp"), exist_ok=True)
        temp = "\n".join(f"    {kind}_temp_path {root}/tmp/{kind};" for kind in ("client_body", "fastcgi", "proxy",
                                                                                 "uwsgi", "scgi"))
        backend = os.path.join(git_run("--exec-path").stdout.strip(), "git-http-backend")
        # As root, nginx's workers would drop to nobody, who may not read the hubs: they stay this user.
        as_user = f"user {login()};\n" if os.geteuid() == 0 else ""
        return write(os.path.join(root, "nginx.conf"), f"""{as_user}daemon off;
worker_processes 1;
pid {root}/nginx.pid;
error_log {root}/error.log;
events {{ worker_connections 64; }}
http {{
{temp}
    access_log {root}/access.log;
    server {{
        listen 127.0.0.1:{port};
        location = /ready {{ return 200 "{self.token}"; }}
        location ~ ^/git(/.*)$ {{
            auth_basic "gitmail hub";
            auth_basic_user_file {root}/htpasswd;
            client_max_body_size 0;
            include /etc/nginx/fastcgi_params;
            fastcgi_param SCRIPT_FILENAME {backend};
            fastcgi_param GIT_PROJECT_ROOT {self.repos};
            fastcgi_param GIT_HTTP_EXPORT_ALL "";
            fastcgi_param PATH_INFO $1;
            fastcgi_pass unix:{self.socket};
        }}
    }}
}}
""")

    def _as(self, machine: str, password: str, hub: str, holder: str) -> Access:
        """The hub's URL names the user; git reads the password from the holder's own credential store."""
        store = write(os.path.join(self.root, "credentials", holder),
                      f"http://{machine}:{password}@127.0.0.1:{self.port}\n", 0o600)
        return Access(f"http://{machine}@127.0.0.1:{self.port}/git/{hub}.git",
                      {"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "credential.helper",
                       "GIT_CONFIG_VALUE_0": f"store --file={store}"})

    def access(self, machine: str, hub: str) -> Access:
        return self._as(machine, self.passwords[machine], hub, machine)

    def outsider(self, hub: str) -> Access:
        return self._as(self.machines[0], "not-the-password", hub, "outsider")  # a known user, a wrong password


# -- git daemon: a hub without hooks -----------------------------------------------------------------

class DaemonHost(Host):
    """``git daemon`` serving every hub with pushes on and no authentication: nothing checks what arrives."""

    kind = "daemon"
    checked = False

    def _start(self) -> None:
        self._make_hubs()
        self.port = self._listen("git-daemon", lambda port: [
            "git", "daemon", "--verbose", "--reuseaddr", "--listen=127.0.0.1", f"--port={port}", "--export-all",
            "--enable=receive-pack", f"--base-path={self.repos}", self.repos],
            lambda port, log: "Ready to rumble" in read(log))

    def access(self, machine: str, hub: str) -> Access:
        return Access(f"git://127.0.0.1:{self.port}/{hub}.git")

    def outsider(self, hub: str) -> Access:
        return self.access("outsider", hub)  # the daemon asks nobody who they are


# -- small things --------------------------------------------------------------------------------------

def read(path: str) -> str:
    with open(path, encoding="utf-8", errors="replace") as handle:
        return handle.read()


def write(path: str, text: str, mode: int = 0o644) -> str:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.chmod(path, mode)
    return path


def done(proc: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert proc.returncode == 0, f"{proc.args}: {proc.stderr}"
    return proc


def login() -> str:
    """The account the test runs as: the hosts run as it, and sshd lets only it in."""
    return pwd.getpwuid(os.getuid()).pw_name


def keypair(path: str, comment: str) -> None:
    """A new ed25519 key at ``path`` (``.pub`` beside it), without a passphrase."""
    done(subprocess.run([program("ssh-keygen") or "ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment,
                         "-f", path], capture_output=True, text=True))


def crypt(password: str) -> str:
    """``password`` hashed for nginx's htpasswd file (SHA-512 crypt, as ``openssl passwd -6`` makes it)."""
    return done(subprocess.run([program("openssl") or "openssl", "passwd", "-6", "-stdin"], input=password,
                               capture_output=True, text=True)).stdout.strip()


def hub_hook() -> str:
    """The script ``gitmail hooks install --hub`` writes: gitmail's check, run by this Python."""
    template = (resources.files("gitmail.hooks") / "hub" / "pre-receive").read_text(encoding="utf-8")
    return template.replace("@PYTHON@", sys.executable)


def answers(url: str) -> str | None:
    """The body a plain GET of ``url`` returns, or None if nothing answers there (yet)."""
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.read().decode()
    except (OSError, urllib.error.URLError):
        return None
