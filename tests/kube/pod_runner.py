"""A process runner playing kubelet for the pods of chosen images on the KWOK nodes (test support).

It polls the API server for pods bound to the KWOK nodes whose containers use an image it knows
(KWOK's own stages leave those pods alone, control_plane.PROCESS_IMAGES), and for each one:

1. gives it a pod IP (stable per namespace/name, in a /24 of RUNNER_POD_CIDR) and its volumes as folders
   (pod_volumes.py), publishes its DNS names, patches status: Pending with the IP;
2. runs the init containers to completion, then the containers, each a local process in a
   sandbox of its own (pod_sandbox.py): the image's entrypoint with the pod's command/args and env;
3. runs the readinessProbes (httpGet, tcpSocket, exec) and patches Ready / ContainersReady as
   kubelet does; restarts exited containers per restartPolicy; for Job pods sets the phase
   Succeeded/Failed when their containers end, so the Job controller completes the Job;
4. on deletion: SIGTERM, the pod's grace period, SIGKILL, then removes the pod (grace 0), so a
   StatefulSet makes the pod again only once its process is gone, and runs the new one.

`events` records starts, readiness changes and stops in order, for tests to check sequences.
"""

from __future__ import annotations

import contextlib
import http.client
import ipaddress
import logging
import os
import random
import signal
import socket
import ssl
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.kube.kube_api import ApiError, KubeApi, pod_path
from tests.kube.pod_sandbox import (
    HOSTS_FILE,
    Image,
    Mount,
    argv,
    container_env,
    dns_names,
    hosts_text,
    sandbox_script,
)
from tests.kube.pod_volumes import VolumeNotReady, object_data, volume_directory

log = logging.getLogger("pod_runner")

RUNNER_POD_CIDR = "127.65.0.0/16"
"""Apart from KWOK's 127.64.0.0/16, so an address is never handed out twice. Each runner takes one /24
(block b: 127.65.b.0/24), so test sessions running at once on one machine never share an address."""
API_SERVICE_NET = "127.66.0.0/16"
"""The runner with block b serves the `kubernetes` Service on 127.66.b.1:443 (its kube-proxy, to the API
server): in-cluster clients such as Spark use https://kubernetes.default.svc, which /etc/hosts points there."""
BLOCK_ATTEMPTS_MAX = 32
API_SERVICE_NAMES = (
    "kubernetes",
    "kubernetes.default",
    "kubernetes.default.svc",
    "kubernetes.default.svc.cluster.local",
)
CLUSTER_DOMAIN = "cluster.local"
PROXY_BUFFER_BYTES = 64 * 1024
NODE_IP = "127.0.0.1"
POLL_INTERVAL_S = 0.5
WORKER_TICK_S = 0.2
PROBE_PERIOD_MAX_S = 2.0
"""Probes run at the pod's periodSeconds, at most this far apart: tests wait on readiness."""
RESTART_BACKOFF_MIN_S = 1.0
RESTART_BACKOFF_MAX_S = 10.0
"""kubelet's back-off starts at 10 s and caps at 5 min; a test cannot wait that long."""
DEFAULT_GRACE_S = 30
STOP_WAIT_S = 10.0
RETRY_VOLUMES_S = 1.0
TERMINATION_MESSAGE_BYTES_MAX = 4096
"""kubelet's cap on a termination message."""
TERMINATION_LOG_PATH = "/dev/termination-log"
EXEC_PROBE_ENV = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}


@dataclass(frozen=True)
class Event:
    """One thing the runner did: kind is start | exit | ready | unready | stop | deleted."""

    time_s: float
    kind: str
    pod: str
    container: str = ""
    detail: str = ""


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _probe(
    probe: Mapping[str, Any], pod_ip: str, container: Mapping[str, Any], pid: int, env: Mapping[str, str]
) -> bool:
    """One readiness check, as kubelet makes it."""
    timeout_s = float(probe.get("timeoutSeconds") or 1)

    def port_of(value: Any) -> int:
        if isinstance(value, int) or str(value).isdigit():
            return int(value)
        ports = {p.get("name"): p["containerPort"] for p in container.get("ports") or []}
        return int(ports[value])

    try:
        if "httpGet" in probe:
            get = probe["httpGet"]
            host = get.get("host") or pod_ip
            connection: http.client.HTTPConnection
            if get.get("scheme", "HTTP").upper() == "HTTPS":
                context = ssl._create_unverified_context()  # kubelet does not verify probe certificates
                connection = http.client.HTTPSConnection(host, port_of(get["port"]), timeout=timeout_s, context=context)
            else:
                connection = http.client.HTTPConnection(host, port_of(get["port"]), timeout=timeout_s)
            try:
                headers = {h["name"]: h["value"] for h in get.get("httpHeaders") or []}
                connection.request("GET", get.get("path") or "/", headers=headers)
                return 200 <= connection.getresponse().status < 400
            finally:
                connection.close()
        if "tcpSocket" in probe:
            tcp = probe["tcpSocket"]
            with socket.create_connection((tcp.get("host") or pod_ip, port_of(tcp["port"])), timeout=timeout_s):
                return True
        if "exec" in probe:
            env_words = [f"{k}={v}" for k, v in {**EXEC_PROBE_ENV, **env}.items()]
            command = ["nsenter", "--target", str(pid), "--mount", "--root", "--wd=/", "/usr/bin/env", "-i"]
            done = subprocess.run(
                [*command, *env_words, *probe["exec"]["command"]],
                capture_output=True,
                timeout=max(timeout_s, 1.0),
                check=False,
            )
            return done.returncode == 0
    except (OSError, subprocess.TimeoutExpired, http.client.HTTPException, KeyError, ValueError):
        return False
    return False  # grpc and unknown handlers: never ready


@dataclass
class Container:
    """One container's process and what kubelet tracks about it."""

    spec: Mapping[str, Any]
    env: dict[str, str]
    script: Path
    log_path: Path
    termination_file: Path
    process: subprocess.Popen[bytes] | None = None
    started_at: str = ""
    restart_count: int = 0
    ready: bool = False
    successes: int = 0
    failures: int = 0
    next_probe_s: float = 0.0
    restart_at_s: float = 0.0
    terminated: dict[str, Any] | None = None

    @property
    def name(self) -> str:
        return str(self.spec["name"])

    def start(self) -> None:
        self.termination_file.write_bytes(b"")
        with self.log_path.open("ab") as output:
            self.process = subprocess.Popen(
                ["unshare", "--mount", "--uts", "--propagation", "private", "sh", str(self.script)],
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.started_at = _now()
        self.terminated = None
        self.ready = False
        self.successes = self.failures = 0
        delay = float((self.spec.get("readinessProbe") or {}).get("initialDelaySeconds") or 0)
        self.next_probe_s = time.monotonic() + delay

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self, grace_s: float) -> None:
        """SIGTERM to the container's process, SIGKILL to its whole group after the grace period."""
        process = self.process
        if process is None:
            return
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=grace_s)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=STOP_WAIT_S)

    def reap(self) -> int | None:
        """The exit code once the process ended (recorded as kubelet's terminated state)."""
        if self.process is None or self.process.poll() is None:
            return None
        code = self.process.returncode
        code = 128 - code if code < 0 else code  # killed by signal n: 128+n, as a runtime reports it
        self.terminated = {
            "exitCode": code,
            "reason": "Completed" if code == 0 else "Error",
            "startedAt": self.started_at,
            "finishedAt": _now(),
        }
        message = self.termination_file.read_bytes()[:TERMINATION_MESSAGE_BYTES_MAX]
        if not message and code != 0 and self.spec.get("terminationMessagePolicy") == "FallbackToLogsOnError":
            message = self.log_path.read_bytes()[-TERMINATION_MESSAGE_BYTES_MAX:]
        if message:
            self.terminated["message"] = message.decode(errors="replace")
        self.process = None
        self.ready = False
        return code

    def status(self, image: str) -> dict[str, Any]:
        if self.running():
            state: dict[str, Any] = {"running": {"startedAt": self.started_at}}
        elif self.terminated is not None and self.restart_at_s == 0:
            state = {"terminated": self.terminated}
        else:
            state = {"waiting": {"reason": "CrashLoopBackOff" if self.restart_count else "ContainerCreating"}}
        return {
            "name": self.name,
            "image": image,
            "imageID": image,
            "containerID": f"process://{self.process.pid}" if self.process else "",
            "ready": self.ready,
            "started": self.running(),
            "restartCount": self.restart_count,
            "state": state,
        }


@dataclass
class PodWorker:
    """kubelet's pod worker for one pod uid, on a thread of its own."""

    runner: PodRunner
    pod: dict[str, Any]
    deleting: threading.Event = field(default_factory=threading.Event)
    gone: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None
    containers: list[Container] = field(default_factory=list)
    init_statuses: list[dict[str, Any]] = field(default_factory=list)
    pod_ip: str = ""

    @property
    def key(self) -> str:
        return f"{self.pod['metadata']['namespace']}/{self.pod['metadata']['name']}"

    @property
    def uid(self) -> str:
        return str(self.pod["metadata"]["uid"])

    def start(self) -> None:
        self.thread = threading.Thread(target=self._guarded, name=f"pod {self.key}", daemon=True)
        self.thread.start()

    def update(self, pod: dict[str, Any]) -> None:
        self.pod = pod
        if pod["metadata"].get("deletionTimestamp"):
            self.deleting.set()

    def _guarded(self) -> None:
        try:
            self._run()
        except Exception:
            log.exception("pod worker %s failed", self.key)
            self.runner.record("error", self.key, detail="worker failed; see the runner log")
        finally:
            for container in self.containers:
                container.stop(0)
            self.runner.unpublish(self.uid)
            if self.deleting.is_set() and not self.gone.is_set():
                options = {"gracePeriodSeconds": 0, "preconditions": {"uid": self.uid}}
                ns, name = self.key.split("/")
                self.runner.api.delete(pod_path(ns, name), options)
                self.runner.record("deleted", self.key)

    def _stopping(self) -> bool:
        return self.deleting.is_set() or self.gone.is_set() or self.runner.stopping.is_set()

    def _run(self) -> None:
        runner = self.runner
        meta = self.pod["metadata"]
        spec = self.pod["spec"]
        self.pod_ip = runner.pod_ip(meta["namespace"], meta["name"])
        pod_dir = runner.work_dir / "pods" / f"{meta['namespace']}_{meta['name']}_{self.uid[:8]}"
        mounts = self._volumes(pod_dir)
        if mounts is None:
            return
        runner.publish(self.uid, self.pod_ip, dns_names(self.pod))
        self._patch(phase="Pending")
        for spec_init in spec.get("initContainers") or []:
            container = self._container(spec_init, pod_dir, mounts)
            code = self._run_to_end(container)
            if code is None:
                return
            self.init_statuses.append(container.status(spec_init["image"]))
            if code != 0:
                self._patch(phase="Failed")
                return
        self.containers = [self._container(c, pod_dir, mounts) for c in spec["containers"]]
        for container in self.containers:
            container.start()
            runner.record("start", self.key, container.name)
        self._patch(phase="Running")
        self._supervise()

    def _volumes(self, pod_dir: Path) -> dict[str, Path] | None:
        """Volume name -> folder, retried while a source is not there yet (None: the pod went)."""
        runner = self.runner
        node_root = runner.node_root(self.pod["spec"]["nodeName"])
        while not self._stopping():
            try:
                return {
                    volume["name"]: volume_directory(
                        runner.api, self.pod, volume, pod_dir, node_root, self.pod_ip, NODE_IP
                    )
                    for volume in self.pod["spec"].get("volumes") or []
                }
            except (VolumeNotReady, ApiError) as error:
                runner.record("waiting", self.key, detail=str(error))
                time.sleep(RETRY_VOLUMES_S)
        return None

    def _container(self, spec: Mapping[str, Any], pod_dir: Path, volumes: Mapping[str, Path]) -> Container:
        runner = self.runner
        image = runner.images[spec["image"]]
        namespace = self.pod["metadata"]["namespace"]

        def source(kind: str, name: str, key: str) -> dict[str, str]:
            data = object_data(runner.api, namespace, kind, name, optional=True)
            return {k: v.decode() for k, v in data.items() if not key or k == key}

        base = {**image.env, **runner.injected_env(self.pod_ip)}
        env = container_env(self.pod, spec, base, self.pod_ip, NODE_IP, source)
        mounts = []
        for mount in spec.get("volumeMounts") or []:
            folder = volumes[mount["name"]]
            if mount.get("subPath"):
                folder = folder / mount["subPath"]
                if not folder.exists():
                    folder.mkdir(parents=True)
            mounts.append(Mount(folder, mount["mountPath"], bool(mount.get("readOnly"))))
        name = spec["name"]
        script = pod_dir / f"{name}.sh"
        layer = pod_dir / "rootfs" / name
        termination = pod_dir / "termination" / name
        termination.parent.mkdir(parents=True, exist_ok=True)
        termination.touch()
        script.write_text(
            sandbox_script(
                layer,
                image,
                mounts,
                runner.hosts_dir,
                env,
                argv(image, spec, env),
                spec.get("workingDir") or image.workdir,
                (termination, spec.get("terminationMessagePath") or TERMINATION_LOG_PATH),
                dns_names(self.pod)[-1],
            )
        )
        log_path = runner.work_dir / "logs" / f"{pod_dir.name}_{name}.log"
        return Container(spec=spec, env=env, script=script, log_path=log_path, termination_file=termination)

    def _run_to_end(self, container: Container) -> int | None:
        """An init container: start it and wait for its exit (None: the pod was deleted meanwhile)."""
        container.start()
        self.runner.record("start", self.key, container.name)
        while container.running():
            if self._stopping():
                container.stop(self._grace_s())
                return None
            time.sleep(WORKER_TICK_S)
        code = container.reap()
        self.runner.record("exit", self.key, container.name, f"code {code}")
        return code

    def _grace_s(self) -> float:
        meta, spec = self.pod["metadata"], self.pod["spec"]
        grace = meta.get("deletionGracePeriodSeconds")
        if grace is None:
            grace = spec.get("terminationGracePeriodSeconds", DEFAULT_GRACE_S)
        return float(grace)

    def _supervise(self) -> None:
        restart_policy = self.pod["spec"].get("restartPolicy", "Always")
        while True:
            if self._stopping():
                grace = 0.0 if self.gone.is_set() or self.runner.stopping.is_set() else self._grace_s()
                for container in self.containers:
                    container.stop(grace)
                    self.runner.record("stop", self.key, container.name, f"grace {grace:g} s")
                return
            changed = False
            now = time.monotonic()
            for container in self.containers:
                changed |= self._tend(container, restart_policy, now)
            if all(c.terminated is not None and c.restart_at_s == 0 for c in self.containers):
                failed = any(c.terminated and c.terminated["exitCode"] != 0 for c in self.containers)
                self._patch(phase="Failed" if failed else "Succeeded")
                return
            if changed:
                self._patch(phase="Running")
            time.sleep(WORKER_TICK_S)

    def _tend(self, container: Container, restart_policy: str, now: float) -> bool:
        """Reap, restart and probe one container; True when its status changed."""
        if container.restart_at_s and now >= container.restart_at_s:
            container.restart_at_s = 0
            container.restart_count += 1
            container.start()
            self.runner.record("start", self.key, container.name, f"restart {container.restart_count}")
            return True
        code = container.reap()
        if code is not None:
            self.runner.record("exit", self.key, container.name, f"code {code}")
            if restart_policy == "Always" or (restart_policy == "OnFailure" and code != 0):
                backoff = min(RESTART_BACKOFF_MIN_S * 2**container.restart_count, RESTART_BACKOFF_MAX_S)
                container.restart_at_s = now + backoff
            return True
        if not container.running() or now < container.next_probe_s:
            return False
        probe = container.spec.get("readinessProbe")
        was = container.ready
        if probe is None:
            container.ready = True
        else:
            container.next_probe_s = now + min(float(probe.get("periodSeconds") or 10), PROBE_PERIOD_MAX_S)
            assert container.process is not None
            if _probe(probe, self.pod_ip, container.spec, container.process.pid, container.env):
                container.successes, container.failures = container.successes + 1, 0
                if container.successes >= int(probe.get("successThreshold") or 1):
                    container.ready = True
            else:
                container.failures, container.successes = container.failures + 1, 0
                if container.failures >= int(probe.get("failureThreshold") or 3):
                    container.ready = False
        if container.ready != was:
            self.runner.record("ready" if container.ready else "unready", self.key, container.name)
            return True
        return False

    def _patch(self, phase: str) -> None:
        """Write the pod's status as kubelet would (JSON merge patch; conditions kept by type)."""
        spec = self.pod["spec"]
        images = {c["name"]: c["image"] for c in [*spec.get("initContainers", []), *spec["containers"]]}
        statuses = [c.status(images[c.name]) for c in self.containers]
        initialized = len(self.init_statuses) == len(spec.get("initContainers") or []) and all(
            s["state"].get("terminated", {}).get("exitCode") == 0 for s in self.init_statuses
        )
        ready = phase == "Running" and bool(self.containers) and all(c.ready and c.running() for c in self.containers)
        wanted = {
            "PodReadyToStartContainers": True,
            "Initialized": initialized,
            "ContainersReady": ready,
            "Ready": ready,
        }
        previous = {c["type"]: c for c in (self.pod.get("status") or {}).get("conditions") or []}
        conditions = [c for t, c in previous.items() if t not in wanted]
        for kind, value in wanted.items():
            text = "True" if value else "False"
            old = previous.get(kind)
            since = old["lastTransitionTime"] if old and old.get("status") == text else _now()
            conditions.append({"type": kind, "status": text, "lastTransitionTime": since})
        status: dict[str, Any] = {
            "phase": phase,
            "podIP": self.pod_ip,
            "podIPs": [{"ip": self.pod_ip}],
            "hostIP": NODE_IP,
            "hostIPs": [{"ip": NODE_IP}],
            "startTime": (self.pod.get("status") or {}).get("startTime") or _now(),
            "conditions": conditions,
            "initContainerStatuses": self.init_statuses,
            "containerStatuses": statuses,
        }
        ns, name = self.key.split("/")
        try:
            self.pod = self.runner.api.merge_patch(pod_path(ns, name, "status"), {"status": status})
        except ApiError as error:
            if error.status != 404:
                raise


class ServiceProxy:
    """kube-proxy for one Service: TCP from listen_ip:port to `upstream` (host:port), a thread per direction."""

    def __init__(self, listen_ip: str, port: int, upstream: str) -> None:
        host, _, upstream_port = upstream.partition(":")
        self.listen_ip = listen_ip
        self.upstream = (host, int(upstream_port))
        self.server = socket.create_server((listen_ip, port))
        self.server.settimeout(POLL_INTERVAL_S)
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._accept, name=f"proxy {listen_ip}:{port}", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join(timeout=STOP_WAIT_S)
        self.server.close()

    def _accept(self) -> None:
        while not self.stopping.is_set():
            try:
                client, _ = self.server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.upstream, timeout=STOP_WAIT_S)
            except OSError:
                client.close()
                continue
            threading.Thread(target=self._serve, args=(client, upstream), daemon=True).start()

    def _serve(self, client: socket.socket, upstream: socket.socket) -> None:
        back = threading.Thread(target=self._pump, args=(upstream, client), daemon=True)
        back.start()
        self._pump(client, upstream)
        back.join()
        client.close()
        upstream.close()

    @staticmethod
    def _pump(source: socket.socket, target: socket.socket) -> None:
        source.settimeout(None)
        try:
            while chunk := source.recv(PROXY_BUFFER_BYTES):
                target.sendall(chunk)
            target.shutdown(socket.SHUT_WR)
        except OSError:
            with contextlib.suppress(OSError):
                target.shutdown(socket.SHUT_RDWR)


class PodRunner:
    """Start with start(), stop with stop(): polls pods and runs those of `images` on `node_names`."""

    def __init__(
        self,
        api: KubeApi,
        work_dir: Path,
        node_names: Sequence[str],
        images: Mapping[str, Image],
        api_server: str,
    ) -> None:
        self.api = api
        self.work_dir = work_dir
        self.node_names = tuple(node_names)
        self.images = dict(images)
        self.api_server = api_server
        self.hosts_dir = work_dir / "dns"
        self.stopping = threading.Event()
        self.events: list[Event] = []
        self._workers: dict[str, PodWorker] = {}
        self._addresses: dict[str, str] = {}
        self._records: dict[str, tuple[str, list[str]]] = {}
        self._proxy, block = self._claim_block(api_server.removeprefix("https://"))
        self.api_service_ip = self._proxy.listen_ip
        self._service_records: dict[str, list[str]] = {self.api_service_ip: list(API_SERVICE_NAMES)}
        self._hosts = ""
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._network = list(ipaddress.IPv4Network(RUNNER_POD_CIDR).subnets(new_prefix=24))[block]
        self._started_s = time.monotonic()
        self._log = (work_dir / "runner.log").open("a", buffering=1)

    @staticmethod
    def _claim_block(upstream: str) -> tuple[ServiceProxy, int]:
        """A free /24 block: the one whose kube-proxy address this runner could bind."""
        services = list(ipaddress.IPv4Network(API_SERVICE_NET).subnets(new_prefix=24))
        for block in random.sample(range(1, len(services)), BLOCK_ATTEMPTS_MAX):
            try:
                return ServiceProxy(str(services[block][1]), 443, upstream), block
            except OSError:
                continue  # another session's runner holds it
        raise RuntimeError(f"no free address block in {API_SERVICE_NET} after {BLOCK_ATTEMPTS_MAX} attempts")

    # ------------------------------------------------------------ bookkeeping

    def record(self, kind: str, pod: str, container: str = "", detail: str = "") -> None:
        event = Event(time.monotonic() - self._started_s, kind, pod, container, detail)
        with self._lock:
            self.events.append(event)
        self._log.write(f"{event.time_s:9.2f} {kind:8} {pod} {container} {detail}\n")

    def elapsed_s(self) -> float:
        """Now on the clock of `Event.time_s`."""
        return time.monotonic() - self._started_s

    def events_of(self, kind: str, prefix: str = "") -> list[Event]:
        with self._lock:
            return [e for e in self.events if e.kind == kind and e.pod.startswith(prefix)]

    def node_root(self, node: str) -> Path:
        root = self.work_dir / "nodes" / node
        root.mkdir(parents=True, exist_ok=True)
        return root

    def pod_ip(self, namespace: str, name: str) -> str:
        """Stable per pod name, as a StatefulSet pod keeps its name (and, here, its address)."""
        key = f"{namespace}/{name}"
        with self._lock:
            if key not in self._addresses:
                self._addresses[key] = str(self._network[len(self._addresses) + 2])
            return self._addresses[key]

    def injected_env(self, pod_ip: str) -> dict[str, str]:
        """What the runner's 'network' adds: the API server (kubelet's KUBERNETES_SERVICE_* point at a
        ClusterIP nothing routes here) and the one address a process may bind."""
        host, _, port = self.api_server.removeprefix("https://").partition(":")
        return {
            "KUBERNETES_SERVICE_HOST": host,
            "KUBERNETES_SERVICE_PORT": port,
            "KUBERNETES_SERVICE_PORT_HTTPS": port,
            "SHOAL_LISTEN_HOST": pod_ip,
        }

    def publish(self, uid: str, ip: str, names: list[str]) -> None:
        with self._lock:
            self._records[uid] = (ip, names)
            self._write_hosts_locked()

    def unpublish(self, uid: str) -> None:
        with self._lock:
            if self._records.pop(uid, None) is not None:
                self._write_hosts_locked()

    def _write_hosts_locked(self) -> None:
        records: dict[str, list[str]] = {}
        for ip, names in self._records.values():
            records.setdefault(ip, []).extend(names)
        for ip, names in self._service_records.items():
            records.setdefault(ip, []).extend(names)
        text = hosts_text(records)
        if text == self._hosts:
            return
        partial = self.hosts_dir / f".{HOSTS_FILE}.partial"
        partial.write_text(text)
        os.replace(partial, self.hosts_dir / HOSTS_FILE)
        self._hosts = text

    def _refresh_services(self) -> None:
        """Cluster DNS for headless Services (Spark's driver Service among them): their names resolve
        to the addresses in their EndpointSlices, as CoreDNS answers them."""
        records: dict[str, list[str]] = {self.api_service_ip: list(API_SERVICE_NAMES)}
        headless = {
            (svc["metadata"]["namespace"], svc["metadata"]["name"])
            for svc in self.api.items("/api/v1/services")
            if svc["spec"].get("clusterIP") == "None"
        }
        for piece in self.api.items("/apis/discovery.k8s.io/v1/endpointslices"):
            owner = (
                piece["metadata"]["namespace"],
                (piece["metadata"].get("labels") or {}).get("kubernetes.io/service-name"),
            )
            if owner not in headless:
                continue
            namespace, service = owner
            for endpoint in piece.get("endpoints") or []:
                names = [f"{service}.{namespace}.svc", f"{service}.{namespace}.svc.{CLUSTER_DOMAIN}"]
                for address in endpoint.get("addresses") or []:
                    known = records.setdefault(address, [])
                    known.extend(n for n in names if n not in known)
                break  # one address per name: /etc/hosts answers with the first line anyway
        with self._lock:
            self._service_records = records
            self._write_hosts_locked()

    # ------------------------------------------------------------ the loop

    def start(self) -> None:
        (self.work_dir / "logs").mkdir(parents=True, exist_ok=True)
        self.hosts_dir.mkdir(parents=True, exist_ok=True)
        with self._lock:
            self._write_hosts_locked()
        self._proxy.start()
        self._thread = threading.Thread(target=self._loop, name="pod runner", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop polling and end every process (the pods stay as they are in the API)."""
        self.stopping.set()
        if self._thread is not None:
            self._thread.join(timeout=STOP_WAIT_S)
        for worker in list(self._workers.values()):
            if worker.thread is not None:
                worker.thread.join(timeout=STOP_WAIT_S + 5)
        self._proxy.stop()
        self._log.close()

    def _ours(self, pod: Mapping[str, Any]) -> bool:
        spec = pod["spec"]
        images = [c["image"] for c in [*spec.get("initContainers", []), *spec.get("containers", [])]]
        return spec.get("nodeName") in self.node_names and any(image in self.images for image in images)

    def _loop(self) -> None:
        while not self.stopping.wait(POLL_INTERVAL_S):
            try:
                pods = [pod for pod in self.api.items("/api/v1/pods") if self._ours(pod)]
                self._refresh_services()
            except (ApiError, OSError) as error:
                log.warning("listing pods failed: %s", error)
                continue
            seen = set()
            for pod in pods:
                uid = str(pod["metadata"]["uid"])
                seen.add(uid)
                worker = self._workers.get(uid)
                if worker is not None:
                    worker.update(pod)
                    continue
                phase = (pod.get("status") or {}).get("phase")
                if phase in ("Succeeded", "Failed") and not pod["metadata"].get("deletionTimestamp"):
                    continue  # finished (by an earlier runner); nothing to run
                worker = PodWorker(self, pod)
                worker.update(pod)
                self._workers[uid] = worker
                worker.start()
            for uid, worker in list(self._workers.items()):
                if uid not in seen:
                    worker.gone.set()
                if worker.thread is not None and not worker.thread.is_alive():
                    del self._workers[uid]
