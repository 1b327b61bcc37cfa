#!/usr/bin/env python3
"""README's shell examples, run and compared (tools/check-readme.sh sets up the folder and PATH).

Every ```sh block of the README is run, in order, in one work folder (later blocks use what earlier
ones made, as a reader following the README would). A block is one of two kinds:

  - plain commands: run as one bash script under `set -euo pipefail`; it must exit 0;
  - a transcript: lines starting with `$ ` are commands, the lines after each are its output. Each
    command runs with `bash -c`; its stdout and stderr together must be the lines shown, after
    masking (below), and it must exit 0, or non-zero when the shown output has a line starting with
    `Error:` (tilepack's and ArgumentParser's error prefix).

Markers, each an HTML comment on the line(s) directly before the block's opening fence:

  <!-- readme-check: skip: REASON -->        not run; printed with its reason
  <!-- readme-check: setup: COMMANDS -->     bash run in the work folder before the block
  <!-- readme-check: needs: gdal -->         runs where GDAL's library is installed (pkg-config
        gdal), and always in CI (CI set), where a missing GDAL fails it; elsewhere skipped, said so
  <!-- readme-check: serve: DIR at 127.0.0.1:8080 -->
        nginx on a free loopback port serves DIR (in the work folder) while the block runs; the
        block's `127.0.0.1:8080` is that port, and the port is shown as 8080 in its output

What is masked, on both sides, and nothing else: durations (`0.42 s`, `12 ms`); the hashes of
content identities (`tpid1:341:<hash 1>:<hash 2>`: the tile count is kept, and each distinct hash
gets a label in order of first appearance over the whole README, so an identity that must equal an
earlier one still must); the work folder's path; the served port (above).

The commands reach 127.0.0.1 only (other hosts through a proxy that refuses), with HOME in the
temporary folder and no AWS settings.

Usage: readme_examples.py README WORKDIR [--state DIR] [--timeout SECONDS]
Exit status: 0 all blocks ran as shown, 1 a block failed or differs, 2 the README's markers are wrong.
"""

import argparse
import shutil
import difflib
import os
import re
import signal
import socket
import subprocess
import sys
import time

FENCE = re.compile(r"^```(\S*)\s*$")
MARKER = re.compile(r"^<!--\s*readme-check:\s*(\w+):\s*(.*?)\s*-->\s*$")
UNCHECKED_SHELL_LANGS = {"bash", "shell", "console", "shell-session", "zsh", "shellsession"}
SERVE_ARG = re.compile(r"^(\S+)/? at 127\.0\.0\.1:(\d+)$")
ERROR_LINE = re.compile(r"^Error:")
PROXY_NAMES = {"http_proxy", "https_proxy", "all_proxy", "no_proxy"}
DEAD_PROXY = "http://127.0.0.1:9"  # the discard port, closed: a request to another host fails at once


class MarkerError(Exception):
    pass


class Block:
    def __init__(self, fence_line, body, markers):
        self.fence_line = fence_line  # 1-based line of the opening fence
        self.body = body  # [(line number, text)]
        self.markers = markers  # [(line number, kind, argument)]

    def marker(self, kind):
        return [(n, arg) for n, k, arg in self.markers if k == kind]



def _gdal_installed():
    return os.environ.get("CI") is not None or (
        shutil.which("pkg-config") is not None
        and subprocess.run(["pkg-config", "--exists", "gdal"], check=False).returncode == 0)


# What a needs marker may name: (whether the block runs here, the reason it is skipped otherwise).
NEEDS = {"gdal": (_gdal_installed, "needs GDAL's library for the tiler: apt-get install libgdal-dev (CI installs it)")}

def parse(path):
    """The ```sh blocks of the file, with their markers; MarkerError for a malformed file."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    blocks, problems, attached = [], [], set()
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        lang, start = m.group(1), i
        j = i + 1
        while j < len(lines) and lines[j].strip() != "```":
            j += 1
        if j == len(lines):
            problems.append(f"{path}:{start + 1}: the ```{lang} block is not closed")
            break
        if lang in UNCHECKED_SHELL_LANGS:
            problems.append(f"{path}:{start + 1}: a ```{lang} block is not checked; write ```sh (and a skip marker if it cannot run)")
        if lang == "sh":
            markers, k = [], start - 1
            while k >= 0 and MARKER.match(lines[k]):
                mm = MARKER.match(lines[k])
                markers.insert(0, (k + 1, mm.group(1), mm.group(2)))
                attached.add(k)
                k -= 1
            for n, kind, arg in markers:
                if kind not in ("skip", "setup", "serve", "needs"):
                    problems.append(f"{path}:{n}: unknown readme-check marker '{kind}' (skip, setup, serve or needs)")
                elif kind == "needs" and arg not in NEEDS:
                    problems.append(f"{path}:{n}: a needs marker names one of {', '.join(sorted(NEEDS))}, not '{arg}'")
                elif not arg:
                    problems.append(f"{path}:{n}: the readme-check {kind} marker needs {'a reason' if kind == 'skip' else 'an argument'}")
                elif kind == "serve" and not SERVE_ARG.match(arg):
                    problems.append(f"{path}:{n}: a serve marker reads 'serve: DIR at 127.0.0.1:PORT', not '{arg}'")
            blocks.append(Block(start + 1, [(n + 1, lines[n]) for n in range(start + 1, j)], markers))
        i = j + 1
    for n, line in enumerate(lines):
        if n not in attached and line.lstrip().startswith("<!--") and "readme-check" in line:
            problems.append(f"{path}:{n + 1}: a readme-check marker (<!-- readme-check: KIND: ARGUMENT -->) must be on the line(s) directly before a ```sh block")
    if problems:
        raise MarkerError("\n".join(problems))
    return blocks


class Masker:
    """Masks one side (README or the commands' output); identity hashes get labels in order."""

    DURATION = re.compile(r"\b\d+(?:\.\d+)? ?(?:s|ms)\b")
    IDENTITY = re.compile(r"\btpid1:(\d+):([0-9a-f]{32}):([0-9a-f]{32})\b")

    def __init__(self):
        self.labels = {}

    def label(self, digest):
        if digest not in self.labels:
            self.labels[digest] = f"<hash {len(self.labels) + 1}>"
        return self.labels[digest]

    def __call__(self, line):
        line = self.DURATION.sub(lambda m: "<duration>", line)
        line = self.IDENTITY.sub(lambda m: f"tpid1:{m.group(1)}:{self.label(m.group(2))}:{self.label(m.group(3))}", line)
        return line


def run(script, work, env, timeout):
    """(exit status, output lines) of a bash script in the work folder; killed with its children at the timeout."""
    p = subprocess.Popen(["bash", "-c", script], cwd=work, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        out, _ = p.communicate(timeout=timeout)
        status = p.returncode
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, _ = p.communicate()
        status = None
    text = out.decode("utf-8", "replace")
    lines = text.split("\n") if text else []
    if lines and lines[-1] == "":
        lines.pop()
    return status, lines


def unified(path, expected, actual, masked_expected, masked_actual):
    """A unified diff of the raw lines, matched on their masked forms; the '-' side's numbers are README's lines."""
    out = []
    matcher = difflib.SequenceMatcher(None, masked_expected, masked_actual, autojunk=False)
    first = expected[0][0] if expected else None
    for group in matcher.get_grouped_opcodes(3):
        a1, a2, b1, b2 = group[0][1], group[-1][2], group[0][3], group[-1][4]
        start = expected[a1][0] if a1 < len(expected) else (expected[-1][0] + 1 if expected else first or 0)
        out.append(f"@@ -{path}:{start},{a2 - a1} +{b1 + 1},{b2 - b1} @@")
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                out += [" " + expected[i][1] for i in range(i1, i2)]
                continue
            out += ["-" + expected[i][1] for i in range(i1, i2)]
            out += ["+" + actual[j] for j in range(j1, j2)]
    return out


class Nginx:
    def __init__(self, root, state):
        self.dir = os.path.join(state, "nginx")
        os.makedirs(self.dir, exist_ok=True)
        os.makedirs(root, exist_ok=True)
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        self.port = s.getsockname()[1]
        s.close()
        d = self.dir
        with open(os.path.join(d, "nginx.conf"), "w") as f:
            f.write(f"""daemon off; master_process off; worker_processes 1; pid {d}/nginx.pid; error_log {d}/error.log;
events {{ worker_connections 64; }}
http {{
    access_log {d}/access.log;
    client_body_temp_path {d}/b; proxy_temp_path {d}/p; fastcgi_temp_path {d}/f; uwsgi_temp_path {d}/u; scgi_temp_path {d}/s;
    server {{ listen 127.0.0.1:{self.port}; root {os.path.realpath(root)}; }}
}}
""")
        self.process = subprocess.Popen(["/usr/sbin/nginx", "-p", d, "-c", f"{d}/nginx.conf", "-e", f"{d}/error.log"],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 10
        while time.time() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                if self.process.poll() is not None:
                    break
                time.sleep(0.05)
        self.stop()
        log = open(os.path.join(d, "error.log")).read() if os.path.exists(os.path.join(d, "error.log")) else ""
        raise RuntimeError(f"nginx did not start on 127.0.0.1:{self.port} within 10 s\n{log}")

    def stop(self):
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("readme")
    ap.add_argument("work")
    ap.add_argument("--timeout", type=float, default=300, help="seconds a command (or plain block) may take")
    ap.add_argument("--state", help="a folder for nginx's files (default: WORK/../state)")
    args = ap.parse_args()
    path = args.readme
    name = os.path.basename(path)
    work = os.path.realpath(args.work)
    state = args.state or os.path.join(os.path.dirname(work), "state")
    try:
        blocks = parse(path)
    except MarkerError as e:
        print(e, file=sys.stderr)
        return 2

    # Only loopback: any other host goes to a proxy on a closed loopback port and fails at once;
    # no AWS settings or ~/.aws of the user's, no instance metadata service (a block that needs S3
    # must be marked skipped, not pass on someone's credentials).
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_") and k.lower() not in PROXY_NAMES}
    home = os.path.join(state, "home")
    os.makedirs(home, exist_ok=True)
    env.update(HOME=home, AWS_EC2_METADATA_DISABLED="true", http_proxy=DEAD_PROXY, https_proxy=DEAD_PROXY,
               all_proxy=DEAD_PROXY, no_proxy="127.0.0.1,localhost", NO_PROXY="127.0.0.1,localhost")
    env.setdefault("LC_ALL", "C.UTF-8")
    expected_masker, actual_masker = Masker(), Masker()
    actual_port_map = {}  # a served port -> the port README shows

    def as_shown(line):
        """An output line with the script's own choices (the work folder, a served port) as README shows them."""
        for actual, shown in actual_port_map.items():
            line = line.replace(f"127.0.0.1:{actual}", f"127.0.0.1:{shown}")
        return line.replace(work + "/", "").replace(work, ".")
    failures, ran, skipped = [], 0, []

    for block in blocks:
        where = f"{name}:{block.fence_line}"
        skips = block.marker("skip") + [(n, NEEDS[arg][1]) for n, arg in block.marker("needs") if not NEEDS[arg][0]()]
        if skips:
            print(f"SKIP {where}: {'; '.join(arg for _, arg in skips)}")
            skipped.append(where)
            continue
        failed = False
        for n, setup in block.marker("setup"):
            rc, out = run("set -euo pipefail\n" + setup, work, env, args.timeout)
            if rc != 0:
                print(f"FAIL {where}: its setup ({name}:{n}) exited {rc if rc is not None else 'on the timeout'}:")
                print("\n".join("  " + line for line in out) if out else "  (no output)")
                failed = True
        servers = []
        substitutions = {}
        try:
            for n, arg in block.marker("serve"):
                if failed:
                    break
                root, shown = SERVE_ARG.match(arg).groups()
                try:
                    server = Nginx(os.path.join(work, root), state)
                except (RuntimeError, OSError) as e:
                    print(f"FAIL {where}: the serve marker ({name}:{n}): {e}")
                    failed = True
                    break
                servers.append(server)
                substitutions[f"127.0.0.1:{shown}"] = f"127.0.0.1:{server.port}"
                actual_port_map[server.port] = shown

            def localize(command):
                for shown, actual in substitutions.items():
                    command = command.replace(shown, actual)
                return command

            body = [(n, line) for n, line in block.body]
            transcript = any(line.startswith("$ ") for _, line in body)
            started = time.time()
            if failed:
                pass
            elif not transcript:
                script = "\n".join(line for _, line in body)
                rc, out = run("set -euo pipefail\n" + localize(script), work, env, args.timeout)
                if rc != 0:
                    print(f"FAIL {where}: the block exited {rc if rc is not None else f'on the {args.timeout:.0f} s timeout'}; its output:")
                    print("\n".join("  " + as_shown(line) for line in out) if out else "  (no output)")
                    failed = True
            else:
                first = next(i for i, (_, line) in enumerate(body) if line.strip())
                if not body[first][1].startswith("$ "):
                    print(f"FAIL {name}:{body[first][0]}: a transcript starts with a `$ ` command line")
                    failed = True
                steps = []
                for n, line in body[first:]:
                    if line.startswith("$ "):
                        steps.append((n, line[2:], []))
                    elif steps:
                        steps[-1][2].append((n, line))
                for n, command, expected in steps if not failed else []:
                    while expected and not expected[-1][1].strip():
                        expected.pop()
                    rc, out = run(localize(command), work, env, args.timeout)
                    out = [as_shown(line) for line in out]
                    masked_expected = [expected_masker(line) for _, line in expected]
                    masked_actual = [actual_masker(line) for line in out]
                    wants_error = any(ERROR_LINE.match(line) for _, line in expected)
                    problems = []
                    if rc is None:
                        problems.append(f"did not finish within {args.timeout:.0f} s")
                    elif wants_error and rc == 0:
                        problems.append("exited 0, but README shows an error")
                    elif not wants_error and rc != 0:
                        problems.append(f"exited {rc}")
                    if masked_expected != masked_actual:
                        problems.append("printed other lines than README shows")
                    if problems:
                        print(f"FAIL {name}:{n}: `{command}` {' and '.join(problems)}" + (":" if masked_expected != masked_actual else
                                                                                              " (its output is as shown)"))
                        if masked_expected != masked_actual:
                            print(f"--- {name}:{n} (the output README shows)")
                            print(f"+++ `{command}` (its output now)")
                            for line in unified(name, expected, out, masked_expected, masked_actual):
                                print(line)
                        failed = True
                        break
        finally:
            for server in servers:
                server.stop()
        if failed:
            failures.append(where)
        else:
            ran += 1
            kind = "transcript" if any(line.startswith("$ ") for _, line in block.body) else "commands"
            print(f"ok   {where} ({kind}, {time.time() - started:.1f} s)")

    print(f"{name}: {ran} blocks ran as shown, {len(failures)} failed, {len(skipped)} skipped (reasons above)")
    if failures:
        print(f"{name}: FAILED: {', '.join(failures)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
