"""Run `litgpt serve` as a user does, for the tests and the serving benchmark.

Each server is the installed `litgpt` command in a subprocess of its own session, on a free port, awaited on
`/health`, and stopped with its whole process group (LitServe starts worker processes), also when the caller fails.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import requests

LITGPT = str(Path(sys.executable).with_name("litgpt"))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class Server:
    url: str  # http://127.0.0.1:PORT
    process: subprocess.Popen
    log_path: Path
    headers: dict[str, str]  # the API key, if the server has one (LIT_SERVER_API_KEY)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


def start(checkpoint_dir: Path, *options: str, log_path: Path, env: dict[str, str] | None = None) -> Server:
    """Starts `litgpt serve checkpoint_dir *options` without waiting for it (see `wait_until_healthy`), with `env`
    added to the environment (LIT_SERVER_API_KEY in it: every route then needs that key in a X-API-Key header)."""
    port = free_port()
    command = [LITGPT, "serve", str(checkpoint_dir), "--port", str(port), *options]
    with open(log_path, "w") as log:
        log.write(" ".join(command) + "\n")
        log.flush()
        process = subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env={**os.environ, **(env or {})}
        )
    api_key = (env or {}).get("LIT_SERVER_API_KEY")
    return Server(f"http://127.0.0.1:{port}", process, log_path, {"X-API-Key": api_key} if api_key else {})


def wait_until_healthy(server: Server, timeout: float = 600) -> None:
    """Returns once `/health` answers 200; raises with the server's log if it exits or the time is up."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise RuntimeError(f"litgpt serve exited with {server.process.returncode}:\n{server.log()[-3000:]}")
        with contextlib.suppress(requests.ConnectionError):
            if requests.get(f"{server.url}/health", headers=server.headers, timeout=5).status_code == 200:
                return
        time.sleep(0.5)
    raise TimeoutError(f"litgpt serve was not healthy after {timeout} s:\n{server.log()[-3000:]}")


def peak_rss_mib(server: Server) -> float:
    """The peak resident memory of the server's processes (its process group: the HTTP server, LitServe's manager
    and workers), each process's own peak (VmHWM) summed: at least the peak of the group at any one time."""
    return sum(_group_memory_kib(server, "VmHWM")) / 1024


def rss_mib(server: Server) -> float:
    """The resident memory of the server's processes (its process group) now."""
    return sum(_group_memory_kib(server, "VmRSS")) / 1024


def worker_mib(server: Server, field: str = "VmRSS") -> float:
    """A memory `field` of the server's largest process: the inference worker, which holds the model."""
    return max(_group_memory_kib(server, field), default=0) / 1024


def _group_memory_kib(server: Server, field: str) -> list[int]:
    """A memory `field` of /proc/PID/status, in KiB, of each process of the server's process group."""
    kib = []
    for status in Path("/proc").glob("[0-9]*/status"):
        with contextlib.suppress(OSError, ProcessLookupError):
            if os.getpgid(int(status.parent.name)) != server.process.pid:
                continue
            fields = dict(line.split(":", 1) for line in status.read_text().splitlines() if ":" in line)
            kib.append(int(fields.get(field, "0 kB").split()[0]))
    return kib


def stop(server: Server) -> None:
    """Stops the server's whole process group: SIGTERM, then SIGKILL for what is still running after 20 s."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(server.process.pid, signal.SIGTERM)
    try:
        server.process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        pass
    # the workers and LitServe's manager are in the group too, and may outlive the main process
    with contextlib.suppress(ProcessLookupError):
        os.killpg(server.process.pid, signal.SIGKILL)
    server.process.wait()


@contextlib.contextmanager
def serving(*configurations: tuple, log_dir: Path, env: dict[str, str] | None = None) -> Iterator[list[Server]]:
    """Starts a server per (checkpoint_dir, options) or (checkpoint_dir, options, its own env), all at once (their
    start-up is mostly imports), waits until all are healthy, and stops all of them on exit."""
    servers = []
    try:
        for i, (checkpoint_dir, options, *own_env) in enumerate(configurations):
            server_env = {**(env or {}), **(own_env[0] if own_env else {})}
            servers.append(start(checkpoint_dir, *options, log_path=log_dir / f"server-{i}.log", env=server_env))
        for server in servers:
            wait_until_healthy(server)
        yield servers
    finally:
        for server in servers:
            stop(server)
