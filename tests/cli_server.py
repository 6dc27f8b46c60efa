"""A preloaded `privacy-audit` for tests that run many CLI commands as separate processes.

A fresh `python -m audit.cli` pays ~4-11 s of CPU importing torch, MLflow, scikit-learn, SciPy, pandas and
Opacus before its command starts; the README's blocks run ~20 such commands. This server imports them once,
then forks one child per command: each command is still its own process (its own exit code, stdout, stderr,
working folder, environment, signals and worker processes), started from an interpreter that has only
imported modules and run no command. A test that is about what a fresh interpreter does (imports, start-up,
module state) keeps `tests/conftest.py`'s `run_cli`.

    python tests/cli_server.py SOCKET          # the server (tests/conftest.py starts it: `preloaded_cli_env`)
    python -S tests/cli_server.py SOCKET ARGS  # a client: runs `privacy-audit ARGS` in a child, exits with its code

The client hands the server its stdin, stdout and stderr (SCM_RIGHTS) with its argv, working folder and
environment; the child takes them over, so the command writes where the client's caller reads. SIGINT and
SIGTERM sent to the client are passed on to the child; a client that goes away (killed at a test's timeout)
takes the child's process group with it.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import socket
import struct
import sys

# Imported once by the server: what the commands import inside their functions (docs/test-suite.md).
# torch._dynamo: torch imports it at a process's first optimizer (~1-2 s of CPU), in every command that trains.
PRELOAD = (
    "numpy",
    "scipy.stats",
    "pandas",
    "sklearn.linear_model",
    "torch",
    "torch._dynamo",
    "opacus",
    "mlflow",
    "audit.cli",
)


def _serve(path: str) -> None:
    import importlib

    before = dict(os.environ)
    for name in PRELOAD:
        importlib.import_module(name)
    # A command's new MLflow store copies a schema MLflow migrated once, here (tests/mlflow_migration.py);
    # loaded under a private name, so that no `tests` package is in the commands' `sys.modules`.
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "_cli_server_mlflow_migration", os.path.join(os.path.dirname(os.path.abspath(__file__)), "mlflow_migration.py")
    )
    assert spec is not None and spec.loader is not None
    migration = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(migration)
    migration.install(template_folder=os.path.dirname(os.path.abspath(path)))
    # What the imports set in the environment (audit/machinery/tracking.py: MLflow's telemetry off): a fresh
    # process would set it too, so each child gets it unless its own environment says otherwise.
    set_by_imports = {key: value for key, value in os.environ.items() if before.get(key) != value}
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    listener.bind(path)
    listener.listen(16)
    running: dict[int, tuple[socket.socket, int]] = {}  # pidfd -> (client connection, child pid)
    print("ready", flush=True)
    parent = os.getppid()
    while os.getppid() == parent:  # a test run that died without stopping the server: stop with it
        readable, _, _ = select.select([listener, *running, *(conn for conn, _ in running.values())], [], [], 5)
        for ready in readable:
            if ready is listener:
                conn, _ = listener.accept()
                message, fds, _, _ = socket.recv_fds(conn, 1 << 20, 3)
                pid = os.fork()
                if pid == 0:
                    listener.close()
                    _child(json.loads(message), fds, set_by_imports)  # never returns
                for fd in fds:
                    os.close(fd)
                conn.send(struct.pack("i", pid))
                running[os.pidfd_open(pid)] = (conn, pid)
            elif isinstance(ready, int):  # a child ended: its exit code goes to its client
                conn, pid = running.pop(ready)
                os.close(ready)
                _, status = os.waitpid(pid, 0)
                with conn:
                    conn.send(struct.pack("i", os.waitstatus_to_exitcode(status)))
            else:  # a client went away before its child ended (a timeout killed it): end the child too
                for pidfd, (conn, pid) in list(running.items()):
                    if conn is ready and not conn.recv(1):
                        with contextlib.suppress(ProcessLookupError):
                            os.killpg(pid, signal.SIGKILL)
                        os.waitpid(pid, 0)
                        os.close(pidfd)
                        conn.close()
                        del running[pidfd]


def _child(request: dict, fds: list[int], set_by_imports: dict[str, str]) -> None:
    """In the forked child: become `python -m audit.cli ARGS` started by the client, run it, exit."""
    code = 1
    try:
        os.setpgid(0, 0)
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update({**set_by_imports, **request["env"]})
        sys.path[0] = os.getcwd()  # what `python -m` puts first: the user's own modules (--trainer m:f) import
        sys.argv = ["privacy-audit", *request["argv"]]
        # __main__ as `python -m audit.cli` has it, so spawned workers import what they would there (not this file)
        import importlib.util
        import types

        main_module = types.ModuleType("__main__")
        main_module.__spec__ = importlib.util.find_spec("audit.cli.__main__")
        main_module.__file__ = main_module.__spec__.origin if main_module.__spec__ else None
        sys.modules["__main__"] = main_module
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        sys.stdin, sys.stdout, sys.stderr = (
            open(0, closefd=False),
            open(1, "w", closefd=False, buffering=1),
            open(2, "w", closefd=False, buffering=1),
        )
        from audit.cli import main

        try:
            main()
            code = 0
        except SystemExit as ended:
            if isinstance(ended.code, int) or ended.code is None:
                code = ended.code or 0
            else:
                print(ended.code, file=sys.stderr)
        import atexit

        atexit._run_exitfuncs()  # what a normal interpreter exit runs (multiprocessing joins its children)
    except BaseException:
        import traceback

        traceback.print_exc()
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def _client(path: str, argv: list[str]) -> int:
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    conn.connect(path)
    request = {"argv": argv, "cwd": os.getcwd(), "env": dict(os.environ)}
    socket.send_fds(conn, [json.dumps(request).encode()], [0, 1, 2])
    (pid,) = struct.unpack("i", conn.recv(4))
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda number, _frame: os.kill(pid, number))
    answer = conn.recv(4)
    return struct.unpack("i", answer)[0] if answer else 1


if __name__ == "__main__":
    if len(sys.argv) == 2:
        _serve(sys.argv[1])
    else:
        code = _client(sys.argv[1], sys.argv[2:])
        sys.exit(code if code >= 0 else 128 - code)  # killed by signal N: the shell's 128 + N
