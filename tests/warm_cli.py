"""A ``mobidfl`` command served from a warm interpreter, for tests that run many commands.

WHY: a ``mobidfl`` process spends most of a small run importing torch, Mesa, pandas, SciPy
and matplotlib (about 4-5 CPU s of a 3-step tutorial run here, measured with
``-X importtime``). The tutorials run eleven such commands. :class:`WarmCli` imports those
third-party libraries once in a server process and puts a ``mobidfl`` shim first on
``PATH``: each call forks the server, and the child runs the installed ``mobidfl`` entry
script itself (``runpy``) with the caller's arguments, working folder, environment,
``PYTHONPATH`` and standard streams, then hands its exit status back to the shim.

What the child shares with the server is only the third-party modules in
:data:`PRELOAD`; MobiDFL's own packages and plug-ins are imported fresh in each child, so a
plug-in installed by an earlier step, or a ``PYTHONPATH`` a step exports, is seen as by a new
process. An environment variable that a preloaded library reads at import (``MPLBACKEND``,
torch's thread variables) keeps the server's value: the server starts with the caller's
environment. The real entry point in a fresh interpreter stays tested elsewhere
(``tests/analysis/test_bad_inputs.py``, ``tests/analysis/test_resume_cli.py``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from types import TracebackType

PRELOAD = (
    "torch", "numpy", "pandas", "scipy.sparse", "scipy.spatial", "networkx", "mesa",
    "mesa_geo", "matplotlib.figure", "pyarrow.parquet", "geopandas", "shapely", "tqdm",
)
"""Third-party libraries only (see the module docstring)."""

_SERVER = r"""
import importlib, json, os, runpy, selectors, socket, sys, traceback
sock_path, entry, preload = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
own = set(filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep)))
base = [p for p in sys.path if p and p not in own]  # the interpreter's own (stdlib, venv)
for name in preload:
    importlib.import_module(name)
listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
listener.bind(sock_path)
listener.listen(8)
selector = selectors.DefaultSelector()
selector.register(listener, selectors.EVENT_READ)
print("ready", flush=True)


def child(request, fds):
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
    for fd in fds:
        if fd > 2:
            os.close(fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    extra = [p for p in request["env"].get("PYTHONPATH", "").split(os.pathsep) if p]
    sys.path[:] = [os.path.dirname(entry), *extra, *base]  # as the console script's own
    importlib.invalidate_caches()
    sys.argv = [entry, *request["argv"]]
    code = 0
    try:
        runpy.run_path(entry, run_name="__main__")
    except SystemExit as exc:  # what the interpreter does with sys.exit(value)
        if exc.code is None:
            code = 0
        elif isinstance(exc.code, int):
            code = exc.code
        else:
            print(exc.code, file=sys.stderr)
            code = 1
    except BaseException:
        traceback.print_exc()
        code = 1
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    os._exit(code & 0xFF)


waiting = {}
while True:
    for _ in selector.select(timeout=0.05):
        conn, _ = listener.accept()
        data, fds, _, _ = socket.recv_fds(conn, 1 << 20, 3)
        pid = os.fork()
        if pid == 0:
            selector.close()
            listener.close()
            conn.close()
            child(json.loads(data), fds)
        for fd in fds:
            os.close(fd)
        waiting[pid] = conn
    while waiting:
        pid, status = os.waitpid(-1, os.WNOHANG)
        if pid == 0:
            break
        conn = waiting.pop(pid, None)
        if conn is not None:
            conn.send(str(os.waitstatus_to_exitcode(status)).encode())
            conn.close()
"""

_SHIM = """#!{python} -S
import json, os, signal, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
s.connect({sock!r})
request = {{"argv": sys.argv[1:], "cwd": os.getcwd(), "env": dict(os.environ)}}
socket.send_fds(s, [json.dumps(request).encode()], [0, 1, 2])
reply = s.recv(64)
if not reply:
    sys.exit("mobidfl (warm test server): the server closed the connection")
code = int(reply)
if code < 0:  # killed by a signal: die of the same one
    signal.signal(-code, signal.SIG_DFL)
    os.kill(os.getpid(), -code)
sys.exit(code)
"""


class WarmCli:
    """``with WarmCli(env) as cli:`` then run commands with ``cli.path_with(env)`` as PATH.

    ``env`` is the environment the server imports under (the callers' base environment).
    """

    def __init__(self, env: dict[str, str]) -> None:
        self.env = env
        self.entry = Path(sys.executable).parent / "mobidfl"
        self._tmp = tempfile.TemporaryDirectory(prefix="warm-cli-")
        self.bin = Path(self._tmp.name) / "bin"
        self._server: subprocess.Popen[str] | None = None

    def __enter__(self) -> WarmCli:
        sock = str(Path(self._tmp.name) / "cli.sock")
        self._server = subprocess.Popen(
            [sys.executable, "-c", _SERVER, sock, str(self.entry), json.dumps(PRELOAD)],
            env=self.env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True,
        )
        assert self._server.stdout is not None
        line = self._server.stdout.readline()  # "ready" once the libraries are imported
        if line.strip() != "ready":
            self.__exit__(None, None, None)
            raise RuntimeError(f"the warm mobidfl server did not start (said {line!r})")
        self.bin.mkdir()
        shim = self.bin / "mobidfl"
        shim.write_text(_SHIM.format(python=sys.executable, sock=sock))
        shim.chmod(0o755)
        return self

    def path_with(self, path: str) -> str:
        """``path`` with the shim's folder first."""
        return f"{self.bin}{os.pathsep}{path}"

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._server is not None:
            self._server.terminate()
            try:
                self._server.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._server.kill()
                self._server.wait()
            if self._server.stdout is not None:
                self._server.stdout.close()
        self._tmp.cleanup()
