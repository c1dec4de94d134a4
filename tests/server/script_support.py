"""What the Python clients of the shared scripts have in common.

The doors' cross-language checks (envoy_script/python_client.py,
rlqs_script/python_client.py) each generate Python stubs from our
proto/envoy files at test time, start the throttlekit-server binary with
the server.yaml beside their script, and read a script of `tag: body`
lines. Usage: python_client.py --server BIN --proto-dir DIR. Exit codes:
0 every answer as written, 1 a mismatch (naming the script's line), 2 the
environment is not usable.
"""

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile


def fail(message, code=1):
    print(f"python client: {message}", file=sys.stderr)
    sys.exit(code)


def import_grpc():
    """(grpc, google.protobuf.text_format), or exits 2 naming the package."""
    try:
        import grpc
        from google.protobuf import text_format
    except ImportError as e:
        fail(f"{e}: install python3-grpcio and python3-protobuf", 2)
    return grpc, text_format


class Stubs:
    """A temporary directory of stubs generated from `protos` (paths under
    `proto_dir`) with protoc and grpc_python_plugin (the ones the C++ build
    uses), put first on sys.path; removed on exit."""

    def __init__(self, proto_dir, protos):
        self.proto_dir = proto_dir
        self.protos = protos
        self.out = None

    def __enter__(self):
        plugin = shutil.which("grpc_python_plugin")
        if plugin is None or shutil.which("protoc") is None:
            fail("protoc and grpc_python_plugin are needed "
                 "(protobuf-compiler, protobuf-compiler-grpc)", 2)
        self.out = tempfile.mkdtemp(prefix="throttlekit-pystubs-")
        subprocess.run(
            ["protoc", f"-I{self.proto_dir}", f"--python_out={self.out}",
             f"--grpc_python_out={self.out}",
             f"--plugin=protoc-gen-grpc_python={plugin}"] + self.protos,
            check=True)
        sys.path.insert(0, self.out)
        return self

    def __exit__(self, *exc):
        shutil.rmtree(self.out, ignore_errors=True)
        return False


def read_entries(path):
    """[(line number, tag, body)] of a script's `tag: body` lines (a line
    without a colon is a tag alone). A line starting with whitespace
    continues the one before; blank lines and # comments are skipped."""
    entries = []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            if line[0].isspace():
                if not entries:
                    fail(f"{path}:{number}: a continuation with nothing "
                         "to continue", 2)
                first, tag, body = entries[-1]
                entries[-1] = (first, tag, f"{body} {line.strip()}")
                continue
            tag, _, body = line.partition(":")
            entries.append((number, tag.strip(), body.strip()))
    return entries


class Server:
    """throttlekit-server `binary` with `config`, on a free loopback port
    (`port`); stopped with SIGTERM on exit, which must end it within 10 s
    (else `problems` says so)."""

    def __init__(self, binary, config):
        self.binary = binary
        self.config = config
        self.proc = None
        self.port = None
        self.problems = []

    def __enter__(self):
        self.proc = subprocess.Popen(
            [self.binary, "--config", self.config, "--listen", "127.0.0.1:0",
             "--reload-interval-ms", "0"],
            stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        # "throttlekit-server: listening on port N, store memory, ..."
        marker = "listening on port "
        if marker not in line:
            self.proc.kill()
            fail(f"the server did not start: {line!r}")
        self.port = int(line.split(marker)[1].split(",")[0])
        return self

    def __exit__(self, *exc):
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.problems.append(
                "the server did not stop within 10 s of SIGTERM")
        return False


def beside(script_file, name):
    """The path of `name` in the directory of `script_file`."""
    return os.path.join(os.path.dirname(os.path.abspath(script_file)), name)


def client_main(protos, run):
    """A client's main: parses its arguments, generates the stubs of
    `protos` and calls run(server binary, grpc, text_format), which
    imports them and returns (mismatches, a summary); exits 1 naming the
    mismatches, or prints the summary."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--server", required=True)
    parser.add_argument("--proto-dir", required=True)
    args = parser.parse_args()
    grpc, text_format = import_grpc()
    with Stubs(args.proto_dir, protos):
        mismatches, summary = run(args.server, grpc, text_format)
    if mismatches:
        fail("\n".join(mismatches))
    print(f"python client: {summary} (grpcio {grpc.__version__})")
