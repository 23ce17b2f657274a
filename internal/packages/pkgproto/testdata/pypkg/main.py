#!/usr/bin/env python3
"""pyecho: a package for Open Conduit written against docs/extension-protocol.md
with Python's standard library only.

It serves:
  - operation.call for pyecho.echo: answers {"echo": text, "pid": its
    process id}; refuses with the operation error "refused" when the input
    says "refuse": true;
  - operation.gate: decides by the operation's name, from its own config
    (extensions.pyecho.config): names listed in "park" are parked on a wait
    plan, in "refuse" refused with the operation error "not_allowed", in
    "hang" never answered (so the host times out), in "crash" answered by
    the process exiting, in "garble" answered by a line that is not a
    message; every other call is allowed;
  - config.check: the config has only those five members, each a list of
    strings;
  - executor.run / stop / recover for the executor "cmd": runs the binding's
    config "argv" in the execution's directory with the binding's env, the
    toolbelt's endpoint and token file, and the host's os on its PATH.
"""
import json
import os
import signal
import subprocess
import sys
import threading
import time

NAME = "pyecho"
VERSION = "1.0.0"
PROTOCOL = os.environ.get("PYECHO_PROTOCOL", "1")
GATE_LISTS = ("park", "refuse", "hang", "crash", "garble")
# A stubborn package ignores shutdown, the end of its input and SIGTERM,
# so that the host has to kill it.
STUBBORN = os.environ.get("PYECHO_STUBBORN") == "1"

out_lock = threading.Lock()
running = {}  # execution id -> subprocess.Popen
running_lock = threading.Lock()


def log(text):
    sys.stderr.write("pyecho: " + text + "\n")
    sys.stderr.flush()


def send(msg):
    msg["jsonrpc"] = "2.0"
    line = json.dumps(msg, separators=(",", ":")) + "\n"
    with out_lock:
        sys.stdout.write(line)
        sys.stdout.flush()


def answer(mid, result):
    send({"id": mid, "result": result})


def fail(mid, code, message, data=None):
    err = {"code": code, "message": message}
    if data is not None:
        err["data"] = data
    send({"id": mid, "error": err})


def operation_error(mid, code, message):
    fail(mid, -32000, "operation error", {"code": code, "message": message})


def initialize(mid, params):
    if PROTOCOL not in params.get("protocol_versions", []):
        fail(mid, -32002, "unsupported protocol version", {"supported": [PROTOCOL]})
        return False
    answer(mid, {
        "protocol_version": PROTOCOL,
        "package": {"name": NAME, "version": VERSION},
        "serves": ["operation.call", "operation.gate", "config.check",
                   "executor.run", "executor.recover", "executor.stop"],
    })
    return True


def echo(mid, params):
    inp = params.get("input") or {}
    if inp.get("refuse"):
        operation_error(mid, "refused", "the input asked to be refused")
        return
    auth = params.get("authority") or {}
    answer(mid, {"output": {"echo": inp.get("text", ""), "request_id": auth.get("request_id", ""), "pid": os.getpid()}})


def gate(mid, params):
    op = params.get("operation", "")
    auth = params.get("authority") or {}
    cfg = auth.get("config") or {}
    if op in cfg.get("crash", []):
        log("crashing on the gate call, as configured")
        os._exit(3)
    if op in cfg.get("garble", []):
        with out_lock:
            sys.stdout.write("this line is not a message\n")
            sys.stdout.flush()
        return
    if op in cfg.get("hang", []):
        log("not answering the gate call, as configured")
        return
    if op in cfg.get("park", []):
        answer(mid, {"verdict": "park", "plan": {
            "types": ["pyecho.approved"],
            "keys": [auth.get("execution", "")],
            "timeout_ms": 60000,
            "output": {"held": op},
            "reason": "waiting for approval",
        }})
        return
    if op in cfg.get("refuse", []):
        operation_error(mid, "not_allowed", "this operation is not allowed here")
        return
    answer(mid, {"verdict": "allow"})


def check_config(mid, params):
    cfg = params.get("config")
    problems = []
    if not isinstance(cfg, dict):
        problems.append({"pointer": "", "code": "wrong_type", "remedy": "the config is an object"})
    else:
        for key, value in cfg.items():
            if key not in GATE_LISTS:
                problems.append({"pointer": "/" + key, "code": "unknown_field",
                                 "remedy": "the config's members are park, refuse, hang, crash and garble"})
            elif not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                problems.append({"pointer": "/" + key, "code": "wrong_type",
                                 "remedy": "each member is a list of operation names"})
    answer(mid, {"problems": problems})


def run(mid, params):
    if params.get("kind") != "cmd":
        fail(mid, -32602, "no such executor")
        return
    req = params.get("request") or {}
    argv = (req.get("config") or {}).get("argv")
    if not isinstance(argv, list) or not argv:
        answer(mid, {"outcome": "failed", "exit_code": 0, "message": "the binding's config has no argv"})
        return
    ctx = req.get("context") or {}
    env = dict(os.environ)
    env.update(req.get("env") or {})
    if ctx.get("toolbelt_endpoint"):
        env["OS_ENDPOINT"] = ctx["toolbelt_endpoint"]
        env["OS_TOKEN_FILE"] = ctx.get("toolbelt_token_file", "")
    if ctx.get("toolbelt_dir"):
        env["PATH"] = ctx["toolbelt_dir"] + os.pathsep + env.get("PATH", "")
    env["PYECHO_PLAYBOOK_DIR"] = ctx.get("playbook_dir", "")
    try:
        proc = subprocess.Popen(argv, cwd=req.get("dir") or None, env=env,
                                stdin=subprocess.DEVNULL, stdout=sys.stderr, stderr=sys.stderr)
    except OSError:
        answer(mid, {"outcome": "failed", "exit_code": 127, "message": "the command did not start"})
        return
    exe = req.get("execution_id", "")
    with running_lock:
        running[exe] = proc
    code = proc.wait()
    with running_lock:
        running.pop(exe, None)
    outcome = "succeeded" if code == 0 else "failed"
    answer(mid, {"outcome": outcome, "exit_code": max(code, 0), "message": "the command exited %d" % code})


def stop(mid, params):
    exe = (params.get("request") or {}).get("execution_id", "")
    with running_lock:
        proc = running.get(exe)
    if proc is not None:
        proc.terminate()
        try:
            proc.wait(timeout=max(params.get("grace_ms", 0), 1) / 1000.0)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    answer(mid, {})


def main():
    if STUBBORN:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    initialized = False
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        try:
            msg = json.loads(line)
        except ValueError:
            fail(None, -32700, "parse error")
            continue
        method = msg.get("method")
        mid = msg.get("id")
        params = msg.get("params") or {}
        if mid is None:
            continue  # a notification: $/cancel needs nothing here
        if method == "initialize":
            initialized = initialize(mid, params)
        elif not initialized:
            fail(mid, -32600, "initialize first")
        elif method == "shutdown":
            if STUBBORN:
                continue
            answer(mid, {})
            break
        elif method == "operation.call" and params.get("operation") == "pyecho.echo":
            echo(mid, params)
        elif method == "operation.call":
            fail(mid, -32602, "no such operation")
        elif method == "operation.gate":
            gate(mid, params)
        elif method == "config.check":
            check_config(mid, params)
        elif method == "executor.run":
            threading.Thread(target=run, args=(mid, params), daemon=True).start()
        elif method == "executor.stop":
            threading.Thread(target=stop, args=(mid, params), daemon=True).start()
        elif method == "executor.recover":
            fail(mid, -32004, "segment gone")
        else:
            fail(mid, -32601, "method not found")
    while STUBBORN:
        time.sleep(3600)
    with running_lock:
        for proc in running.values():
            proc.kill()
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
