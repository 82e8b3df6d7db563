"""The server under soak: `troupe serve` on a free loopback port, and what
the soak reads from it: /metrics, the admin snapshot, /proc/PID/status."""

import json
import re
import signal
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class troupe_server:
    """A `troupe serve` process started with `args` (its log in `log_path`, default /tmp/troupe-soak-PORT.log)."""

    def __init__(self, binary, args, log_path=""):
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.command = [binary, "serve", "--host", "127.0.0.1", "--port", str(self.port), *args]
        self.log_path = log_path or f"/tmp/troupe-soak-{self.port}.log"
        self.log = open(self.log_path, "wb")
        self.process = subprocess.Popen(self.command, stdout=self.log, stderr=subprocess.STDOUT)

    def wait_ready(self, timeout_s=120):
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"troupe serve exited with {self.process.returncode}; log: {self.log_path}")
            try:
                with urllib.request.urlopen(self.base_url + "/ready", timeout=1) as response:
                    if response.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.2)
        raise RuntimeError(f"troupe serve not ready after {timeout_s} s; log: {self.log_path}")

    def request_json(self, path, method="GET", body=None, timeout_s=30):
        """(status, parsed JSON body) of one request; error statuses included."""
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.base_url + path, data=data, method=method,
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=timeout_s) as response:
                return response.status, json.loads(response.read() or b"null")
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read() or b"null")

    def metrics(self):
        """Samples of /metrics as {(name, frozenset(labels)): value}."""
        with urllib.request.urlopen(self.base_url + "/metrics", timeout=30) as response:
            text = response.read().decode()
        samples = {}
        for line in text.splitlines():
            if not line or line.startswith("#"):
                continue
            match = re.match(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$', line)
            if not match:
                raise RuntimeError(f"malformed metrics line: {line!r}")
            labels = frozenset(re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"', match.group(2) or ""))
            samples[(match.group(1), labels)] = float(match.group(3))
        return samples

    def rss_bytes(self):
        """The server's resident memory (VmRSS), bytes; 0 once it exited."""
        try:
            with open(f"/proc/{self.process.pid}/status") as status:
                for line in status:
                    if line.startswith("VmRSS:"):
                        return int(line.split()[1]) * 1024
        except OSError:
            pass
        return 0

    def error_log_lines(self):
        """Lines the server logged at error or critical level."""
        self.log.flush()
        with open(self.log_path, errors="replace") as log:
            return [line.rstrip() for line in log if "[error]" in line or "[critical]" in line]

    def stop(self, timeout_s=60):
        """SIGTERM, then the exit code (SIGKILL after `timeout_s`: None)."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            code = self.process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            code = None
        self.log.close()
        return code


def metric(samples, name, **labels):
    """Sum of the samples of `name` whose labels include `labels`."""
    wanted = set(labels.items())
    return sum(value for (sample, sample_labels), value in samples.items()
               if sample == name and wanted <= set(sample_labels))


class rss_sampler(threading.Thread):
    """Samples the server's VmRSS every `interval_s`, with how many requests had ended by then."""

    def __init__(self, server, progress, interval_s=0.25):
        super().__init__(daemon=True)
        self.server, self.progress, self.interval_s = server, progress, interval_s
        self.samples = []  # (seconds since start, bytes, requests ended)
        self.started = time.monotonic()
        self.stopping = threading.Event()

    def run(self):
        while not self.stopping.is_set():
            self.samples.append((time.monotonic() - self.started, self.server.rss_bytes(), self.progress()))
            self.stopping.wait(self.interval_s)

    def stop(self):
        self.stopping.set()
        self.join()
